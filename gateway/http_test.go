package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// meta2026 is the _meta a request of MCP 2026-07-28 carries.
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// header2026 are the headers of a request of MCP 2026-07-28 with method, and token if not "".
func header2026(method, token string) map[string]string {
	h := mcpHeader(map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method})
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

func TestStatelessRevision(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		header  map[string]string
		message string
		want    bool
	}{
		{"initialize", "POST", nil, initialize, false},
		{"a request in a session", "POST", map[string]string{"Mcp-Session-Id": "S", "MCP-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"a session id wins over a 2026-07-28 header", "POST", map[string]string{"Mcp-Session-Id": "S", "MCP-Protocol-Version": "2026-07-28"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"a 2026-07-28 header", "POST", map[string]string{"MCP-Protocol-Version": "2026-07-28"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true},
		{"a later revision", "POST", map[string]string{"MCP-Protocol-Version": "2027-01-01"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true},
		{"an older header without a session", "POST", map[string]string{"MCP-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"server/discover without a header", "POST", nil, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta2026 + `}}`, true},
		{"the revision in _meta alone", "POST", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`, true},
		{"an older _meta", "POST", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`, false},
		{"a batch", "POST", nil, `[` + initialize + `]`, false},
		{"a GET stream of a session", "GET", map[string]string{"Mcp-Session-Id": "S"}, "", false},
		{"a GET of 2026-07-28", "GET", map[string]string{"MCP-Protocol-Version": "2026-07-28"}, "", true},
		{"a DELETE", "DELETE", map[string]string{"Mcp-Session-Id": "S"}, "", false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, "/mcp", nil)
		for k, v := range tc.header {
			r.Header.Set(k, v)
		}
		var m doorMessage
		if tc.message != "" {
			var ref *refusal
			if m, ref = screen([]byte(tc.message)); ref != nil {
				t.Fatalf("%s: the door refuses %s", tc.name, ref.message)
			}
		}
		if got := statelessRevision(r, m); got != tc.want {
			t.Errorf("%s: stateless %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEveryRevisionOnOneEndpoint: on the default http_mode, server/discover offers every
// revision and a 2026-07-28 request is served without a session, while initialize opens one
// and a request of an older revision without one is still refused; forcing stateful offers
// the older revisions alone.
func TestEveryRevisionOnOneEndpoint(t *testing.T) {
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta2026 + `}}`
	srv, _ := authServer(t, "servers: [{name: arm, command: arm}]\n")
	a := send(t, "POST", srv.URL+"/mcp", header2026("server/discover", ""), discover)
	if a.code != 200 || !strings.Contains(a.body, `"2026-07-28"`) || !strings.Contains(a.body, `"2025-11-25"`) || !strings.Contains(a.body, `"2025-03-26"`) {
		t.Errorf("server/discover: HTTP %d %s", a.code, a.body)
	}
	a = send(t, "POST", srv.URL+"/mcp", header2026("tools/list", ""), `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta2026+`}}`)
	if a.code != 200 || !strings.Contains(a.body, `"tools"`) {
		t.Errorf("tools/list at 2026-07-28: HTTP %d %s", a.code, a.body)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), initialize); a.code != 200 || !strings.Contains(a.body, `"protocolVersion":"2025-06-18"`) {
		t.Errorf("initialize at 2025-06-18: HTTP %d %s", a.code, a.body)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); a.code != 400 || !strings.Contains(a.body, "missing_session") {
		t.Errorf("tools/list of an older revision without a session: HTTP %d %s", a.code, a.body)
	}

	stateful, _ := authServer(t, "gateway: {http_mode: stateful}\nservers: [{name: arm, command: arm}]\n")
	a = send(t, "POST", stateful.URL+"/mcp", header2026("server/discover", ""), discover)
	if a.code != 200 || strings.Contains(a.body, `"2026-07-28"`) || !strings.Contains(a.body, `"2025-11-25"`) {
		t.Errorf("server/discover on a stateful gateway: HTTP %d %s", a.code, a.body)
	}
}

// TestTheStatelessPathKeepsTheBounds: a 2026-07-28 request on the default http_mode passes the
// same doors as a session's: the token, the strict door and the body limit.
func TestTheStatelessPathKeepsTheBounds(t *testing.T) {
	srv, _ := authServer(t, authConfig)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta2026 + `}}`
	tests := []struct {
		name, token, body string
		code              int
		want              string
	}{
		{"no token", "", list, 401, "auth.tokens"},
		{"a token", plannerToken, list, 200, `"tools"`},
		{"trailing data", plannerToken, list + ` {}`, 400, "-32700"},
		{"a duplicate key", plannerToken, `{"jsonrpc":"2.0","id":2,"id":3,"method":"tools/list","params":{` + meta2026 + `}}`, 400, "duplicate_key"},
		{"over max_body_bytes", plannerToken, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 5000) + `",` + meta2026 + `}}`, 413, "max_body_bytes"},
	}
	for _, tc := range tests {
		a := send(t, "POST", srv.URL+"/mcp", header2026("tools/list", tc.token), tc.body)
		if a.code != tc.code || !strings.Contains(a.body, tc.want) {
			t.Errorf("%s: HTTP %d %q, want %d with %q", tc.name, a.code, a.body, tc.code, tc.want)
		}
	}
	// A 2026-07-28 client has no GET stream: the stateless handler's 405, not the stateful
	// one's demand for a session.
	a := send(t, "GET", srv.URL+"/mcp", map[string]string{"Accept": "text/event-stream", "MCP-Protocol-Version": "2026-07-28", "Authorization": "Bearer " + plannerToken}, "")
	if a.code != 405 {
		t.Errorf("GET at 2026-07-28: HTTP %d %q", a.code, a.body)
	}
}
