package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/identity/identitytest"
	"github.com/mcp-gateway/mcp-gateway/store"
)

const (
	oidcResource = "https://gw.example.com/mcp"
	oidcMetadata = "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
)

// oidcGateway serves a gateway whose auth.oidc trusts p (tokens for oidcResource, roles from
// realm_access.roles, scope mcp:tools required) beside the static tokens of authConfig, with
// servers (the servers: line of its config) and a metrics registry. It is started when start
// is set; else the verifier fetches the provider's keys for the first token.
func oidcGateway(t *testing.T, p *identitytest.Provider, servers string, start bool) (*httptest.Server, *store.Store, *Gateway) {
	t.Helper()
	src := fmt.Sprintf(`gateway: {name: cell-7}
%s
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: T_OPERATOR}
    - {principal: planner, roles: [agent, planner], token_env: T_PLANNER}
  oidc:
    issuer: %s
    resource: %s
    roles_claim: realm_access.roles
    required_scopes: [mcp:tools]
`, servers, p.Issuer, oidcResource)
	cfg, err := config.Parse("cell.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := LoadCredentials(cfg, lookupIn(authEnv))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Store: st, AdminToken: adminToken, Registry: NewRegistry(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	if start {
		if err := g.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(g.Handler(creds))
	t.Cleanup(func() {
		srv.Close()
		g.Close()
		st.Close()
	})
	return srv, st, g
}

// challengeParams are the auth-params of a Bearer challenge.
func challengeParams(t *testing.T, header string) map[string]string {
	t.Helper()
	rest, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		t.Fatalf("not a Bearer challenge: %q", header)
	}
	params := map[string]string{}
	for rest != "" {
		name, after, ok := strings.Cut(rest, `="`)
		if !ok {
			t.Fatalf("cannot read the challenge %q", header)
		}
		value, tail, ok := strings.Cut(after, `"`)
		if !ok {
			t.Fatalf("cannot read the challenge %q", header)
		}
		params[strings.TrimSpace(name)] = value
		rest = strings.TrimPrefix(strings.TrimSpace(tail), ",")
		rest = strings.TrimSpace(rest)
	}
	return params
}

func TestOIDCChallengesOnMCP(t *testing.T) {
	p := identitytest.NewProvider(t, oidcResource)
	srv, _, _ := oidcGateway(t, p, "servers: [{name: arm, command: arm}]", false)
	good := p.Token(t, "mcp:tools")

	tests := []struct {
		name   string
		token  string
		code   int
		error  string // in the JSON error and the error_description
		errPar string // the challenge's error
	}{
		{"no token", "", 401, "sign in with the identity provider " + p.Issuer, ""},
		{"a token of neither kind", "not-a-token-of-this-gateway", 401, "not valid", "invalid_token"},
		{"garbage in JWT shape", "eyJhbGciOi.eyJzdWIiOi.c2ln", 401, "header", "invalid_token"},
		{"expired", p.Issue(t, func(s *identitytest.Settings) { s.Lifetime = -5 * time.Minute }, "mcp:tools"), 401, "expired", "invalid_token"},
		{"for another audience", p.Issue(t, func(s *identitytest.Settings) { s.Audience = []string{"https://other.example.com/mcp"} }, "mcp:tools"), 401, "audience", "invalid_token"},
		{"signed by a key the provider does not publish", identitytest.Sign(t, identitytest.NewRSAKey(t), map[string]any{
			"iss": p.Issuer, "aud": oidcResource, "sub": "mallory", "exp": time.Now().Add(time.Hour).Unix(), "scope": "mcp:tools"}, nil), 401, "does not publish", "invalid_token"},
		{"tampered", good[:strings.LastIndex(good, ".")] + ".AAAA" + good[strings.LastIndex(good, ".")+5:], 401, "signature", "invalid_token"},
		{"naming the admin principal", p.Issue(t, func(s *identitytest.Settings) { s.Subject = "admin" }, "mcp:tools"), 401, "principal 'admin'", "invalid_token"},
		{"without the required scope", p.Token(t, "robots:read"), 403, "lacks scope mcp:tools", "insufficient_scope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := mcpHeader(nil)
			if tc.token != "" {
				h["Authorization"] = "Bearer " + tc.token
			}
			a := send(t, "POST", srv.URL+"/mcp", h, initialize)
			if a.code != tc.code || !strings.Contains(a.error, tc.error) {
				t.Errorf("HTTP %d %s, want %d with %q", a.code, a.body, tc.code, tc.error)
			}
			params := challengeParams(t, a.auth)
			if params["resource_metadata"] != oidcMetadata || params["realm"] != "mcp-gateway" || params["error"] != tc.errPar {
				t.Errorf("WWW-Authenticate %q", a.auth)
			}
			if tc.errPar != "" && tc.code != 401 || tc.errPar == "invalid_token" && tc.token != "not-a-token-of-this-gateway" {
				if !strings.Contains(params["error_description"], tc.error) {
					t.Errorf("error_description %q lacks %q", params["error_description"], tc.error)
				}
			}
			if tc.errPar == "insufficient_scope" && params["scope"] != "mcp:tools" {
				t.Errorf("scope %q", params["scope"])
			}
			if sig := tc.token[strings.LastIndex(tc.token, ".")+1:]; len(sig) > 8 && (strings.Contains(a.body, sig) || strings.Contains(a.auth, sig)) {
				t.Errorf("the answer repeats the token")
			}
		})
	}
	// The static tokens keep working beside the identity provider's.
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(plannerToken)), initialize); a.code != 200 {
		t.Errorf("a static token: HTTP %d %s", a.code, a.body)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(good)), initialize); a.code != 200 {
		t.Errorf("the provider's token: HTTP %d %s", a.code, a.body)
	}
}

