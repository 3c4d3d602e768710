package governor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func TestPolicyStep(t *testing.T) {
	engine, err := policies.Compile([]policies.Rule{
		{ID: "speed-cap", Effect: policies.Deny, When: `args[?"speed"].orValue(0.0) > 1.5`, Reason: "arm speed above 1.5 m/s"},
		{ID: "drawer-needs-person", Effect: policies.RequireApproval, When: `upstream_tool == "open_drawer"`, Reason: "opening needs a person"},
		{ID: "try-stricter", Effect: policies.Deny, When: `args[?"speed"].orValue(0.0) > 1.0`, Mode: policies.LogOnly},
		{ID: "broken", Effect: policies.Deny, When: `args.missing == "x"`, Mode: policies.LogOnly},
	}, policies.Options{Default: policies.Allow})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	reg := prometheus.NewRegistry()
	metrics := NewPolicyMetrics(reg)
	n := &recordingNotifier{sent: make(chan string, 1)}
	approvals := NewApprovals(st, st.Audit(), n, 5*time.Second, quiet)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	cfg := &config.Server{Name: "arm", CallTimeoutSec: 1}
	tools := catalog{
		"arm__move":        {Public: "arm__move", Server: "arm", Upstream: "move", ServerConfig: cfg, Dispatcher: srv},
		"arm__open_drawer": {Public: "arm__open_drawer", Server: "arm", Upstream: "open_drawer", ServerConfig: cfg, Dispatcher: srv},
	}
	input := func(c *Call) *policies.Input {
		return &policies.Input{Tool: c.Name, Server: c.Tool.Server, UpstreamTool: c.Tool.Upstream, Args: c.Args, Principal: policies.Principal{ID: c.Principal}}
	}
	h := Chain(Dispatch(), Resolve(tools), Policy(engine, input, approvals, metrics, quiet), CheckResult())
	run := func(tool, args string) (*Call, *Outcome) {
		c := &Call{ID: tool, Name: tool, Args: json.RawMessage(args), Principal: "planner", Start: time.Now()}
		return c, h.Handle(context.Background(), c)
	}

	c, out := run("arm__move", `{"speed":2.0}`)
	if out.Kind != KindPolicyDenied || !strings.Contains(out.Reason, "speed-cap") || !strings.Contains(out.Reason, "above 1.5") || srv.calls != 0 {
		t.Fatalf("denied call: %+v (upstream calls %d)", out, srv.calls)
	}
	if c.Decision != "deny:speed-cap" || c.Detail["shadow"] == nil || c.Detail["rule_errors"] == nil {
		t.Fatalf("audit detail: %q %v", c.Decision, c.Detail)
	}

	c, out = run("arm__move", `{"speed":1.2}`)
	if out.Kind != "" || srv.calls != 1 || c.Decision != "allow:default" {
		t.Fatalf("allowed call: %+v %q", out, c.Decision)
	}
	if shadow, _ := c.Detail["shadow"].([]policies.Match); len(shadow) == 0 || shadow[0].RuleID != "try-stricter" || shadow[0].ByError {
		t.Fatalf("shadow decision not recorded: %v", c.Detail)
	}

	done := make(chan *Outcome)
	go func() { _, out := run("arm__open_drawer", `{}`); done <- out }()
	id := <-n.sent
	if srv.calls != 1 {
		t.Fatal("a call waiting for approval reached the upstream")
	}
	if _, err := approvals.Decide(context.Background(), id, true, "alice", "drawer clear"); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out.Kind != "" || srv.calls != 2 {
		t.Fatalf("approved call: %+v", out)
	}

	if v := testutil.ToFloat64(metrics.decisions.WithLabelValues("speed-cap", policies.Deny, policies.Enforce)); v != 1 {
		t.Errorf("deny counted %v times", v)
	}
	if v := testutil.ToFloat64(metrics.decisions.WithLabelValues("try-stricter", policies.Deny, policies.LogOnly)); v != 2 {
		t.Errorf("shadow deny counted %v times, want 2", v)
	}
	if v := testutil.ToFloat64(metrics.errors.WithLabelValues("broken")); v != 3 {
		t.Errorf("rule errors counted %v times, want 3", v)
	}
	var actions []string
	st.AuditScan(store.AuditFilter{Type: store.RecordOperator}, func(r store.Record) bool { actions = append(actions, r.Action+":"+r.Principal); return true })
	if strings.Join(actions, ",") != "approve:alice" {
		t.Fatalf("operator records: %v", actions)
	}
}

// A rule's reason is optional: a refusal by a rule without one says so instead of ending in a
// colon, and one that applies because it could not be evaluated says why all the same.
func TestRefusalOfARuleWithoutAReason(t *testing.T) {
	engine, err := policies.Compile([]policies.Rule{
		{ID: "no-reach", Effect: policies.Deny, When: `upstream_tool == "reach"`},
		{ID: "no-fast", Effect: policies.Deny, When: `args.speed > 1.0`},
	}, policies.Options{Default: policies.Allow})
	if err != nil {
		t.Fatal(err)
	}
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	cfg := &config.Server{Name: "arm", CallTimeoutSec: 1}
	tools := catalog{}
	for _, name := range []string{"reach", "move"} {
		tools["arm__"+name] = &Tool{Public: "arm__" + name, Server: "arm", Upstream: name, ServerConfig: cfg, Dispatcher: srv}
	}
	input := func(c *Call) *policies.Input {
		return &policies.Input{Tool: c.Name, Server: c.Tool.Server, UpstreamTool: c.Tool.Upstream, Args: c.Args}
	}
	h := Chain(Dispatch(), Resolve(tools), Policy(engine, input, nil, nil, quiet), CheckResult())
	for _, tt := range []struct{ tool, args, want string }{
		{"arm__reach", `{"speed":0.5}`, "policy rule no-reach denied the call to arm__reach, the rule gives no reason"},
		{"arm__move", `{}`, "policy rule no-fast denied the call to arm__move: rule no-fast could not be evaluated (no such key: speed), so it applies"},
	} {
		out := h.Handle(context.Background(), &Call{ID: tt.tool, Name: tt.tool, Args: json.RawMessage(tt.args), Start: time.Now()})
		if out.Kind != KindPolicyDenied || out.Reason != tt.want {
			t.Errorf("%s: %s %q\nwant %q", tt.tool, out.Kind, out.Reason, tt.want)
		}
	}
	if srv.calls != 0 {
		t.Errorf("%d refused calls reached the server", srv.calls)
	}
}
