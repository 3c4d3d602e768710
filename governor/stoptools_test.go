package governor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// lockedBuffer collects log lines from any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// classServer is a Dispatcher that records the class each call was marked with.
type classServer struct {
	mu      sync.Mutex
	classes map[string]string // upstream tool -> "stop", "inspection" or "action"
	hang    bool
}

func (s *classServer) Call(ctx context.Context, name string, _ json.RawMessage, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	class := "action"
	switch {
	case upstream.IsStop(ctx):
		class = "stop"
	case upstream.IsInspection(ctx):
		class = "inspection"
	}
	s.mu.Lock()
	s.classes[name] = class
	hang := s.hang
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return ok(name)
}

func (s *classServer) class(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.classes[name]
}

// exemptChain is the chain's lockout part over physical servers arm (with a stop tool and an
// inspection tool) and base.
func exemptChain(st *store.Store, scope string, srv *classServer) Handler {
	arm := &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 0.05}
	base := &config.Server{Name: "base", Physical: true, CallTimeoutSec: 0.05}
	tools := catalog{
		"arm__pick":  {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: arm, Dispatcher: srv},
		"arm__stop":  {Public: "arm__stop", Server: "arm", Upstream: "stop", Stop: true, ServerConfig: arm, Dispatcher: srv},
		"arm__look":  {Public: "arm__look", Server: "arm", Upstream: "look", AllowWhileLocked: true, ServerConfig: arm, Dispatcher: srv},
		"base__move": {Public: "base__move", Server: "base", Upstream: "move", ServerConfig: base, Dispatcher: srv},
	}
	return Chain(Dispatch(),
		Audit(st, NewRedactor(nil), quiet),
		Resolve(tools),
		CheckStore(st.Available),
		CheckLockout(NewLockouts(st, scope)),
		CheckResult(),
		LockOnUnknown(st, st.Audit(), quiet),
	)
}

func TestStopAndInspectionToolsPassALockout(t *testing.T) {
	for _, tt := range []struct {
		scope, lockedServer string
	}{{config.LockoutServer, "arm"}, {config.LockoutGlobal, "base"}} {
		t.Run(tt.scope, func(t *testing.T) {
			st := openStore(t)
			srv := &classServer{classes: map[string]string{}}
			h := exemptChain(st, tt.scope, srv)
			call := func(tool string) *Outcome {
				return h.Handle(context.Background(), &Call{ID: "call-" + tool, Name: tool, Args: json.RawMessage(`{}`), Principal: "p", Start: time.Now()})
			}
			// Unlocked, the calls carry their class to the upstream.
			for tool, want := range map[string]string{"arm__pick": "action", "arm__stop": "stop", "arm__look": "inspection"} {
				if out := call(tool); out.Kind != "" {
					t.Fatalf("%s unlocked: %+v", tool, out)
				}
				if got := srv.class(strings.TrimPrefix(tool, "arm__")); got != want {
					t.Errorf("%s reached the upstream as %q, want %q", tool, got, want)
				}
			}

			if err := st.PutLockout(store.Lockout{Server: tt.lockedServer, Tool: tt.lockedServer + "__x", CallID: "c-lock", At: time.Now(), Reason: "timed out"}); err != nil {
				t.Fatal(err)
			}
			if out := call("arm__pick"); out.Kind != KindExecutionStatusUnknown || !strings.Contains(out.Reason, "c-lock") {
				t.Fatalf("arm__pick while locked: %+v", out)
			}
			for _, tool := range []string{"arm__stop", "arm__look"} {
				if out := call(tool); out.Kind != "" || !out.Success {
					t.Fatalf("%s while locked must be sent: %+v", tool, out)
				}
			}
			// Their audit records say which lockout they passed.
			passed := map[string]any{}
			st.AuditScan(store.AuditFilter{}, func(r store.Record) bool {
				if r.CallID == "call-arm__stop" || r.CallID == "call-arm__look" || r.CallID == "call-arm__pick" {
					passed[r.Tool] = r.Detail["while_locked"]
				}
				return true
			})
			if passed["arm__stop"] != tt.lockedServer || passed["arm__look"] != tt.lockedServer || passed["arm__pick"] != nil {
				t.Errorf("while_locked in the audit records: %v", passed)
			}
		})
	}
}

