package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestUpstreamOAuth(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`servers:
  - name: cloud
    url: https://mcp.example.com/mcp
    headers_env: {x-api-key: CLOUD_API_KEY}
    oauth:
      token_url: https://login.example.com/oauth2/token
      client_id: mcp-gateway-cell-7
      client_secret_env: CLOUD_CLIENT_SECRET
      scopes: [tools.read, tools.call]
  - name: local
    url: http://127.0.0.1:9000/mcp
    oauth:
      token_url: http://localhost:8081/token
      client_id: gw
      client_secret_env: LOCAL_SECRET
      resource: https://tools.example.com/
      audience: tools-api
      timeout: 3s
  - name: plain
    url: http://127.0.0.1:9001/mcp
`))
	if err != nil {
		t.Fatal(err)
	}
	cloud, local, plain := cfg.Servers[0].OAuth, cfg.Servers[1].OAuth, cfg.Servers[2].OAuth
	if cloud == nil || cloud.TokenURL != "https://login.example.com/oauth2/token" || cloud.ClientID != "mcp-gateway-cell-7" ||
		cloud.ClientSecretEnv != "CLOUD_CLIENT_SECRET" || !slices.Equal(cloud.Scopes, []string{"tools.read", "tools.call"}) {
		t.Fatalf("cloud oauth: %+v", cloud)
	}
	// The defaults: resource is the server's url (MCP asks clients to send it), 10s.
	if cloud.Resource != "https://mcp.example.com/mcp" || cloud.Audience != "" || cloud.TokenTimeout() != 10*time.Second {
		t.Errorf("cloud defaults: resource %q audience %q timeout %s", cloud.Resource, cloud.Audience, cloud.TokenTimeout())
	}
	if local == nil || local.Resource != "https://tools.example.com/" || local.Audience != "tools-api" || local.TokenTimeout() != 3*time.Second {
		t.Errorf("local oauth: %+v", local)
	}
	if plain != nil {
		t.Errorf("a server without oauth has %+v", plain)
	}
	if !cloud.Equal(cloud) || cloud.Equal(local) || cloud.Equal(nil) || !plain.Equal(nil) {
		t.Error("Equal")
	}
	other := *cloud
	other.Scopes = []string{"tools.read"}
	if cloud.Equal(&other) {
		t.Error("Equal ignores scopes")
	}
}

func TestUpstreamOAuthProblems(t *testing.T) {
	errs := parseErrors(t, `servers:
  - name: arm
    command: arm
    oauth: {token_url: https://login.example.com/token, client_id: gw, client_secret_env: S}
  - name: both
    url: https://mcp.example.com/mcp
    headers_env: {authorization: CLOUD_AUTH}
    oauth: {token_url: https://login.example.com/token, client_id: gw, client_secret_env: S}
  - name: empty
    url: https://mcp.example.com/mcp
    oauth: {scopes: ["two words", tools.read, tools.read, ""]}
  - name: clear
    url: https://mcp.example.com/mcp
    oauth:
      token_url: http://login.example.com/token
      client_id: " "
      client_secret_env: "s3cr3t-cl13nt-value!"
      resource: /relative
      audience: ""
      timeout: 2m
  - name: shapes
    url: https://mcp.example.com/mcp
    oauth:
      token_url: "https://user:pw@login.example.com/token"
      client_id: gw
      client_secret_env: S
      resource: "https://mcp.example.com/mcp#frag"
      timeout: 0s
  - name: odd
    url: https://mcp.example.com/mcp
    oauth:
      token_url: "ftp://login.example.com/token#x"
      client_id: gw
      client_secret_env: S
      client_secret: oops
`)
	assertReported(t, errs, []want{
		{4, `servers[0] (arm): oauth is only for a url (HTTP) server`},
		{8, `servers[1] (both): oauth and headers_env's authorization (line 7) both set the Authorization header`},
		{11, `servers[2] (empty): oauth: token_url is missing`},
		{11, `servers[2] (empty): oauth: client_id is missing`},
		{11, `servers[2] (empty): oauth: client_secret_env is missing`},
		{11, `servers[2] (empty): oauth.scopes[0]: "two words" is not an OAuth scope`},
		{11, `servers[2] (empty): oauth.scopes[2]: scope "tools.read" is listed twice`},
		{11, `servers[2] (empty): oauth.scopes[3]: "" is not an OAuth scope`},
		{15, `servers[3] (clear): oauth.token_url: must start with https://: the client secret and the token would cross the network in the clear`},
		{16, `servers[3] (clear): oauth.client_id: is empty`},
		{17, `servers[3] (clear): oauth.client_secret_env: must name the environment variable holding the client secret`},
		{18, `servers[3] (clear): oauth.resource: must be an absolute URI`},
		{19, `servers[3] (clear): oauth.audience: is empty`},
		{20, `servers[3] (clear): oauth.timeout: must be above 0s and at most 1m0s, got 2m0s`},
		{24, `servers[4] (shapes): oauth.token_url: must not carry credentials`},
		{27, `servers[4] (shapes): oauth.resource: must not have a fragment`},
		{28, `servers[4] (shapes): oauth.timeout: must be above 0s`},
		{32, `servers[5] (odd): oauth.token_url: must start with https://`},
		{35, `unknown key "client_secret" in a server's oauth (did you mean "client_secret_env"?)`},
	})
	for _, secret := range []string{"s3cr3t", "user:pw", "pw@"} {
		if strings.Contains(errs.Error(), secret) {
			t.Errorf("a secret written in the file is repeated (%s):\n%v", secret, errs)
		}
	}
}

func TestUpstreamOAuthLoopbackHTTP(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8081/token", "http://localhost/token", "http://[::1]:9/t", "http://127.8.9.10/t"} {
		if msg := checkTokenURL(u); msg != "" {
			t.Errorf("%s: %s", u, msg)
		}
	}
	for _, u := range []string{"http://10.0.0.1/token", "http://localhost.example.com/token", "http://[::2]/t"} {
		if msg := checkTokenURL(u); !strings.Contains(msg, "https://") {
			t.Errorf("%s: %q, want a refusal of plain http", u, msg)
		}
	}
}

// TestUpstreamOAuthSecretIsKeptFromChildren: the client secret's variable is one of the secret
// variables no child gets, and naming it in env_inherit is refused with the setting and line.
func TestUpstreamOAuthSecretIsKeptFromChildren(t *testing.T) {
	const servers = `servers:
  - name: vision
    url: https://vision.example.com/mcp
    oauth:
      token_url: https://login.example.com/token
      client_id: gw
      client_secret_env: VISION_CLIENT_SECRET
  - name: arm
    command: arm
`
	cfg, err := Parse("robot.yaml", []byte(servers))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range SecretEnv(cfg) {
		if s.Name == "VISION_CLIENT_SECRET" && s.Setting == "servers[0].oauth.client_secret_env" {
			found = true
		}
	}
	if !found || !cfg.Server("arm").EnvInherit.IsSecret("VISION_CLIENT_SECRET") {
		t.Errorf("SecretEnv = %+v, want VISION_CLIENT_SECRET from servers[0].oauth.client_secret_env", SecretEnv(cfg))
	}
	errs := parseErrors(t, servers+"    env_inherit: [VISION_CLIENT_SECRET]\n")
	assertReported(t, errs, []want{
		{10, `servers[1] (arm): env_inherit[0]: VISION_CLIENT_SECRET holds a secret the gateway reads (servers[0].oauth.client_secret_env, line 7)`},
	})
}
