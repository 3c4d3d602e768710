package config

import (
	"slices"
	"testing"
)

func TestOIDCDefaults(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(authServers+`auth:
  oidc:
    issuer: https://idp.example.com/realms/robots
    resource: https://gw.example.com/mcp
`))
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Auth.OIDC
	if o == nil || o.Audience != "https://gw.example.com/mcp" || o.PrincipalClaim != "sub" || o.RolesClaim != "" ||
		!slices.Equal(o.Algorithms, DefaultOIDCAlgorithms) || len(o.RequiredScopes) != 0 || o.Line != 3 {
		t.Fatalf("oidc: %+v", o)
	}
	if !cfg.Auth.On() {
		t.Error("auth.oidc alone does not turn authentication on")
	}

	cfg, err = Parse("robot.yaml", []byte(authServers+`auth:
  oidc:
    issuer: http://127.0.0.1:5556/dex
    resource: http://localhost:8080/mcp
    audience: mcp-gateway
    principal_claim: email
    roles_claim: realm_access.roles
    required_scopes: [mcp:tools, robots]
    algorithms: [ES256, EdDSA]
`))
	if err != nil {
		t.Fatal(err)
	}
	o = cfg.Auth.OIDC
	if o.Audience != "mcp-gateway" || o.PrincipalClaim != "email" || o.RolesClaim != "realm_access.roles" ||
		!slices.Equal(o.RequiredScopes, []string{"mcp:tools", "robots"}) || !slices.Equal(o.Algorithms, []string{"ES256", "EdDSA"}) {
		t.Fatalf("oidc: %+v", o)
	}
}

func TestOIDCProblems(t *testing.T) {
	errs := parseErrors(t, authServers+`auth:
  oidc:
    issuer: http://idp.example.com/realms/robots
    resource: https://gw.example.com/mcp#top
    audience: " padded "
    principal_claim: "two words"
    roles_claim: realm_access..roles
    required_scopes: [mcp:tools, "a\"b", mcp:tools]
    algorithms: [RS256, none, HS256, RS257, RS256]
    issue: oops
`)
	assertReported(t, errs, []want{
		{4, `auth.oidc.issuer: must be https://`},
		{4, `http:// is allowed only for a loopback host`},
		{5, `auth.oidc.resource: must not have a query or a fragment`},
		{6, `auth.oidc.audience: must be the value a token's aud claim carries`},
		{7, `auth.oidc.principal_claim: "two words" holds a space`},
		{8, `auth.oidc.roles_claim: "realm_access..roles" is not a claim name or a dotted path`},
		{9, `auth.oidc.required_scopes[1]: "a\"b" is not a scope`},
		{9, `auth.oidc.required_scopes[2]: scope "mcp:tools" is listed twice`},
		{10, `auth.oidc.algorithms[1]: none is never accepted`},
		{10, `auth.oidc.algorithms[2]: HS256 is an HMAC algorithm, refused`},
		{10, `auth.oidc.algorithms[3]: "RS257" is not a JWS algorithm the gateway accepts`},
		{10, `auth.oidc.algorithms[4]: RS256 is listed twice`},
		{11, `unknown key "issue"`},
	})

	errs = parseErrors(t, authServers+`auth:
  oidc:
    audience: gw
`)
	assertReported(t, errs, []want{
		{3, `auth.oidc: issuer is missing`},
		{3, `auth.oidc: resource is missing`},
	})

	errs = parseErrors(t, authServers+`auth:
  oidc:
    issuer: ftp://idp.example.com
    resource: http://gw.example.com/mcp
    algorithms: []
`)
	assertReported(t, errs, []want{
		{4, `auth.oidc.issuer: must be an https:// URL`},
		{5, `auth.oidc.resource: must be https://`},
		{6, `auth.oidc.algorithms: is empty`},
	})

	errs = parseErrors(t, authServers+`auth:
  oidc: {}
`)
	assertReported(t, errs, []want{{3, `auth.oidc: issuer is missing`}})

	errs = parseErrors(t, authServers+`auth:
  oidc:
`)
	assertReported(t, errs, []want{{3, `auth.oidc: has no settings`}})
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true, "[::1]": true,
		"10.0.0.1": false, "idp.example.com": false, "localhost.example.com": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
