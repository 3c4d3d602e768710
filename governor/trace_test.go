package governor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// The values of the traced calls' arguments: none may appear on a span.
const (
	secretArg = "AKIAIOSFODNN7EXAMPLE" // the tool_call guard redacts it
	targetArg = "red_cup_on_the_table"
)

// tracing is an SDK tracer provider whose spans are kept in memory.
type tracing struct {
	rec    *tracetest.SpanRecorder
	tracer trace.Tracer
}

func newTracing(t *testing.T) *tracing {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracing{rec: rec, tracer: tp.Tracer("test")}
}

// named returns the ended spans called name.
func (tr *tracing) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span called name.
func (tr *tracing) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := tr.named(name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", len(got), name, tr.names())
	}
	return got[0]
}

// names are the ended spans' names in the order they started.
func (tr *tracing) names() []string {
	spans := tr.rec.Ended()
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].StartTime().Before(spans[j].StartTime()) })
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// children are the names of the ended spans whose parent is parent, in the order they started.
func (tr *tracing) children(parent trace.SpanContext) []string {
	spans := tr.rec.Ended()
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].StartTime().Before(spans[j].StartTime()) })
	var out []string
	for _, s := range spans {
		if s.Parent().SpanID() == parent.SpanID() && s.SpanContext().TraceID() == parent.TraceID() {
			out = append(out, s.Name())
		}
	}
	return out
}

