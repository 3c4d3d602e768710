package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func TestMetricsPassPromlint(t *testing.T) {
	reg := NewRegistry()
	st, err := store.Open(t.TempDir(), store.Options{OnAuditCommit: AuditMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := &config.Config{Gateway: config.Gateway{Name: "t", ToolNames: config.ToolNamesPrefixed, LockoutScope: config.LockoutGlobal},
		Servers: []config.Server{{Name: "robot", Command: "/nonexistent/robot", Physical: true, StartupTimeoutSec: 1, CallTimeoutSec: 1, RestartBackoffMaxSec: 1}}}
	g, err := New(cfg, Options{Store: st, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// One refused call, so that the chain's collectors have series, and one lockout.
	g.Call(context.Background(), &governor.Call{Name: "robot__nothing", Args: json.RawMessage(`{}`)})
	if err := st.PutLockout(store.Lockout{Server: "robot", Tool: "robot__wait", CallID: "c1", At: time.Now(), Reason: "timed out"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "mcp_gateway_") {
			names = append(names, f.GetName())
		}
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"mcp_gateway_tool_calls_total", "mcp_gateway_tool_call_duration_seconds", "mcp_gateway_lockout_active",
		"mcp_gateway_upstream_up", "mcp_gateway_upstream_restarts_total", "mcp_gateway_audit_write_duration_seconds", "mcp_gateway_audit_records_total", "mcp_gateway_approvals_pending"} {
		if !strings.Contains(got, want) {
			t.Errorf("metric %s missing; have %s", want, got)
		}
	}
	for _, f := range families {
		if f.GetName() == "mcp_gateway_lockout_active" {
			if m := f.GetMetric(); len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
				t.Errorf("lockout gauge = %v, want robot=1", m)
			}
		}
	}
}
