package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

const (
	operatorToken = "operator-token-0123456789"
	plannerToken  = "planner-token-0123456789"
	adminToken    = "admin-token-0123456789abc"
)

// authConfig has an operator (role admin) and a planner (roles agent, planner).
const authConfig = `
gateway:
  max_body_bytes: 4096
servers: [{name: arm, command: arm}]
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: T_OPERATOR}
    - {principal: planner, roles: [agent, planner], token_env: T_PLANNER}
`

var authEnv = map[string]string{"T_OPERATOR": operatorToken, "T_PLANNER": plannerToken}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := env[name]; return v, ok }
}

// authServer serves a gateway of src (never started: its catalog is empty) over httptest, with
// the credentials of src's auth section and the admin token.
func authServer(t *testing.T, src string) (*httptest.Server, *store.Store) {
	t.Helper()
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
	g, err := New(cfg, Options{Store: st, AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler(creds))
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return srv, st
}

type answer struct {
	code  int
	body  string
	auth  string // WWW-Authenticate
	error string // the JSON error, if the body is one
}

func send(t *testing.T, method, url string, header map[string]string, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, body: string(b), auth: resp.Header.Get("WWW-Authenticate")}
	var e struct{ Error string }
	if json.Unmarshal(b, &e) == nil {
		a.error = e.Error
	}
	return a
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func TestAdminNeedsATokenWithRoleAdmin(t *testing.T) {
	srv, _ := authServer(t, authConfig)
	tests := []struct {
		name   string
		header map[string]string
		code   int
		error  string
		auth   string
	}{
		{"no token", nil, 401, "a bearer token is required", `Bearer realm="mcp-gateway"`},
		{"wrong token", bearer("not-a-token-of-this-gateway"), 401, "not valid", `error="invalid_token"`},
		{"a token's prefix", bearer(operatorToken[:20]), 401, "not valid", `error="invalid_token"`},
		{"a token with more after it", bearer(operatorToken + "x"), 401, "not valid", `error="invalid_token"`},
		{"another scheme", map[string]string{"Authorization": "Basic " + operatorToken}, 401, "a bearer token is required", `realm`},
		{"the agent's token", bearer(plannerToken), 403, "principal planner lacks the role admin", ""},
		{"the operator's token", bearer(operatorToken), 200, "", ""},
		{"the admin token", bearer(adminToken), 200, "", ""},
		{"scheme in lower case", map[string]string{"Authorization": "bearer " + adminToken}, 200, "", ""},
	}
	for _, tc := range tests {
		a := send(t, "GET", srv.URL+"/admin/status", tc.header, "")
		if a.code != tc.code || !strings.Contains(a.error, tc.error) || !strings.Contains(a.auth, tc.auth) {
			t.Errorf("%s: HTTP %d %q (WWW-Authenticate %q), want %d with %q", tc.name, a.code, a.body, a.auth, tc.code, tc.error)
		}
		for _, secret := range []string{operatorToken, plannerToken, adminToken} {
			if strings.Contains(a.body, secret) {
				t.Errorf("%s: the answer repeats a token: %s", tc.name, a.body)
			}
		}
	}
}

// initialize is an MCP initialize request as a client posts it.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func mcpHeader(extra map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

func TestMCPNeedsATokenWhenTokensAreConfigured(t *testing.T) {
	srv, st := authServer(t, authConfig)
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), initialize); a.code != 401 || a.auth == "" || !strings.Contains(a.error, "auth.tokens") {
		t.Errorf("no token: HTTP %d %q (WWW-Authenticate %q)", a.code, a.body, a.auth)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(adminToken)), initialize); a.code != 401 {
		t.Errorf("the admin token is for /admin only: HTTP %d %q", a.code, a.body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if a := send(t, "GET", srv.URL+path, nil, ""); a.code == 401 || a.code == 403 {
			t.Errorf("%s must stay open: HTTP %d", path, a.code)
		}
	}

	// The agent's token works on /mcp, and its principal is the caller of the call.
	cs := connectAs(t, srv.URL, plannerToken, "")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "arm__nothing", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	rec := lastCallRecord(t, st)
	if rec.Principal != "planner" || rec.Tool != "arm__nothing" || rec.Kind != "unknown_tool" {
		t.Errorf("audit record: %+v", rec)
	}

	// A session (MCP 2025-11-25 and before) belongs to the principal that started it.
	cs = connectAs(t, srv.URL, plannerToken, "2025-11-25")
	a := send(t, "POST", srv.URL+"/mcp", mcpHeader(map[string]string{
		"Authorization": "Bearer " + operatorToken, "Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": cs.InitializeResult().ProtocolVersion,
	}), `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`)
	if a.code != 403 {
		t.Errorf("the operator's token on the planner's session: HTTP %d %q", a.code, a.body)
	}
}

func TestMCPWithoutTokensIsAnonymous(t *testing.T) {
	srv, st := authServer(t, "servers: [{name: arm, command: arm}]\n")
	cs := connectAs(t, srv.URL, "", "")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "arm__nothing"}); err != nil {
		t.Fatal(err)
	}
	if rec := lastCallRecord(t, st); rec.Principal != "anonymous" {
		t.Errorf("principal %q, want anonymous", rec.Principal)
	}
	if a := send(t, "GET", srv.URL+"/admin/status", bearer(adminToken), ""); a.code != 200 {
		t.Errorf("the admin token without auth.tokens: HTTP %d %q", a.code, a.body)
	}
	if a := send(t, "GET", srv.URL+"/admin/status", nil, ""); a.code != 401 {
		t.Errorf("/admin without a token, without auth.tokens: HTTP %d", a.code)
	}
}