// reset forgets the spans ended so far.
func (tr *tracing) reset() { tr.rec.Reset() }

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func events(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

func event(t *testing.T, s sdktrace.ReadOnlySpan, name string) sdktrace.Event {
	t.Helper()
	for _, e := range s.Events() {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("span %q has no event %q; events %v", s.Name(), name, events(s))
	return sdktrace.Event{}
}

func eventAttr(e sdktrace.Event, key attribute.Key) string {
	for _, kv := range e.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// failedWith checks that s is marked as failed with kind, the way telemetry.Fail does.
func failedWith(t *testing.T, s sdktrace.ReadOnlySpan, kind Kind) {
	t.Helper()
	if s.Status().Code != codes.Error || s.Status().Description != string(kind) || attr(s, telemetry.AttrErrorType).AsString() != string(kind) {
		t.Errorf("span %q: status %+v, error.type %q; want failed with %s", s.Name(), s.Status(), attr(s, telemetry.AttrErrorType).AsString(), kind)
	}
	event(t, s, "refused")
}

// noArgumentValues fails when a span holds any of the traced calls' argument values.
func (tr *tracing) noArgumentValues(t *testing.T) {
	t.Helper()
	for _, s := range tr.rec.Ended() {
		var all []string
		all = append(all, s.Name(), s.Status().Description)
		for _, kv := range s.Attributes() {
			all = append(all, kv.Value.String())
		}
		for _, e := range s.Events() {
			all = append(all, e.Name)
			for _, kv := range e.Attributes {
				all = append(all, kv.Value.String())
			}
		}
		for _, v := range all {
			if strings.Contains(v, secretArg) || strings.Contains(v, targetArg) {
				t.Errorf("span %q holds an argument's value: %q", s.Name(), v)
			}
		}
	}
}

// tracedGateway is the gateway's chain as buildChain makes it, over a real state file, guards
// that redact a key, and policies that deny fast moves and hold drawers for an operator.
type tracedGateway struct {
	st        *store.Store
	reg       *prometheus.Registry
	logs      *lockedBuffer
	notifier  *recordingNotifier
	approvals *Approvals
	srv       *fakeServer
	upstream  trace.SpanContext // the span context the last upstream call got
	steps     []Step            // every step but Trace
}

func newTracedGateway(t *testing.T) *tracedGateway {
	t.Helper()
	g := &tracedGateway{st: openStore(t), reg: prometheus.NewRegistry(), logs: &lockedBuffer{}, notifier: &recordingNotifier{sent: make(chan string, 1)}}
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	g.approvals = NewApprovals(g.st, g.st.Audit(), g.notifier, 5*time.Second, logger)
	g.srv = &fakeServer{do: func(ctx context.Context, _ string, _ json.RawMessage) (*mcp.CallToolResult, error) {
		g.upstream = trace.SpanContextFromContext(ctx)
		return ok("done")
	}}
	schema, err := argschema.Compile("arm__move", map[string]any{
		"type": "object", "required": []any{"target"},
		"properties": map[string]any{"target": map[string]any{"type": "string"}, "speed": map[string]any{"type": "number"}, "note": map[string]any{"type": "string"}},
	}, argschema.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Server{Name: "arm", CallTimeoutSec: 5}
	tools := catalog{
		"arm__move":        {Public: "arm__move", Server: "arm", Upstream: "move", Evaluated: true, Schema: schema, ServerConfig: cfg, Dispatcher: g.srv},
		"arm__open_drawer": {Public: "arm__open_drawer", Server: "arm", Upstream: "open_drawer", Evaluated: true, ServerConfig: cfg, Dispatcher: g.srv},
	}
	callSet, err := guards.Build(guards.StageToolCall, []guards.Spec{{ID: "keys", Use: "secrets.scan", Action: guards.ActionRedact}})
	if err != nil {
		t.Fatal(err)
	}
	resultSet, err := guards.Build(guards.StageToolResult, []guards.Spec{{ID: "result-keys", Use: "secrets.scan", Action: guards.ActionBlock}})
	if err != nil {
		t.Fatal(err)
	}
	engine, err := policies.Compile([]policies.Rule{
		{ID: "speed-cap", Effect: policies.Deny, When: `args[?"speed"].orValue(0.0) > 1.5`, Reason: "arm speed above 1.5 m/s"},
		{ID: "drawer-needs-person", Effect: policies.RequireApproval, When: `upstream_tool == "open_drawer"`, Reason: "opening needs a person"},
	}, policies.Options{Default: policies.Allow})
	if err != nil {
		t.Fatal(err)
	}
	input := func(c *Call) *policies.Input {
		return &policies.Input{Tool: c.Name, Server: c.Tool.Server, UpstreamTool: c.Tool.Upstream, Args: c.Args, Principal: policies.Principal{ID: c.Principal}}
	}
	redact := NewRedactor(config.DefaultRedactKeys).WithGuards(callSet)
	guarding := &Guarding{Approvals: g.approvals}
	g.steps = []Step{
		NewMetrics(g.reg).Observe(),
		Audit(g.st, redact, logger),
		Log(logger),
		Resolve(tools),
		CheckStore(g.st.Available),
		CheckLockout(NewLockouts(g.st, config.LockoutGlobal)),
		Validate(redact),
		GuardCall(callSet, guarding),
		Policy(engine, input, g.approvals, nil, logger),
		CheckStore(g.st.Available),
		GuardResult(resultSet, guarding),
		CheckResult(),
		LockOnUnknown(g.st, g.st.Audit(), logger),
	}
	return g
}

// traced is the chain with the call's span (Trace over tr's tracer) outermost.
func (g *tracedGateway) traced(tr *tracing) Handler {
	return Chain(Dispatch(), append([]Step{traceWith(tr.tracer)}, g.steps...)...)
}

// untraced is the chain as it is with telemetry off.
func (g *tracedGateway) untraced() Handler { return Chain(Dispatch(), g.steps...) }

func moveCall(id, args string) *Call {
	return &Call{ID: id, Name: "arm__move", Args: json.RawMessage(args), Principal: "planner", Session: "s1", Start: time.Now()}
}

// lastRecord is the last audit record of type typ.
func (g *tracedGateway) lastRecord(t *testing.T, typ string) store.Record {
	t.Helper()
	if err := g.st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var last store.Record
	if err := g.st.AuditScan(store.AuditFilter{Type: typ}, func(r store.Record) bool { last = r; return true }); err != nil {
		t.Fatal(err)
	}
	if last.Seq == 0 {
		t.Fatalf("no %s record", typ)
	}
	return last
}

// logLine is the last JSON log line with message msg.
func (g *tracedGateway) logLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, line := range strings.Split(strings.TrimSpace(g.logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			found = m
		}
	}
	if found == nil {
		t.Fatalf("no log line %q in\n%s", msg, g.logs.String())
	}
	return found
}

// An allowed call through the whole chain is the call's server span with one child per step
// that did work, in the order they ran; the upstream gets the dispatch span's context; the audit
// record, the log line and the latency exemplar carry the call span's ids; and nothing on a span
// holds an argument's value.
func TestTracedCallHasAStepSpanPerStep(t *testing.T) {
	tr := newTracing(t)
	g := newTracedGateway(t)
	out := g.traced(tr).Handle(context.Background(), moveCall("c1", `{"target":"`+targetArg+`","speed":0.5,"note":"key `+secretArg+`"}`))
	if out.Kind != "" {
		t.Fatalf("outcome %+v", out)
	}
	call := tr.one(t, "tools/call arm__move")
	if call.SpanKind() != trace.SpanKindServer || call.Parent().IsValid() {
		t.Fatalf("call span: kind %v, parent %v; want a server span at the root", call.SpanKind(), call.Parent())
	}
	want := []string{spanValidate, spanGuardCall, spanPolicy, "tools/call move", spanGuardResult, spanAudit}
	if got := tr.children(call.SpanContext()); !slices.Equal(got, want) {
		t.Fatalf("the call span's children: %v, want %v (every span: %v)", got, want, tr.names())
	}

	dispatch := tr.one(t, "tools/call move")
	if dispatch.SpanKind() != trace.SpanKindClient || attr(dispatch, telemetry.AttrServer).AsString() != "arm" ||
		attr(dispatch, telemetry.AttrToolName).AsString() != "move" || dispatch.Status().Code == codes.Error {
		t.Errorf("dispatch span: kind %v, attributes %v, status %+v", dispatch.SpanKind(), dispatch.Attributes(), dispatch.Status())
	}
	if g.upstream.SpanID() != dispatch.SpanContext().SpanID() || g.upstream.TraceID() != call.SpanContext().TraceID() {
		t.Errorf("the upstream call got span %v, want the dispatch span %v", g.upstream.SpanID(), dispatch.SpanContext().SpanID())
	}
	policy := tr.one(t, spanPolicy)
	if attr(policy, telemetry.AttrRule).AsString() != "default" || attr(policy, telemetry.AttrEffect).AsString() != policies.Allow {
		t.Errorf("policy span attributes: %v", policy.Attributes())
	}
	guard := tr.one(t, spanGuardCall)
	if got := attr(guard, telemetry.AttrGuard).AsStringSlice(); !slices.Equal(got, []string{"keys"}) ||
		attr(guard, attrGuardAction).AsString() != string(guards.ActionRedact) || attr(guard, telemetry.AttrStage).AsString() != string(guards.StageToolCall) {
		t.Errorf("tool_call guard span attributes: %v", guard.Attributes())
	}
	if s := tr.one(t, spanGuardResult); len(attr(s, telemetry.AttrGuard).AsStringSlice()) != 0 || s.Status().Code == codes.Error {
		t.Errorf("tool_result guard span of a clean result: %v %+v", s.Attributes(), s.Status())
	}
	tr.noArgumentValues(t)

	traceID, spanID := call.SpanContext().TraceID().String(), call.SpanContext().SpanID().String()
	rec := g.lastRecord(t, store.RecordCall)
	if rec.TraceID != traceID || rec.SpanID != spanID {
		t.Errorf("audit record trace %q span %q, want the call span's %s %s", rec.TraceID, rec.SpanID, traceID, spanID)
	}
	line := g.logLine(t, "tool call")
	if line["trace_id"] != traceID || line["span_id"] != spanID {
		t.Errorf("log line %v does not carry the call span's ids %s %s", line, traceID, spanID)
	}
	if got := exemplarTraceIDs(t, g.reg); !slices.Equal(got, []string{traceID}) {
		t.Errorf("latency exemplars name traces %v, want [%s]", got, traceID)
	}
}

// exemplarTraceIDs are the trace ids of the call latency histogram's exemplars.
func exemplarTraceIDs(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range families {
		if f.GetName() != Namespace+"_tool_call_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					if l.GetName() == "trace_id" {
						ids = append(ids, l.GetValue())
					}
				}
			}
		}
	}
	return ids
}

