package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func TestEffectiveConfigAndRestartEndpoints(t *testing.T) {
	cfg, err := config.Parse(t.TempDir()+"/g.yaml", []byte(`
servers:
  - name: robot
    command: /nonexistent/robot
    env: {ROBOT_PASSWORD: hunter2-very-secret}
    startup_timeout_sec: 1
guardrails:
  tool_result:
    - {id: secrets, use: secrets.scan, action: redact, replacement: "[KEY]"}
`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const token = "admin-token-0123456789abcdef"
	g, err := New(cfg, Options{Store: st, AdminToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	_ = g.Start(context.Background()) // the robot cannot start; it is retried with backoff
	srv := httptest.NewServer(g.Handler(nil))
	defer srv.Close()
	do := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}

	code, body := do("GET", "/admin/config")
	if code != 200 || strings.Contains(body, "hunter2") || !strings.Contains(body, "ROBOT_PASSWORD") || !strings.Contains(body, `"replacement": "[KEY]"`) ||
		!strings.Contains(body, `"call_timeout_sec": 300`) {
		t.Fatalf("GET /admin/config = %d\n%s", code, body)
	}
	var eff map[string]any
	if err := json.Unmarshal([]byte(body), &eff); err != nil {
		t.Fatal(err)
	}

	if code, body := do("POST", "/admin/upstreams/nope/restart"); code != 404 || !strings.Contains(body, "nope") {
		t.Fatalf("restart of an unknown server = %d %s", code, body)
	}
	// The robot's command does not exist: the restart is tried, fails with the reason, and is
	// audited either way.
	if code, body := do("POST", "/admin/upstreams/robot/restart?operator=alice"); code != 500 || !strings.Contains(body, "no such file") {
		t.Fatalf("restart = %d %s", code, body)
	}
	var found bool
	st.AuditScan(store.AuditFilter{Type: store.RecordOperator}, func(r store.Record) bool {
		found = found || (r.Action == "restart" && r.Server == "robot" && r.Principal == "alice" && r.Outcome == "failed")
		return true
	})
	if !found {
		t.Fatal("the restart was not audited with the operator")
	}
}

// TestAdminBodiesSayWhatIsWrong: a body that is too large, empty, not JSON or of the wrong shape
// is refused with what is wrong and the shape to send.
func TestAdminBodiesSayWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"reason": "` + strings.Repeat("x", 70<<10) + `"}`, http.StatusRequestEntityTooLarge, "over 64 KiB"},
		{"reason=stop", http.StatusBadRequest, "not JSON"},
		{"", http.StatusBadRequest, "the body is empty"},
		{`{"reason": `, http.StatusBadRequest, "ends before its JSON does"},
		{`{"reason": 7}`, http.StatusBadRequest, "reason must be a string"},
	} {
		rec := httptest.NewRecorder()
		var v struct {
			Reason string `json:"reason"`
		}
		req := httptest.NewRequest(http.MethodPost, "/admin/halt", strings.NewReader(tc.body))
		if decodeBody(rec, req, &v, `{"reason": "why"}`) {
			t.Errorf("%.20q was accepted", tc.body)
			continue
		}
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) || !strings.Contains(rec.Body.String(), `{\"reason\": \"why\"}`) {
			t.Errorf("%.20q: %d %s, want %d %q", tc.body, rec.Code, rec.Body, tc.code, tc.want)
		}
	}
}
