package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// memoryApprovals is the approvals section of heldYAML with the memory channel: requests are
// seen through the admin API.
const memoryApprovals = "  use: memory\n  timeout: 1m"

// operatorGateway starts a gateway on heldYAML with the memory channel and opts (its store and registry filled in).
func operatorGateway(t *testing.T, opts Options) *Gateway {
	t.Helper()
	g, _, _ := heldGateway(t, memoryApprovals, opts)
	return g
}

// The agent's listener answers approvals, metrics and health, and no MCP.
func TestOperatorHandlerAnswersApprovalsAndServesNoMCP(t *testing.T) {
	const token = "admin-token-0123456789abcdef"
	g := operatorGateway(t, Options{AdminToken: token})
	srv := httptest.NewServer(g.OperatorHandler(nil))
	defer srv.Close()
	do := func(method, path, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	done := make(chan *governor.Outcome)
	go func() {
		done <- g.Call(context.Background(), &governor.Call{Name: "robot__move", Args: json.RawMessage(`{"pin":"4711","to":"table"}`), Principal: "agent", Session: "agent-1"})
	}()
	var list []store.Approval
	for deadline := time.Now().Add(5 * time.Second); len(list) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		code, body := do("GET", "/admin/approvals", token)
		if code != http.StatusOK {
			t.Fatalf("GET /admin/approvals: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatal(err)
		}
	}
	if len(list) != 1 {
		t.Fatal("no pending approval listed")
	}
	a := list[0]
	var args bytes.Buffer
	_ = json.Compact(&args, a.Args)
	if args.String() != `{"pin":"[REDACTED]","to":"table"}` || a.Server != "robot" || a.Tool != "robot__move" || a.Principal != "agent" ||
		a.Session != "agent-1" || a.Rule != "move-needs-person" || a.Reason != "a person watches the arm move" || a.Expires.IsZero() {
		t.Errorf("listed request = %+v", a)
	}
	if code, _ := do("GET", "/admin/approvals", ""); code != http.StatusUnauthorized {
		t.Errorf("/admin without a token: %d", code)
	}
	if code, body := do("POST", "/admin/approvals/"+a.ID+"/approve", token); code != http.StatusOK {
		t.Fatalf("approve: %d %s", code, body)
	}
	if out := <-done; out.Kind != "" || !out.Success {
		t.Fatalf("approved call: %+v", out)
	}

	if code, body := do("GET", "/metrics", ""); code != http.StatusOK || !strings.Contains(body, `mcp_gateway_approval_notify_failures_total{channel="webhook"} 0`) ||
		!strings.Contains(body, `mcp_gateway_tool_calls_total`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := do("GET", path, ""); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, body := do("POST", "/mcp", ""); code != http.StatusNotFound || !strings.Contains(body, "mcp-gateway serve") {
		t.Errorf("/mcp: %d %s", code, body)
	}
}

// A gateway nobody can answer refuses a held call at once, with the reason it was given.
func TestNoApproverRefusesAHeldCallAtOnce(t *testing.T) {
	g := operatorGateway(t, Options{NoApprover: "nothing serves its admin API; start the gateway with an HTTP listener: --listen HOST:PORT"})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := g.Call(ctx, &governor.Call{Name: "robot__move", Args: json.RawMessage(`{}`), Principal: "agent"})
	if out.Kind != governor.KindApprovalDenied || !strings.Contains(out.Reason, "start the gateway with an HTTP listener") || time.Since(start) > 5*time.Second {
		t.Fatalf("held call: %+v after %s", out, time.Since(start))
	}
}