func TestMCPChecksTheOrigin(t *testing.T) {
	srv, _ := authServer(t, "gateway:\n  allowed_origins: [\"https://console.cell.example\"]\n"+authConfig[strings.Index(authConfig, "servers:"):])
	tests := []struct {
		origin string
		code   int
	}{
		{"", 200},
		{"https://console.cell.example", 200},
		{"https://console.cell.example:443", 200},
		{"http://console.cell.example", 403},
		{"https://evil.example", 403},
		{"http://localhost:6274", 403}, // allowed_origins replaces the loopback default
		{"null", 403},
	}
	for _, tc := range tests {
		h := mcpHeader(bearer(plannerToken))
		if tc.origin != "" {
			h["Origin"] = tc.origin
		}
		a := send(t, "POST", srv.URL+"/mcp", h, initialize)
		if a.code != tc.code {
			t.Errorf("Origin %q: HTTP %d %q, want %d", tc.origin, a.code, a.body, tc.code)
		}
		if tc.code == 403 && !strings.Contains(a.error, "gateway.allowed_origins") {
			t.Errorf("Origin %q: the refusal does not say how to allow it: %q", tc.origin, a.body)
		}
	}
	// A foreign page is refused before its token is even looked at.
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(map[string]string{"Origin": "https://evil.example"}), initialize); a.code != 403 {
		t.Errorf("foreign Origin without a token: HTTP %d", a.code)
	}
}

func TestMCPDefaultOriginsAreLoopback(t *testing.T) {
	srv, _ := authServer(t, "servers: [{name: arm, command: arm}]\n")
	for origin, code := range map[string]int{
		"http://localhost:6274": 200, "http://127.0.0.1:3000": 200, "https://[::1]:8443": 200,
		"http://localhost.evil.example:6274": 403, "http://192.168.1.20:6274": 403,
	} {
		if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(map[string]string{"Origin": origin}), initialize); a.code != code {
			t.Errorf("Origin %q: HTTP %d %q, want %d", origin, a.code, a.body, code)
		}
	}
}

func TestMCPLimitsTheBody(t *testing.T) {
	srv, _ := authServer(t, authConfig) // max_body_bytes: 4096
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 5000) + `"}}`
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(plannerToken)), big); a.code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: HTTP %d %q", a.code, a.body)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(bearer(plannerToken)), initialize); a.code != 200 {
		t.Errorf("a body within the limit: HTTP %d %q", a.code, a.body)
	}
}

func TestLoadCredentials(t *testing.T) {
	cfg, err := config.Parse("cell.yaml", []byte(authConfig+"    - {principal: ci, token_env: T_CI}\n    - {principal: bot, token_env: T_BOT}\n    - {principal: twin, token_env: T_TWIN}\n"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"T_OPERATOR": operatorToken,
		"T_PLANNER":  "short-secret",
		"T_BOT":      "has a space in it, 0123456789",
		"T_TWIN":     operatorToken,
		// T_CI unset
	}
	_, err = LoadCredentials(cfg, lookupIn(env))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"cell.yaml:8: auth.tokens[1] (planner): T_PLANNER holds fewer than 16 characters",
		"cell.yaml:9: auth.tokens[2] (ci): token_env names T_CI, which is not set or empty",
		"cell.yaml:10: auth.tokens[3] (bot): T_BOT holds whitespace",
		"cell.yaml:11: auth.tokens[4] (twin): T_TWIN holds the same token as T_OPERATOR of auth.tokens[0] (operator)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	for _, v := range env {
		if strings.Contains(msg, v) {
			t.Errorf("the error repeats a token value:\n%s", msg)
		}
	}

	creds, err := LoadCredentials(cfg, lookupIn(map[string]string{
		"T_OPERATOR": operatorToken, "T_PLANNER": plannerToken, "T_CI": "ci-token-0123456789", "T_BOT": "bot-token-0123456789", "T_TWIN": "twin-token-0123456789",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{operatorToken: "operator", plannerToken: "planner", "twin-token-0123456789": "twin", "twin-token-012345678": ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		got := ""
		if p := match(creds, r); p != nil {
			got = p.ID
		}
		if got != want {
			t.Errorf("token of %q matched %q", want, got)
		}
	}
	if p := match(creds, httptest.NewRequest("GET", "/", nil)); p != nil {
		t.Errorf("no Authorization header matched %q", p.ID)
	}
}

func TestLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:8080": true, "localhost:8080": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:8080": false, "192.168.1.20:8080": false,
		"robot.local:8080": false, "bad": false,
	} {
		if got := LoopbackListen(addr); got != want {
			t.Errorf("LoopbackListen(%q) = %v, want %v", addr, got, want)
		}
	}
}

// connectAs connects an MCP client to the gateway at base, sending token unless it is "".
// connectAs connects a client sending token (none if ""), at protocol revision version ("" for
// the SDK's newest).
func connectAs(t *testing.T, base, token, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{}
	if token != "" {
		hc.Transport = bearerTransport{token: token}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// lastCallRecord is the newest call record of the audit log.
func lastCallRecord(t *testing.T, st *store.Store) store.Record {
	t.Helper()
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var last store.Record
	if err := st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool { last = r; return true }); err != nil {
		t.Fatal(err)
	}
	return last
}

// BenchmarkMatch is the cost a bearer token adds to every /mcp request: one SHA-256 and a
// constant-time comparison with each of ten credentials.
func BenchmarkMatch(b *testing.B) {
	var creds []Credential
	for i := range 10 {
		creds = append(creds, NewCredential(Principal{ID: fmt.Sprint("p", i)}, fmt.Sprintf("token-%02d-0123456789abcdef", i)))
	}
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Authorization", "Bearer token-09-0123456789abcdef")
	for b.Loop() {
		if match(creds, r) == nil {
			b.Fatal("no match")
		}
	}
}