// Under a parent span the caller started (no Trace step), the step spans are its children: a
// denial's policy span has the deciding rule, its effect and the failure kind, and nothing runs
// after it but the audit.
func TestPolicyDenialIsOnThePolicySpan(t *testing.T) {
	tr := newTracing(t)
	g := newTracedGateway(t)
	ctx, parent := tr.tracer.Start(context.Background(), "client")
	out := g.untraced().Handle(ctx, moveCall("c1", `{"target":"`+targetArg+`","speed":2.0}`))
	parent.End()
	if out.Kind != KindPolicyDenied {
		t.Fatalf("outcome %+v", out)
	}
	want := []string{spanValidate, spanGuardCall, spanPolicy, spanAudit}
	if got := tr.children(parent.SpanContext()); !slices.Equal(got, want) {
		t.Fatalf("the parent's children: %v, want %v", got, want)
	}
	policy := tr.one(t, spanPolicy)
	if attr(policy, telemetry.AttrRule).AsString() != "speed-cap" || attr(policy, telemetry.AttrEffect).AsString() != policies.Deny {
		t.Errorf("policy span attributes: %v", policy.Attributes())
	}
	failedWith(t, policy, KindPolicyDenied)
	for _, name := range []string{spanValidate, spanGuardCall, spanAudit} {
		if s := tr.one(t, name); s.Status().Code == codes.Error {
			t.Errorf("span %q failed (%+v); only the policy refused", name, s.Status())
		}
	}
	tr.noArgumentValues(t)
	rec := g.lastRecord(t, store.RecordCall)
	if rec.TraceID != parent.SpanContext().TraceID().String() || rec.SpanID != parent.SpanContext().SpanID().String() {
		t.Errorf("audit record trace %q span %q, want the parent's", rec.TraceID, rec.SpanID)
	}
}

