package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPprofIsOffUnlessEnabledAndBehindTheAdminToken: /admin/debug/pprof/ answers only with
// gateway.pprof on, and only to the admin token.
func TestPprofIsOffUnlessEnabledAndBehindTheAdminToken(t *testing.T) {
	const token = "admin-token-0123456789abcdef"
	get := func(g *Gateway, path, bearer string) (int, string) {
		g.opts.AdminToken = token
		srv := httptest.NewServer(g.Handler(nil))
		defer srv.Close()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	off, _, _ := cellGateway(t, newCellRobot(0), newHeldDispatcher())
	if code, body := get(off, "/admin/debug/pprof/", token); code != http.StatusNotFound || !strings.Contains(body, "gateway.pprof: true") {
		t.Errorf("pprof without gateway.pprof: %d %s, want 404 saying how to turn it on", code, body)
	}
	on, _, _ := cellGateway(t, newCellRobot(0), newHeldDispatcher())
	on.cfg.Gateway.Pprof = true
	if code, _ := get(on, "/admin/debug/pprof/", ""); code != http.StatusUnauthorized {
		t.Errorf("pprof without the token: %d, want 401", code)
	}
	if code, body := get(on, "/admin/debug/pprof/", token); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof index: %d %.200s", code, body)
	}
	if code, body := get(on, "/admin/debug/pprof/goroutine?debug=1", token); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("a named profile: %d %.200s", code, body)
	}
}