func TestOIDCProtectedResourceMetadata(t *testing.T) {
	p := identitytest.NewProvider(t, oidcResource)
	srv, _, _ := oidcGateway(t, p, "servers: [{name: arm, command: arm}]", false)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("%s: HTTP %d %v %v", path, resp.StatusCode, resp.Header, err)
		}
		want := map[string]any{
			"resource": oidcResource, "authorization_servers": []any{p.Issuer}, "scopes_supported": []any{"mcp:tools"},
			"bearer_methods_supported": []any{"header"}, "resource_name": "cell-7",
		}
		if got, _ := json.Marshal(md); string(got) != string(must(json.Marshal(want))) {
			t.Errorf("%s: %s", path, got)
		}
	}
	// A browser page's preflight is answered.
	a := send(t, "OPTIONS", srv.URL+"/.well-known/oauth-protected-resource/mcp", map[string]string{
		"Origin": "https://inspector.example", "Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "mcp-protocol-version"}, "")
	if a.code != 204 {
		t.Errorf("preflight: HTTP %d", a.code)
	}
	if a := send(t, "POST", srv.URL+"/.well-known/oauth-protected-resource", nil, "{}"); a.code != http.StatusMethodNotAllowed {
		t.Errorf("POST: HTTP %d", a.code)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestOIDCWithoutItNoMetadata(t *testing.T) {
	srv, _ := authServer(t, authConfig)
	if a := send(t, "GET", srv.URL+"/.well-known/oauth-protected-resource", nil, ""); a.code != 404 {
		t.Errorf("metadata without auth.oidc: HTTP %d", a.code)
	}
	a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), initialize)
	if a.code != 401 || strings.Contains(a.auth, "resource_metadata") {
		t.Errorf("without auth.oidc: HTTP %d, WWW-Authenticate %q", a.code, a.auth)
	}
}

// TestOIDCPrincipalIsTheCaller: a call made with the provider's token is the token's
// principal's, with its roles, in the audit record; the metrics count it under "(oidc)";
// the provider's role admin opens /admin.
func TestOIDCPrincipalIsTheCaller(t *testing.T) {
	p := identitytest.NewProvider(t, oidcResource)
	srv, st, _ := oidcGateway(t, p, "servers: [{name: arm, command: arm}]", false)
	p.Set(func(s *identitytest.Settings) {
		s.Claims = map[string]any{"realm_access": map[string]any{"roles": []string{"planner"}}}
	})
	token := p.Token(t, "mcp:tools")
	cs := connectAs(t, srv.URL, token, "")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "arm__nothing", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	rec := lastCallRecord(t, st)
	if rec.Principal != identitytest.ClientID || rec.Tool != "arm__nothing" {
		t.Errorf("audit record: %+v", rec)
	}
	a := send(t, "GET", srv.URL+"/metrics", nil, "")
	if !strings.Contains(a.body, `principal="(oidc)"`) || strings.Contains(a.body, identitytest.ClientID) {
		t.Errorf("metrics do not count the provider's principals under (oidc):\n%s", grepLines(a.body, "tool_calls_total"))
	}

	// /admin: the provider's token without role admin is forbidden; with it, admitted.
	if a := send(t, "GET", srv.URL+"/admin/status", bearer(token), ""); a.code != 403 || !strings.Contains(a.error, "lacks the role admin") {
		t.Errorf("/admin with a planner's token: HTTP %d %s", a.code, a.body)
	}
	admin := p.Issue(t, func(s *identitytest.Settings) {
		s.Subject = "alice"
		s.Claims = map[string]any{"realm_access": map[string]any{"roles": []string{"admin"}}}
	}, "mcp:tools")
	if a := send(t, "GET", srv.URL+"/admin/status", bearer(admin), ""); a.code != 200 {
		t.Errorf("/admin with the provider's role admin: HTTP %d %s", a.code, a.body)
	}
	// /admin's challenge names no metadata: it is not the resource the tokens are for.
	if a := send(t, "GET", srv.URL+"/admin/status", nil, ""); a.code != 401 || strings.Contains(a.auth, "resource_metadata") {
		t.Errorf("/admin without a token: HTTP %d, %q", a.code, a.auth)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOIDCIssuerDown: while the provider's keys cannot be fetched, its tokens get 503 with
// Retry-After, and static tokens keep working.
func TestOIDCIssuerDown(t *testing.T) {
	p := identitytest.NewProvider(t, oidcResource)
	token := p.Token(t, "mcp:tools")
	p.SetDown(true)
	srv, _, _ := oidcGateway(t, p, "servers: [{name: arm, command: arm}]", false)
	a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(token)), initialize)
	if a.code != 503 || !strings.Contains(a.error, "could not be fetched") {
		t.Errorf("the provider down: HTTP %d %s", a.code, a.body)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(plannerToken)), initialize); a.code != 200 {
		t.Errorf("a static token with the provider down: HTTP %d %s", a.code, a.body)
	}
}