// A stop call whose outcome is unknown locks out like any physical call: whatever it did, the
// robot's state is not known.
func TestStopCallWithUnknownOutcomeLocksOut(t *testing.T) {
	st := openStore(t)
	srv := &classServer{classes: map[string]string{}, hang: true}
	h := exemptChain(st, config.LockoutServer, srv)
	out := h.Handle(context.Background(), &Call{ID: "c-stop", Name: "arm__stop", Args: json.RawMessage(`{}`), Start: time.Now()})
	if out.Kind != KindExecutionStatusUnknown || !strings.Contains(out.Reason, "now locked out") {
		t.Fatalf("stop call past its deadline: %+v", out)
	}
	if lo, locked := st.Lockout("arm"); !locked || lo.CallID != "c-stop" {
		t.Fatalf("lockout = %+v, %v; want one from the stop call", lo, locked)
	}
	// Locked now, the stop tool is still sent, and another unknown outcome keeps the first
	// lockout on record.
	out = h.Handle(context.Background(), &Call{ID: "c-stop-2", Name: "arm__stop", Args: json.RawMessage(`{}`), Start: time.Now()})
	if out.Kind != KindExecutionStatusUnknown || srv.class("stop") != "stop" {
		t.Fatalf("second stop call: %+v", out)
	}
	if lo, _ := st.Lockout("arm"); lo.CallID != "c-stop" {
		t.Errorf("the lockout on record is now %s, want the first, c-stop", lo.CallID)
	}
}

func TestPolicyNeverDeniesAStopTool(t *testing.T) {
	engine, err := policies.Compile([]policies.Rule{
		{ID: "no-arm", Effect: policies.Deny, When: `server == "arm" && upstream_tool != "look"`, Reason: "the arm is off limits"},
		{ID: "ask-first", Effect: policies.RequireApproval, When: `tool_meta.physical`, Reason: "every move needs a person"},
	}, policies.Options{Default: policies.Deny})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	reg := prometheus.NewRegistry()
	metrics := NewPolicyMetrics(reg)
	n := &recordingNotifier{sent: make(chan string, 4)}
	approvals := NewApprovals(st, st.Audit(), n, 5*time.Second, quiet)
	srv := &classServer{classes: map[string]string{}}
	arm := &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 1}
	tools := catalog{
		"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: arm, Dispatcher: srv},
		"arm__stop": {Public: "arm__stop", Server: "arm", Upstream: "stop", Stop: true, ServerConfig: arm, Dispatcher: srv},
		"arm__look": {Public: "arm__look", Server: "arm", Upstream: "look", AllowWhileLocked: true, ServerConfig: arm, Dispatcher: srv},
	}
	input := func(c *Call) *policies.Input {
		return &policies.Input{Tool: c.Name, Server: c.Tool.Server, UpstreamTool: c.Tool.Upstream, Args: c.Args,
			ToolMeta: policies.ToolMeta{Physical: c.Tool.Physical()}}
	}
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	h := Chain(Dispatch(), Resolve(tools), Policy(engine, input, approvals, metrics, logger), CheckResult())
	run := func(tool string) (*Call, *Outcome) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c := &Call{ID: "c-" + tool, Name: tool, Args: json.RawMessage(`{}`), Start: time.Now()}
		return c, h.Handle(ctx, c)
	}

	c, out := run("arm__stop")
	if out.Kind != "" || !out.Success || srv.class("stop") != "stop" {
		t.Fatalf("stop tool under a deny: %+v", out)
	}
	if c.Decision != "ignored_deny:no-arm" || !strings.Contains(c.Detail["policy_ignored"].(string), "stop tool of server arm") {
		t.Errorf("audit of the ignored deny: %q %v", c.Decision, c.Detail)
	}
	if !strings.Contains(logs.String(), "policy decision ignored") || !strings.Contains(logs.String(), "rule=no-arm") {
		t.Errorf("the ignored deny is not logged with its rule:\n%s", logs.String())
	}
	if v := testutil.ToFloat64(metrics.ignored.WithLabelValues("no-arm", policies.Deny)); v != 1 {
		t.Errorf("ignored deny counted %v times", v)
	}
	// The same rules still apply to every other tool: a deny, a hold for approval, the default.
	if _, out := run("arm__pick"); out.Kind != KindPolicyDenied {
		t.Errorf("arm__pick: %+v", out)
	}
	if len(n.sent) != 0 {
		t.Errorf("an approval was requested")
	}

	// require_approval alone, and the default deny, are ignored too, and nothing waits.
	for _, tt := range []struct {
		rules    []policies.Rule
		def      string
		decision string
	}{
		{[]policies.Rule{{ID: "ask-first", Effect: policies.RequireApproval, When: `tool_meta.physical`, Reason: "r"}}, policies.Allow, "ignored_require_approval:ask-first"},
		{nil, policies.Deny, "ignored_deny:default"},
	} {
		engine, err := policies.Compile(tt.rules, policies.Options{Default: tt.def})
		if err != nil {
			t.Fatal(err)
		}
		h := Chain(Dispatch(), Resolve(tools), Policy(engine, input, approvals, metrics, quiet), CheckResult())
		start := time.Now()
		c := &Call{ID: "c", Name: "arm__stop", Args: json.RawMessage(`{}`), Start: start}
		if out := h.Handle(context.Background(), c); out.Kind != "" || c.Decision != tt.decision || time.Since(start) > time.Second {
			t.Errorf("%s: %+v, decision %q, after %s", tt.decision, out, c.Decision, time.Since(start))
		}
	}
	if len(n.sent) != 0 {
		t.Errorf("an approval was requested for a stop tool")
	}
}
