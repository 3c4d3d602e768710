package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// cellRobot is a physical server's tools in process: wait runs until cancelled and then takes
// brake to come to rest; stop notes what was still running; get_scene answers at once.
type cellRobot struct {
	brake   time.Duration
	started chan struct{}
	causes  chan error

	mu        sync.Mutex
	running   int            // waits not yet returned, cancelled ones braking included
	stopCalls []int          // running, at each stop call
	stopAt    chan time.Time // when each stop call arrived
}

func newCellRobot(brake time.Duration) *cellRobot {
	return &cellRobot{brake: brake, started: make(chan struct{}, 16), causes: make(chan error, 16), stopAt: make(chan time.Time, 1024)}
}

func okEnvelope(obs string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(`{"success":true,"observation":%q}`, obs)}}}
}

func (r *cellRobot) Call(ctx context.Context, name string, _ json.RawMessage, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	switch name {
	case "stop":
		r.stopAt <- time.Now()
		r.mu.Lock()
		r.stopCalls = append(r.stopCalls, r.running)
		r.mu.Unlock()
		return okEnvelope("stopped"), nil
	case "wait":
		r.mu.Lock()
		r.running++
		r.mu.Unlock()
		r.started <- struct{}{}
		<-ctx.Done()
		r.causes <- context.Cause(ctx)
		time.Sleep(r.brake)
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
		return nil, ctx.Err()
	}
	return okEnvelope("a red cup on the table"), nil
}