// TestNoTokenPassthrough: the token a client sends the gateway never reaches an HTTP upstream,
// whichever kind it is: the gateway's session with the upstream is its own.
func TestNoTokenPassthrough(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the Authorization headers the upstream received
	up := mcp.NewServer(&mcp.Implementation{Name: "arm", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "where"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, struct{}{}, nil
	})
	serve := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		serve.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close) // after the gateway, whose session holds a stream open

	p := identitytest.NewProvider(t, oidcResource)
	srv, st, _ := oidcGateway(t, p, fmt.Sprintf("servers: [{name: arm, url: %q, contract: passthrough}]", upstream.URL+"/mcp"), true)
	for _, token := range []string{p.Token(t, "mcp:tools"), plannerToken} {
		cs := connectAs(t, srv.URL, token, "")
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "arm__where", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		if rec := lastCallRecord(t, st); rec.Outcome != "ok" {
			t.Errorf("audit record: %+v", rec)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the upstream received nothing")
	}
	for _, h := range seen {
		if h != "" {
			t.Errorf("the upstream received Authorization %q", h)
		}
	}
}

// The console signs people in through Authenticate: with auth.oidc, an access token of the
// provider stands for its principal and roles until the token's expiry; a static token stands
// with no end; anything else stands for no one.
func TestAuthenticateTakesTheProvidersTokens(t *testing.T) {
	p := identitytest.NewProvider(t, oidcResource)
	_, _, g := oidcGateway(t, p, "servers: [{name: arm, command: arm}]", false)
	viewer := p.Issue(t, func(s *identitytest.Settings) {
		s.Subject = "vera"
		s.Lifetime = 3 * time.Minute
		s.Claims = map[string]any{"realm_access": map[string]any{"roles": []string{"viewer"}}}
	}, "mcp:tools")
	got, until := g.Authenticate(context.Background(), nil, viewer)
	if got == nil || got.ID != "vera" || !got.HasRole("viewer") {
		t.Fatalf("Authenticate(the provider's token) = %+v", got)
	}
	if left := time.Until(until); left <= 2*time.Minute || left > 3*time.Minute+time.Second {
		t.Errorf("the token's standing ends in %v, want its expiry about 3 minutes from now", left)
	}
	if got, _ := g.Authenticate(context.Background(), nil, viewer[:len(viewer)-2]+"AA"); got != nil {
		t.Errorf("a token with another signature stands for %+v", got)
	}
	if got, _ := g.Authenticate(context.Background(), nil, "not.a.token"); got != nil {
		t.Errorf("not.a.token stands for %+v", got)
	}
	creds, err := LoadCredentials(g.cfg, lookupIn(authEnv))
	if err != nil {
		t.Fatal(err)
	}
	if got, until := g.Authenticate(context.Background(), creds, operatorToken); got == nil || !until.IsZero() {
		t.Errorf("the static operator token: %+v until %v, want a principal with no end", got, until)
	}
}

// serve refuses an open address without authentication: auth.oidc alone is authentication.
func TestAuthOn(t *testing.T) {
	oidc := &config.Config{Auth: config.Auth{OIDC: &config.OIDC{Issuer: "https://idp.example.com"}}}
	for _, c := range []struct {
		name  string
		cfg   *config.Config
		creds []Credential
		want  bool
	}{
		{"nothing", &config.Config{}, nil, false},
		{"auth.tokens", &config.Config{}, []Credential{NewCredential(Principal{ID: "ops"}, "ops-token-0123456789")}, true},
		{"auth.oidc alone", oidc, nil, true},
	} {
		if got := AuthOn(c.cfg, c.creds); got != c.want {
			t.Errorf("%s: AuthOn = %v, want %v", c.name, got, c.want)
		}
	}
}
