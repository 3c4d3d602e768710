package e2e

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	operatorToken = "e2e-operator-token-5f2c9a7d1b"
	plannerToken  = "e2e-planner-token-8e41b06c3a"
)

// authConfig listens on every interface, which auth.tokens allows, with an operator (role
// admin), a planner (roles agent and planner) and a rule on the planner role.
const authConfig = `
gateway:
  listen: "{{listen}}"
  max_body_bytes: 65536
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-record", "{{dir}}/calls.jsonl"]
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_OPERATOR_TOKEN}
    - {principal: planner, roles: [agent, planner], token_env: E2E_PLANNER_TOKEN}
policies:
  default: allow
  rules:
    - id: planners-keep-off-the-shelf
      effect: deny
      when: '"planner" in principal.roles && tool == "robot__navigate_to" && args.target == "shelf"'
      reason: planners do not send the robot to the shelf
`

// onEveryInterface rewrites the listen address of the config at cfg from 127.0.0.1:PORT to
// 0.0.0.0:PORT; the gateway stays reachable at addr.
func onEveryInterface(t *testing.T, cfg, addr string) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	all := "0.0.0.0:" + port
	if err := writeFile(cfg, strings.Replace(readFile(t, cfg), `"`+addr+`"`, `"`+all+`"`, 1)); err != nil {
		t.Fatal(err)
	}
	return all
}

type httpAnswer struct {
	code int
	body string
}

func do(t *testing.T, method, url string, header map[string]string, body string) httpAnswer {
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
	return httpAnswer{resp.StatusCode, string(b)}
}