// cellGateway has a physical robot (wait, stop marked stop, get_scene marked for inspection)
// and a camera that is not physical (wait). Nothing is started: the catalog is set directly.
func cellGateway(t testing.TB, robot governor.Dispatcher, cam governor.Dispatcher) (*Gateway, *store.Store, *config.Config) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := &config.Config{
		Path:    "cell.yaml",
		Gateway: config.Gateway{Name: "t", ToolNames: config.ToolNamesPrefixed, LockoutScope: config.LockoutGlobal},
		Servers: []config.Server{
			{Name: "robot", Command: "/nonexistent/robot", Physical: true, CallTimeoutSec: 60, Tools: config.Tools{Overrides: map[string]config.ToolOverride{
				"stop": {Stop: true}, "get_scene": {AllowWhileLocked: true},
			}}},
			{Name: "cam", Command: "/nonexistent/cam", CallTimeoutSec: 60},
		},
	}
	g, err := New(cfg, Options{Store: st, Registry: NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	object := map[string]any{"type": "object"}
	cat, problems := BuildCatalog(cfg, []Source{
		{Server: &cfg.Servers[0], Dispatcher: robot, Tools: []*mcp.Tool{
			{Name: "wait", InputSchema: object},
			{Name: "stop", InputSchema: object},
			{Name: "get_scene", InputSchema: object, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		}},
		{Server: &cfg.Servers[1], Dispatcher: cam, Tools: []*mcp.Tool{{Name: "wait", InputSchema: object}}},
	}, nil)
	if len(problems) != 0 {
		t.Fatalf("catalog problems: %v", problems)
	}
	g.catalog.Store(cat)
	return g, st, cfg
}

// startWait calls robot__wait as principal in the background once the robot has it in hand.
func startWait(t testing.TB, g *Gateway, r *cellRobot, principal string) <-chan *governor.Outcome {
	t.Helper()
	out := make(chan *governor.Outcome, 1)
	go func() { out <- g.Call(context.Background(), &governor.Call{Name: "robot__wait", Principal: principal}) }()
	select {
	case <-r.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never reached the robot")
	}
	return out
}

func TestHaltLocksCancelsAndStops(t *testing.T) {
	// The cancelled call brakes for long enough that the stop, sent after the halt's lockout
	// and the stop's journal entry are on disk, reaches the robot within it even on a loaded
	// CI machine (30 ms was once not enough under the race detector).
	const brake = 300 * time.Millisecond
	robot, cam := newCellRobot(brake), newHeldDispatcher()
	g, st, _ := cellGateway(t, robot, cam)
	moving := startWait(t, g, robot, "planner")
	camCall := make(chan *governor.Outcome, 1)
	go func() {
		camCall <- g.Call(context.Background(), &governor.Call{Name: "cam__wait", Principal: "planner"})
	}()
	<-cam.started

	if _, err := g.Halt(context.Background(), "alice", " "); err == nil {
		t.Fatal("a halt without a reason must be refused")
	}
	rep, err := g.Halt(context.Background(), "alice", "a person is in the cell")
	if err != nil {
		t.Fatal(err)
	}

	// (a) The robot is halted, on disk, with who and why.
	if len(rep.Servers) != 1 || rep.Servers[0].Server != "robot" || rep.Servers[0].AlreadyHalted {
		t.Fatalf("servers halted: %+v", rep.Servers)
	}
	l, ok := st.Lockout("robot")
	if !ok || !l.Halted() || l.By != "alice" || l.Reason != "a person is in the cell" || rep.Servers[0].Lockout != l {
		t.Fatalf("lockout in force: %+v (report %+v)", l, rep.Servers[0].Lockout)
	}
	if _, ok := st.Lockout("cam"); ok {
		t.Error("the halt locked out a server that is not physical")
	}
	// (b) The call in flight was cancelled with the halt as its cause, and ends unknown.
	var cause *HaltCause
	if err := <-robot.causes; !errors.As(err, &cause) || cause.Operator != "alice" {
		t.Fatalf("the robot's call was cancelled with cause %v, want the halt", err)
	}
	out := <-moving
	if out.Kind != governor.KindExecutionStatusUnknown || !out.Unknown ||
		!strings.Contains(out.Reason, `the operator alice halted the robot ("a person is in the cell")`) {
		t.Fatalf("the cancelled call's outcome: %+v", out)
	}
	if len(rep.Cancelled) != 1 || rep.Cancelled[0].Tool != "robot__wait" || rep.Cancelled[0].Principal != "planner" ||
		rep.Cancelled[0].Outcome != CancelledUnknown || rep.Cancelled[0].EndedMS < float64(brake.Milliseconds()) {
		t.Fatalf("cancelled calls: %+v", rep.Cancelled)
	}
	// (c) The stop tool was called through the chain, as the operator, while the cancelled
	// call was still braking.
	stop := rep.Servers[0].Stop
	if stop.Tool != "robot__stop" || stop.CallID == "" || stop.Status != StopOK || stop.SentMS <= 0 || stop.AnsweredMS < stop.SentMS {
		t.Fatalf("stop tool: %+v", stop)
	}
	robot.mu.Lock()
	stopCalls := slices.Clone(robot.stopCalls)
	robot.mu.Unlock()
	if len(stopCalls) != 1 || stopCalls[0] != 1 {
		t.Errorf("calls still running on the robot when stop arrived: %v, want [1] (sent without waiting for the cancelled call)", stopCalls)
	}
	if rep.Timings.StopSentMS != stop.SentMS || rep.Timings.LastCancelledEndedMS != rep.Cancelled[0].EndedMS ||
		rep.Timings.StopSentMS >= rep.Timings.LastCancelledEndedMS || rep.AuditError != "" {
		t.Errorf("timings: %+v, audit error %q", rep.Timings, rep.AuditError)
	}

	// The camera is not physical: its call runs on.
	select {
	case o := <-camCall:
		t.Fatalf("the halt ended a call on a server that is not physical: %+v", o)
	default:
	}
	close(cam.release)
	if o := <-camCall; !o.Success {
		t.Fatalf("the camera's call: %+v", o)
	}

	// While halted: the inspection tool answers, the stop tool too, everything else is refused.
	for name, want := range map[string]governor.Kind{
		"robot__get_scene": "", "robot__stop": "", "robot__wait": governor.KindExecutionStatusUnknown,
	} {
		if o := g.Call(context.Background(), &governor.Call{Name: name, Principal: "planner"}); o.Kind != want {
			t.Errorf("%s while halted: %+v, want kind %q", name, o, want)
		}
	}

	// The audit log holds the halt, the stop call and the cancelled call.
	recs := auditRecords(t, st)
	halt := slices.IndexFunc(recs, func(r store.Record) bool { return r.Type == store.RecordOperator && r.Action == "halt" })
	stopRec := slices.IndexFunc(recs, func(r store.Record) bool { return r.CallID == stop.CallID })
	cancelled := slices.IndexFunc(recs, func(r store.Record) bool {
		return r.Type == store.RecordCall && r.CallID == rep.Cancelled[0].CallID
	})
	switch {
	case halt < 0 || stopRec < 0 || cancelled < 0:
		t.Fatalf("audit records (halt %d, stop %d, cancelled %d):\n%+v", halt, stopRec, cancelled, recs)
	case recs[halt].Principal != "alice" || recs[halt].Reason != "a person is in the cell" || recs[halt].Server != "robot":
		t.Errorf("halt record: %+v", recs[halt])
	case recs[stopRec].Principal != "alice" || recs[stopRec].Tool != "robot__stop" || recs[stopRec].Detail["called_by"] != "halt" || recs[stopRec].Outcome != governor.OutcomeOK:
		t.Errorf("stop record: %+v", recs[stopRec])
	case recs[cancelled].Kind != string(governor.KindExecutionStatusUnknown) || !strings.Contains(recs[cancelled].Reason, "alice halted"):
		t.Errorf("cancelled call's record: %+v", recs[cancelled])
	case halt > stopRec:
		t.Errorf("the halt record (%d) comes after the stop call's (%d)", halt, stopRec)
	}
	if n := testutil.ToFloat64(g.opMetrics.halts.WithLabelValues("robot")); n != 1 {
		t.Errorf("halts_total{robot} = %v, want 1", n)
	}
}

// A halt over a lockout replaces it and says so; a second halt keeps the first; unlock clears
// the halt and its record says it was one.
func TestHaltOverALockoutAgainAndUnlock(t *testing.T) {
	g, st, _ := cellGateway(t, newCellRobot(0), newHeldDispatcher())
	timedOut := store.Lockout{Server: "robot", Tool: "robot__wait", CallID: "c1", Kind: store.LockoutUnknown, Reason: "deadline passed"}
	if err := st.PutLockout(timedOut); err != nil {
		t.Fatal(err)
	}
	first, err := g.Halt(context.Background(), "alice", "smoke")
	if err != nil {
		t.Fatal(err)
	}
	hs := first.Servers[0]
	if hs.AlreadyHalted || hs.Lockout.Replaced == nil || hs.Lockout.Replaced.CallID != "c1" || !hs.Lockout.Halted() {
		t.Fatalf("a halt over a lockout: %+v", hs)
	}
	second, err := g.Halt(context.Background(), "bob", "still smoke")
	if err != nil {
		t.Fatal(err)
	}
	if hs := second.Servers[0]; !hs.AlreadyHalted || hs.Lockout.By != "alice" || hs.Stop.Status != StopOK {
		t.Fatalf("a second halt must keep the first and stop again: %+v", hs)
	}
	if l, _ := st.Lockout("robot"); l.By != "alice" || l.Reason != "smoke" {
		t.Fatalf("in force after two halts: %+v", l)
	}
	res, err := g.Unlock(context.Background(), "robot", "carol", "cell cleared and inspected")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cleared.Halted() || res.Cleared.Replaced == nil {
		t.Errorf("unlock cleared %+v, want the halt with what it replaced", res.Cleared)
	}
	if _, ok := st.Lockout("robot"); ok {
		t.Fatal("still locked after the unlock")
	}
	var halts, unlock []store.Record
	for _, r := range auditRecords(t, st) {
		switch r.Action {
		case "halt":
			halts = append(halts, r)
		case "unlock":
			unlock = append(unlock, r)
		}
	}
	if len(halts) != 2 || halts[0].Detail["replaced"] == nil || halts[1].Detail["already_halted"] == nil || halts[1].Principal != "bob" {
		t.Fatalf("halt records: %+v", halts)
	}
	if len(unlock) != 1 || unlock[0].Detail["lockout_kind"] != store.LockoutHalt || unlock[0].Detail["locked_by"] != "alice" ||
		unlock[0].Detail["replaced"] == nil || unlock[0].Principal != "carol" {
		t.Fatalf("unlock record: %+v", unlock)
	}
}

func TestLockRefusesWhatItCannotLockAndKeepsTheRunningCall(t *testing.T) {
	robot := newCellRobot(0)
	g, st, _ := cellGateway(t, robot, newHeldDispatcher())
	for _, c := range []struct {
		server, reason string
		is             error
		want           string
	}{
		{"robt", "x", ErrUnknownServer, `did you mean "robot"?`},
		{"cam", "x", ErrNotPhysical, "the physical servers are: robot"},
		{"robot", "", nil, "a reason is required"},
	} {
		_, err := g.Lock(context.Background(), c.server, "alice", c.reason)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Lock(%q, %q) = %v, want %q", c.server, c.reason, err, c.want)
		}
	}
	if len(st.Lockouts()) != 0 {
		t.Fatal("a refused lock locked something out")
	}

	moving := startWait(t, g, robot, "planner")
	res, err := g.Lock(context.Background(), "robot", "alice", "a person is in the cell")
	if err != nil || res.AlreadyLocked || res.Lockout.Kind != store.LockoutOperator || res.Lockout.By != "alice" || res.AuditError != "" {
		t.Fatalf("Lock = %+v, %v", res, err)
	}
	select {
	case o := <-moving:
		t.Fatalf("a lock must not cancel the call in flight: %+v", o)
	case <-time.After(50 * time.Millisecond):
	}
	if o := g.Call(context.Background(), &governor.Call{Name: "robot__wait", Principal: "planner"}); o.Kind != governor.KindExecutionStatusUnknown {
		t.Errorf("a new call while locked: %+v", o)
	}
	again, err := g.Lock(context.Background(), "robot", "bob", "me too")
	if err != nil || !again.AlreadyLocked || again.Lockout.By != "alice" {
		t.Fatalf("a second lock: %+v, %v", again, err)
	}
	var locks []store.Record
	for _, r := range auditRecords(t, st) {
		if r.Action == "lock" {
			locks = append(locks, r)
		}
	}
	if len(locks) != 2 || locks[0].Principal != "alice" || locks[0].Reason != "a person is in the cell" || locks[1].Detail["already_locked"] == nil {
		t.Fatalf("lock records: %+v", locks)
	}
	if n := testutil.ToFloat64(g.opMetrics.locks.WithLabelValues("robot")); n != 1 {
		t.Errorf("operator_lockouts_total{robot} = %v, want 1 (the second lock changed nothing)", n)
	}
}

func TestStatusShowsHaltsCallsAndOperatorTools(t *testing.T) {
	robot := newCellRobot(0)
	g, st, _ := cellGateway(t, robot, newHeldDispatcher())
	now := time.Now()
	if err := st.PutApproval(store.Approval{ID: "ap-1", Server: "robot", Tool: "robot__wait", Principal: "planner", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	moving := startWait(t, g, robot, "planner")
	s := g.Status()
	if len(s.Physical) != 1 {
		t.Fatalf("physical servers: %+v", s.Physical)
	}
	p := s.Physical[0]
	if p.Server != "robot" || len(p.InFlight) != 1 || p.InFlight[0].Tool != "robot__wait" || p.InFlight[0].Principal != "planner" ||
		p.StopTool != "robot__stop" || !slices.Equal(p.InspectionTools, []string{"robot__get_scene"}) {
		t.Fatalf("robot's status: %+v", p)
	}
	if s.Halted || s.Approvals.Pending != 1 || s.Approvals.Requests[0].ID != "ap-1" || s.Approvals.Requests[0].Tool != "robot__wait" {
		t.Fatalf("status: halted %v, approvals %+v", s.Halted, s.Approvals)
	}
	if _, err := g.Halt(context.Background(), "alice", "drill"); err != nil {
		t.Fatal(err)
	}
	<-moving
	s = g.Status()
	if !s.Halted || len(s.Lockouts) != 1 || s.Lockouts[0].Kind != store.LockoutHalt || s.Lockouts[0].By != "alice" || len(s.Physical[0].InFlight) != 0 {
		t.Fatalf("status after the halt: %+v", s)
	}
}

func TestOperatorEndpoints(t *testing.T) {
	g, st, _ := cellGateway(t, newCellRobot(0), newHeldDispatcher())
	const token = "admin-token-0123456789abcdef"
	g.opts.AdminToken = token
	srv := httptest.NewServer(g.Handler(nil))
	defer srv.Close()
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/admin/halt", `{"operator": "alice"}`, 400, "a reason is required"},
		{"/admin/halt", `reason=x`, 400, "not JSON"},
		{"/admin/lockouts/robt", `{"reason": "x"}`, 404, `did you mean \"robot\"`},
		{"/admin/lockouts/cam", `{"reason": "x"}`, 400, "not a physical server"},
		{"/admin/lockouts/robot", `{"reason": ""}`, 400, "a reason is required"},
	} {
		if code, body := post(c.path, c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("POST %s %s = %d %s, want %d with %q", c.path, c.body, code, body, c.code, c.want)
		}
	}
	if len(st.Lockouts()) != 0 {
		t.Fatal("a refused request locked something out")
	}
	code, body := post("/admin/lockouts/robot", `{"reason": "a person is in the cell", "operator": "alice"}`)
	var lock LockResult
	if code != 200 || json.Unmarshal([]byte(body), &lock) != nil || lock.Lockout.By != "alice" || lock.Lockout.Kind != store.LockoutOperator {
		t.Fatalf("lock = %d %s", code, body)
	}
	code, body = post("/admin/halt", `{"reason": "smoke", "operator": "bob"}`)
	var rep HaltReport
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil || rep.Operator != "bob" || len(rep.Servers) != 1 ||
		rep.Servers[0].Lockout.Replaced == nil || rep.Servers[0].Lockout.Replaced.By != "alice" {
		t.Fatalf("halt over the lock = %d %s", code, body)
	}
}

// BenchmarkHaltInProcess measures a halt's own cost in the gateway, with the state file on disk
// and the robot in process: each iteration starts a call, halts, and unlocks. It reports, from
// the halt request, p50 and p99 of the time to the stop tool's call reaching the robot
// (stop-sent) and to the cancelled call's end (cancelled-ended, which includes the robot's 5ms
// brake).
//
//	go test ./gateway -run '^$' -bench HaltInProcess -benchtime 200x
func BenchmarkHaltInProcess(b *testing.B) {
	robot := newCellRobot(5 * time.Millisecond)
	g, _, _ := cellGateway(b, robot, newHeldDispatcher())
	var stopSent, cancelledEnded []float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		moving := startWait(b, g, robot, "planner")
		b.StartTimer()
		start := time.Now()
		rep, err := g.Halt(context.Background(), "bench", "bench")
		b.StopTimer()
		if err != nil || rep.Servers[0].Stop.Status != StopOK || len(rep.Cancelled) != 1 {
			b.Fatalf("halt: %+v, %v", rep, err)
		}
		stopSent = append(stopSent, float64((<-robot.stopAt).Sub(start).Microseconds())/1000)
		cancelledEnded = append(cancelledEnded, rep.Timings.LastCancelledEndedMS)
		<-moving
		<-robot.causes
		if _, err := g.Unlock(context.Background(), "robot", "bench", "bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	for name, v := range map[string][]float64{"stop-sent": stopSent, "cancelled-ended": cancelledEnded} {
		slices.Sort(v)
		b.ReportMetric(v[len(v)/2], name+"-p50-ms")
		b.ReportMetric(v[len(v)*99/100], name+"-p99-ms")
	}
}

// TestOperatorTextIsShownAsItIs: a reason or a name with control characters (escape sequences,
// forged lines) still halts and unlocks, but is kept and shown escaped, never as terminal control.
func TestOperatorTextIsShownAsItIs(t *testing.T) {
	g, st, _ := cellGateway(t, newCellRobot(0), newHeldDispatcher())
	if _, err := g.Halt(context.Background(), "m\x1b[2Jallory\nfake", "esc \x1b[31mRED\x1b[0m\nLOCKOUTS\n  robot: unlocked by root"); err != nil {
		t.Fatalf("a halt must never be refused for its text: %v", err)
	}
	l, ok := st.Lockout("robot")
	if !ok || strings.ContainsAny(l.Reason+l.By, "\x1b\n") || !strings.Contains(l.Reason, `\x1b[31mRED`) || !strings.Contains(l.By, `\nfake`) {
		t.Fatalf("the halt as stored: %+v", l)
	}
	res, err := g.Unlock(context.Background(), "robot", "bob\x07", "checked\x1b[1A")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := st.AuditScan(store.AuditFilter{}, func(r store.Record) bool {
		if r.Type == store.RecordCall {
			return true
		}
		n++
		if strings.ContainsAny(r.Principal+r.Reason, "\x1b\x07\n") {
			t.Errorf("an audit record holds control characters: %+v", r)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if n < 2 || !strings.Contains(res.Cleared.Reason, `\x1b[31mRED`) {
		t.Errorf("%d operator records; cleared %+v", n, res.Cleared)
	}
}
