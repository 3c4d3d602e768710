package gateway

import (
	"net/http"
	"strings"
	"testing"
)

func TestCORS(t *testing.T) {
	srv, _ := authServer(t, "gateway:\n  allowed_origins: [\"https://console.cell.example\"]\n"+authConfig[strings.Index(authConfig, "servers:"):])
	do := func(method, origin string, header map[string]string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	preflight := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type,mcp-session-id,mcp-protocol-version,mcp-method,mcp-name,mcp-param-region,x-other"}

	// An allowed origin's preflight: no token needed, everything a streamable HTTP client sends.
	resp := do("OPTIONS", "https://console.cell.example", preflight, "")
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://console.cell.example" {
		t.Fatalf("preflight: HTTP %d, Allow-Origin %q", resp.StatusCode, h.Get("Access-Control-Allow-Origin"))
	}
	if !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		t.Errorf("preflight: Vary %q lacks Origin", h.Values("Vary"))
	}
	for _, m := range []string{"POST", "GET", "DELETE", "OPTIONS"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Methods"), m) {
			t.Errorf("preflight: Allow-Methods %q lacks %s", h.Get("Access-Control-Allow-Methods"), m)
		}
	}
	// MCP 2026-07-28 adds the method, the name and a tool's Mcp-Param-<name> headers.
	for _, name := range []string{"Content-Type", "Authorization", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "Mcp-Method", "Mcp-Name", "mcp-param-region"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Headers"), name) {
			t.Errorf("preflight: Allow-Headers %q lacks %s", h.Get("Access-Control-Allow-Headers"), name)
		}
	}
	if strings.Contains(h.Get("Access-Control-Allow-Headers"), "x-other") {
		t.Errorf("preflight: Allow-Headers %q allows a header no MCP client sends", h.Get("Access-Control-Allow-Headers"))
	}
	if h.Get("Access-Control-Max-Age") == "" {
		t.Error("preflight: no Access-Control-Max-Age")
	}

	// The call that follows: readable by the page, with the session headers exposed.
	resp = do("POST", "https://console.cell.example", mcpHeader(bearer(plannerToken)), initialize)
	h = resp.Header
	if resp.StatusCode != 200 || h.Get("Access-Control-Allow-Origin") != "https://console.cell.example" {
		t.Errorf("POST: HTTP %d, Allow-Origin %q", resp.StatusCode, h.Get("Access-Control-Allow-Origin"))
	}
	for _, name := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version"} {
		if !strings.Contains(h.Get("Access-Control-Expose-Headers"), name) {
			t.Errorf("POST: Expose-Headers %q lacks %s", h.Get("Access-Control-Expose-Headers"), name)
		}
	}
	if h.Get("Mcp-Session-Id") == "" {
		t.Error("POST: no Mcp-Session-Id to expose")
	}
	// A refusal of the token is readable by the page too, so it can say why.
	if resp = do("POST", "https://console.cell.example", mcpHeader(nil), initialize); resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("POST without a token: HTTP %d, Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}

	// Other origins: refused, preflight included, with no CORS header for the browser to use.
	for _, origin := range []string{"https://evil.example", "http://console.cell.example", "null"} {
		for _, method := range []string{"OPTIONS", "POST"} {
			header := preflight
			if method == "POST" {
				header = mcpHeader(bearer(plannerToken))
			}
			resp := do(method, origin, header, initialize)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s from %s: HTTP %d, want 403", method, origin, resp.StatusCode)
			}
			for name := range resp.Header {
				if strings.HasPrefix(name, "Access-Control-") {
					t.Errorf("%s from %s: answered with %s", method, origin, name)
				}
			}
		}
	}
	// No Origin (not a browser page): no CORS headers, and OPTIONS is no preflight.
	if resp = do("POST", "", mcpHeader(bearer(plannerToken)), initialize); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("a request without Origin got Access-Control-Allow-Origin")
	}
	if resp = do("OPTIONS", "", preflight, ""); resp.StatusCode == http.StatusNoContent {
		t.Error("OPTIONS without Origin answered as a preflight")
	}
}