func TestAuthGuardsMCPAndAdmin(t *testing.T) {
	t.Setenv("E2E_OPERATOR_TOKEN", operatorToken)
	t.Setenv("E2E_PLANNER_TOKEN", plannerToken)
	cfg, addr := writeConfig(t, authConfig)
	onEveryInterface(t, cfg, addr)
	// Plain HTTP on every interface: with tokens but without TLS that needs --insecure-listen.
	gw := startGateway(t, cfg, addr, "--insecure-listen")
	record := filepath.Join(cfgDir(cfg), "calls.jsonl")
	base := "http://" + addr

	// A tools/call on the planner's session (MCP 2025-11-25: 2026-07-28 has none), sent by hand
	// in each way that must be refused.
	cs := connectHTTPAsAt(t, addr, plannerToken, nil, "2025-11-25")
	session := map[string]string{
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": cs.InitializeResult().ProtocolVersion,
	}
	with := func(extra ...string) map[string]string {
		h := map[string]string{}
		for k, v := range session {
			h[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}
	navigate := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"counter"}}}`
	oversized := `{"jsonrpc":"2.0","id":98,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"counter","pad":"` +
		strings.Repeat("x", 70000) + `"}}}`
	for _, c := range []struct {
		name   string
		header map[string]string
		body   string
		want   int
		says   string
	}{
		{"no token", with(), navigate, 401, "bearer token is required"},
		{"a wrong token", with("Authorization", "Bearer not-a-token-of-this-gateway"), navigate, 401, "not valid"},
		{"another principal's token on the planner's session", with("Authorization", "Bearer "+operatorToken), navigate, 403, ""},
		{"a page of a foreign origin", with("Authorization", "Bearer "+plannerToken, "Origin", "http://attacker.example:8080"), navigate, 403, "allowed_origins"},
		{"a body over max_body_bytes", with("Authorization", "Bearer "+plannerToken), oversized, 413, ""},
	} {
		a := do(t, "POST", base+"/mcp", c.header, c.body)
		if a.code != c.want || !strings.Contains(a.body, c.says) {
			t.Errorf("%s: HTTP %d %q, want %d saying %q", c.name, a.code, a.body, c.want, c.says)
		}
	}
	if b, err := os.ReadFile(record); err == nil && len(b) > 0 {
		t.Fatalf("a refused request reached the robot:\n%s", b)
	}
	// The same request with the planner's token does reach it.
	if a := do(t, "POST", base+"/mcp", with("Authorization", "Bearer "+plannerToken), navigate); a.code != 200 || !strings.Contains(a.body, `\"success\":true`) {
		t.Fatalf("the planner's own call: HTTP %d %q", a.code, a.body)
	}
	if got := readFile(t, record); !strings.Contains(got, "counter") {
		t.Fatalf("the planner's call did not reach the robot: %q", got)
	}

	// /admin needs a token with role admin.
	for _, c := range []struct {
		name, auth string
		want       int
		says       string
	}{
		{"no token", "", 401, "bearer token is required"},
		{"a wrong token", "Bearer " + operatorToken + "0", 401, "not valid"},
		{"the planner's token", "Bearer " + plannerToken, 403, "principal planner lacks the role admin"},
		{"the operator's token", "Bearer " + operatorToken, 200, `"upstreams"`},
		{"the admin token", "Bearer " + strings.TrimSpace(readFile(t, filepath.Join(cfgDir(cfg), ".mcp-gateway", "admin.token"))), 200, `"upstreams"`},
	} {
		h := map[string]string{}
		if c.auth != "" {
			h["Authorization"] = c.auth
		}
		if a := do(t, "GET", base+"/admin/status", h, ""); a.code != c.want || !strings.Contains(a.body, c.says) {
			t.Errorf("/admin/status with %s: HTTP %d %q, want %d saying %q", c.name, a.code, a.body, c.want, c.says)
		}
	}
	// Probes and Prometheus carry no token.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		getBody(t, base+path, 200)
	}

	// The principal reaches policies: the rule on the planner role denies the planner, not the
	// operator.
	if res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "shelf"}); !res.IsError || env["kind"] != "policy_denied" ||
		!strings.Contains(env["reason"].(string), "planners-keep-off-the-shelf") {
		t.Fatalf("the planner to the shelf: %s", mustJSON(res))
	}
	op := connectHTTPAs(t, addr, operatorToken, nil)
	if res, env := call(t, op, "robot__navigate_to", map[string]any{"target": "shelf"}); res.IsError || env["success"] != true {
		t.Fatalf("the operator to the shelf: %s", mustJSON(res))
	}

	// And the audit log, read with the CLI, which finds the operator's token through auth.tokens.
	recs := auditJSONL(t, "-c", cfg, "--tool", "robot__navigate_to")
	var got []string
	for _, r := range recs {
		got = append(got, r.Principal+" "+r.Decision+" "+r.Kind+" "+string(r.Args))
	}
	want := []string{
		`planner allow:default  {"target":"counter"}`,
		`planner deny:planners-keep-off-the-shelf policy_denied {"target":"shelf"}`,
		`operator allow:default  {"target":"shelf"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit records (principal decision kind args):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, secret := range []string{operatorToken, plannerToken} {
		if strings.Contains(gw.stderr.String(), secret) {
			t.Errorf("the gateway logged a token")
		}
	}
}

func TestServeRefusesAnOpenAddressWithoutTokens(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	all := onEveryInterface(t, cfg, addr)
	_, errOut, code := cli(t, "serve", "-c", cfg)
	for _, want := range []string{"refusing to listen on " + all + " without authentication", "auth.tokens", "--insecure-listen"} {
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("serve on %s without tokens: exit %d, output lacks %q:\n%s", all, code, want, errOut)
		}
	}

	gw := startGateway(t, cfg, addr, "--insecure-listen")
	cs := connectHTTP(t, addr, nil)
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Fatalf("get_scene with --insecure-listen: %s", mustJSON(res))
	}
	if !strings.Contains(gw.stderr.String(), "without authentication") {
		t.Errorf("--insecure-listen is not warned about:\n%s", gw.stderr.String())
	}
}

func TestServeNamesAMissingOrShortToken(t *testing.T) {
	const short = "only-11char"
	t.Setenv("E2E_SHORT_TOKEN", short)
	t.Setenv("E2E_MISSING_TOKEN", "")
	cfg, _ := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_MISSING_TOKEN}
    - {principal: planner, roles: [agent], token_env: E2E_SHORT_TOKEN}
`)
	_, errOut, code := cli(t, "serve", "-c", cfg)
	for _, want := range []string{
		"auth.tokens[0] (operator): token_env names E2E_MISSING_TOKEN, which is not set or empty",
		"auth.tokens[1] (planner): E2E_SHORT_TOKEN holds fewer than 16 characters",
	} {
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, output lacks %q:\n%s", code, want, errOut)
		}
	}
	if strings.Contains(errOut, short) {
		t.Errorf("the output repeats the short token:\n%s", errOut)
	}
}