// Arguments that fail the schema fail the validate span, with the kind and never the reason
// (which quotes the arguments); no later step runs.
func TestValidationFailureIsOnTheValidateSpan(t *testing.T) {
	tr := newTracing(t)
	g := newTracedGateway(t)
	out := g.traced(tr).Handle(context.Background(), moveCall("c1", `{"target":7,"note":"`+targetArg+`"}`))
	if out.Kind != KindInvalidArguments {
		t.Fatalf("outcome %+v", out)
	}
	call := tr.one(t, "tools/call arm__move")
	if got := tr.children(call.SpanContext()); !slices.Equal(got, []string{spanValidate, spanAudit}) {
		t.Fatalf("the call span's children: %v", got)
	}
	failedWith(t, tr.one(t, spanValidate), KindInvalidArguments)
	failedWith(t, call, KindInvalidArguments)
	tr.noArgumentValues(t)
}

// A call held for an operator has its policy span (require_approval, not failed) end before the
// approval wait, a span of its own with the rule, the request's id and how it ended.
func TestApprovalWaitIsASpanWithItsEnd(t *testing.T) {
	for _, tc := range []struct {
		approve bool
		end     string
		kind    Kind
	}{
		{true, approvalApproved, ""},
		{false, approvalDenied, KindApprovalDenied},
	} {
		t.Run(tc.end, func(t *testing.T) {
			tr := newTracing(t)
			g := newTracedGateway(t)
			done := make(chan *Outcome)
			go func() {
				c := &Call{ID: "c1", Name: "arm__open_drawer", Args: json.RawMessage(`{}`), Principal: "planner", Start: time.Now()}
				done <- g.traced(tr).Handle(context.Background(), c)
			}()
			id := <-g.notifier.sent
			if _, err := g.approvals.Decide(context.Background(), id, tc.approve, "alice", "checked"); err != nil {
				t.Fatal(err)
			}
			if out := <-done; out.Kind != tc.kind {
				t.Fatalf("outcome %+v, want kind %q", out, tc.kind)
			}
			call := tr.one(t, "tools/call arm__open_drawer")
			want := []string{spanValidate, spanGuardCall, spanPolicy, spanApprovalWait, "tools/call open_drawer", spanGuardResult, spanAudit}
			if !tc.approve {
				want = []string{spanValidate, spanGuardCall, spanPolicy, spanApprovalWait, spanAudit}
			}
			if got := tr.children(call.SpanContext()); !slices.Equal(got, want) {
				t.Fatalf("the call span's children: %v, want %v", got, want)
			}
			policy, wait := tr.one(t, spanPolicy), tr.one(t, spanApprovalWait)
			if attr(policy, telemetry.AttrEffect).AsString() != policies.RequireApproval || policy.Status().Code == codes.Error {
				t.Errorf("policy span: %v %+v", policy.Attributes(), policy.Status())
			}
			if policy.EndTime().After(wait.StartTime()) {
				t.Errorf("the policy span ends at %v, after the approval wait starts at %v", policy.EndTime(), wait.StartTime())
			}
			if attr(wait, telemetry.AttrRule).AsString() != "drawer-needs-person" || attr(wait, attrApprovalID).AsString() != id {
				t.Errorf("approval wait attributes: %v", wait.Attributes())
			}
			event(t, wait, tc.end)
			if tc.kind != "" {
				failedWith(t, wait, tc.kind)
			} else if wait.Status().Code == codes.Error {
				t.Errorf("approved wait failed: %+v", wait.Status())
			}
			for _, kv := range wait.Attributes() {
				if strings.Contains(kv.Value.String(), "alice") {
					t.Errorf("approval wait span names the operator: %v", kv)
				}
			}
		})
	}
}

// An approval nobody gives ends its wait with "expired".
func TestApprovalWaitExpires(t *testing.T) {
	tr := newTracing(t)
	st := openStore(t)
	a := NewApprovals(st, st.Audit(), &recordingNotifier{}, 20*time.Millisecond, quiet)
	ctx, parent := tr.tracer.Start(context.Background(), "call")
	kind, _ := a.Request(ctx, approvalCall(), "destructive", "")
	parent.End()
	if kind != KindApprovalExpired {
		t.Fatalf("kind %q", kind)
	}
	wait := tr.one(t, spanApprovalWait)
	event(t, wait, approvalExpired)
	failedWith(t, wait, KindApprovalExpired)
	if wait.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("approval wait's parent %v, want the call's", wait.Parent().SpanID())
	}
}

// A physical call whose outcome is unknown puts a "lockout" event on its span, and its lockout
// record and log line carry its trace; the next call is refused with a "locked out" event, and
// a call refused by a halt gets a "halt" event.
func TestLockoutsAreEventsOnTheCallSpan(t *testing.T) {
	tr := newTracing(t)
	st := openStore(t)
	logs := &lockedBuffer{}
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logs, nil)))
	srv := &fakeServer{do: func(ctx context.Context, _ string, _ json.RawMessage) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	arm := &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 0.02}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: arm, Dispatcher: srv}}
	h := Chain(Dispatch(), traceWith(tr.tracer), Audit(st, NewRedactor(nil), logger), Resolve(tools),
		CheckLockout(NewLockouts(st, config.LockoutGlobal)), CheckResult(), LockOnUnknown(st, st.Audit(), logger))
	pick := func(id string) *Outcome {
		return h.Handle(context.Background(), &Call{ID: id, Name: "arm__pick", Args: json.RawMessage(`{}`), Start: time.Now()})
	}

	if out := pick("c1"); out.Kind != KindExecutionStatusUnknown {
		t.Fatalf("timed-out call: %+v", out)
	}
	call := tr.one(t, "tools/call arm__pick")
	e := event(t, call, eventLockout)
	if eventAttr(e, telemetry.AttrServer) != "arm" || eventAttr(e, telemetry.AttrLockout) != store.LockoutUnknown ||
		eventAttr(e, telemetry.AttrErrorType) != string(KindExecutionStatusUnknown) {
		t.Errorf("lockout event attributes: %v", e.Attributes)
	}
	failedWith(t, tr.one(t, "tools/call pick"), KindExecutionStatusUnknown)
	traceID := call.SpanContext().TraceID().String()
	var lockoutRec store.Record
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = st.AuditScan(store.AuditFilter{Type: store.RecordLockout}, func(r store.Record) bool { lockoutRec = r; return true })
	if lockoutRec.TraceID != traceID || lockoutRec.SpanID != call.SpanContext().SpanID().String() {
		t.Errorf("lockout record %+v does not carry the call's trace %s", lockoutRec, traceID)
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && strings.HasPrefix(m["msg"].(string), "physical server locked out") {
			line = m
		}
	}
	if line == nil || line["trace_id"] != traceID {
		t.Errorf("lockout log line %v does not carry trace %s:\n%s", line, traceID, logs.String())
	}

	tr.reset()
	if out := pick("c2"); out.Kind != KindExecutionStatusUnknown {
		t.Fatalf("call during the lockout: %+v", out)
	}
	call = tr.one(t, "tools/call arm__pick")
	e = event(t, call, eventLockedOut)
	if eventAttr(e, telemetry.AttrServer) != "arm" || eventAttr(e, telemetry.AttrLockout) != store.LockoutUnknown {
		t.Errorf("locked-out event attributes: %v", e.Attributes)
	}
	if len(tr.named("tools/call pick")) != 0 {
		t.Errorf("a call refused by the lockout was dispatched: %v", tr.names())
	}

	if _, _, err := st.ApplyLockout(store.Lockout{Server: "arm", Kind: store.LockoutHalt, By: "alice", Reason: "someone in the cell", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tr.reset()
	pick("c3")
	call = tr.one(t, "tools/call arm__pick")
	e = event(t, call, eventHalt)
	if eventAttr(e, telemetry.AttrLockout) != store.LockoutHalt || slices.Contains(events(call), eventLockedOut) {
		t.Errorf("halt event %v; events %v", e.Attributes, events(call))
	}
	for _, kv := range e.Attributes {
		if strings.Contains(kv.Value.String(), "alice") || strings.Contains(kv.Value.String(), "cell") {
			t.Errorf("halt event names the operator or the reason: %v", kv)
		}
	}
}

// Without a span in the context nothing is recorded, and the audit record is the one a traced
// call gets without its trace fields; the latency has no exemplar.
func TestUntracedCallsHaveNoSpansAndNoTraceFields(t *testing.T) {
	tr := newTracing(t)
	g := newTracedGateway(t)
	const args = `{"target":"` + targetArg + `","speed":0.5}`
	if out := g.untraced().Handle(context.Background(), moveCall("c1", args)); out.Kind != "" {
		t.Fatalf("outcome %+v", out)
	}
	if got := tr.rec.Ended(); len(got) != 0 {
		t.Fatalf("an untraced call recorded %d spans", len(got))
	}
	if g.upstream.IsValid() {
		t.Errorf("the upstream got a span context %v from an untraced call", g.upstream)
	}
	plain := g.lastRecord(t, store.RecordCall)
	if plain.TraceID != "" || plain.SpanID != "" {
		t.Fatalf("untraced record has trace %q span %q", plain.TraceID, plain.SpanID)
	}
	var raw []byte
	_ = g.st.AuditExport(store.AuditFilter{AfterSeq: plain.Seq - 1}, func(b []byte) error { raw = b; return io.EOF })
	if strings.Contains(string(raw), "trace_id") || strings.Contains(string(raw), "span_id") {
		t.Errorf("untraced record stored as %s", raw)
	}
	if ids := exemplarTraceIDs(t, g.reg); len(ids) != 0 {
		t.Errorf("untraced call left exemplars %v", ids)
	}

	ctx, parent := tr.tracer.Start(context.Background(), "client")
	g.untraced().Handle(ctx, moveCall("c1", args))
	parent.End()
	traced := g.lastRecord(t, store.RecordCall)
	if traced.TraceID != parent.SpanContext().TraceID().String() {
		t.Fatalf("traced record has trace %q", traced.TraceID)
	}
	for _, r := range []*store.Record{&plain, &traced} {
		r.Seq, r.Time, r.Prev, r.Hash, r.DurationMS, r.TraceID, r.SpanID = 0, time.Time{}, "", "", 0, "", ""
	}
	if !reflect.DeepEqual(plain, traced) {
		t.Errorf("records differ beyond their trace:\nuntraced %+v\ntraced   %+v", plain, traced)
	}
}

// The step spans' helpers allocate nothing for a call that is not traced.
func TestUntracedStepSpansAllocateNothing(t *testing.T) {
	ctx := context.Background()
	tool := &Tool{Public: "arm__move", Server: "arm", Upstream: "move", ServerConfig: &config.Server{Name: "arm"}}
	out := &Outcome{Kind: KindPolicyDenied}
	r := guards.Result{Action: guards.ActionBlock, Findings: []guards.Finding{{Guard: "keys"}}}
	lo := store.Lockout{Server: "arm", Kind: store.LockoutHalt}
	rec := store.Record{Type: store.RecordCall}
	allocs := testing.AllocsPerRun(100, func() {
		_, span := telemetry.Child(ctx, spanPolicy)
		telemetry.Fail(span, string(KindPolicyDenied))
		span.End()
		_, span = telemetry.Child(ctx, spanGuardCall)
		endGuardSpan(span, guards.StageToolCall, r)
		dctx, span := startDispatch(ctx, tool)
		_ = dctx
		endDispatch(span, out)
		lockoutEvent(ctx, lo)
		rec = withTrace(ctx, rec)
	})
	if allocs != 0 {
		t.Errorf("untraced step spans allocate %.0f times per call", allocs)
	}
}

// A result the tool_result guards block fails their span, which names the guard and never what
// it matched; the dispatch before it succeeded.
func TestGuardBlockIsOnTheGuardSpan(t *testing.T) {
	tr := newTracing(t)
	g := newTracedGateway(t)
	g.srv.do = func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
		return ok("the key is " + secretArg)
	}
	if out := g.traced(tr).Handle(context.Background(), moveCall("c1", `{"target":"`+targetArg+`"}`)); out.Kind != KindGuardBlocked {
		t.Fatalf("outcome %+v", out)
	}
	s := tr.one(t, spanGuardResult)
	failedWith(t, s, KindGuardBlocked)
	if got := attr(s, telemetry.AttrGuard).AsStringSlice(); !slices.Equal(got, []string{"result-keys"}) ||
		attr(s, telemetry.AttrStage).AsString() != string(guards.StageToolResult) {
		t.Errorf("tool_result guard span attributes: %v", s.Attributes())
	}
	if d := tr.one(t, "tools/call move"); d.Status().Code == codes.Error {
		t.Errorf("dispatch span failed: %+v", d.Status())
	}
	tr.noArgumentValues(t)
}

// The client's JSON-RPC id is on the call's span up to maxSpanRequestID bytes; a longer one,
// which a client may choose of any length, is left off: it is the client's text, kept in
// memory with the span until export.
func TestLongRequestIDsAreLeftOffTheSpan(t *testing.T) {
	tr := newTracing(t)
	g := newTracedGateway(t)
	for _, id := range []string{"42", strings.Repeat("i", maxSpanRequestID), strings.Repeat("x", maxSpanRequestID+1), strings.Repeat("y", 1<<20)} {
		tr.reset()
		c := moveCall("c1", `{"target":"bin","speed":0.5}`)
		c.RequestID = id
		if out := g.traced(tr).Handle(context.Background(), c); out.Kind != "" {
			t.Fatalf("outcome %+v", out)
		}
		got := attr(tr.one(t, "tools/call arm__move"), telemetry.AttrRequestID).AsString()
		want := id
		if len(id) > maxSpanRequestID {
			want = ""
		}
		if got != want {
			t.Errorf("an id of %d bytes is %d bytes on the span, want %d", len(id), len(got), len(want))
		}
	}
}
