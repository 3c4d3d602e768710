package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// heldDispatcher answers a call when released, or fails it when its context ends, reporting the
// cause of that end.
type heldDispatcher struct {
	started chan struct{}
	release chan struct{}
	cause   chan error
}

func newHeldDispatcher() *heldDispatcher {
	return &heldDispatcher{started: make(chan struct{}, 4), release: make(chan struct{}), cause: make(chan error, 4)}
}

func (d *heldDispatcher) Call(ctx context.Context, _ string, _ json.RawMessage, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	d.started <- struct{}{}
	select {
	case <-d.release:
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"success":true,"observation":"waited"}`}}}, nil
	case <-ctx.Done():
		d.cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}
}

// drainGateway is a gateway with a state file whose one server, physical or not, is d. Nothing
// is started: the catalog is set directly.
func drainGateway(t *testing.T, physical bool, d governor.Dispatcher) (*Gateway, *store.Store) {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := &config.Config{
		Gateway: config.Gateway{Name: "t", ToolNames: config.ToolNamesPrefixed, LockoutScope: config.LockoutGlobal},
		Servers: []config.Server{{Name: "robot", Command: "/nonexistent/robot", Physical: physical, CallTimeoutSec: 60}},
	}
	g, err := New(cfg, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	cat, problems := BuildCatalog(cfg, []Source{{Server: &cfg.Servers[0], Dispatcher: d,
		Tools: []*mcp.Tool{{Name: "wait", InputSchema: map[string]any{"type": "object"}}}}}, nil)
	if len(problems) != 0 {
		t.Fatalf("catalog problems: %v", problems)
	}
	g.catalog.Store(cat)
	return g, st
}

// callAsync calls robot__wait in the background once the dispatcher has it in hand.
func callAsync(t *testing.T, g *Gateway, d *heldDispatcher) <-chan *governor.Outcome {
	t.Helper()
	out := make(chan *governor.Outcome, 1)
	go func() { out <- g.Call(context.Background(), &governor.Call{Name: "robot__wait", Principal: "test"}) }()
	select {
	case <-d.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never reached the upstream")
	}
	return out
}

func auditRecords(t *testing.T, st *store.Store) []store.Record {
	t.Helper()
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	if err := st.AuditScan(store.AuditFilter{}, func(r store.Record) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestDrainLetsACallInFlightFinishAndRefusesNewOnes(t *testing.T) {
	d := newHeldDispatcher()
	g, st := drainGateway(t, false, d)
	running := callAsync(t, g, d)

	g.shutdown.begin(g.drainingRefusal) // what Drain does first, before the call below
	drained := make(chan DrainReport, 1)
	go func() { drained <- g.Drain(context.Background(), 10*time.Second) }()
	refused := g.Call(context.Background(), &governor.Call{Name: "robot__wait", Principal: "late"})
	if refused.Kind != governor.KindUpstreamUnavailable || !strings.Contains(refused.Reason, "shutting down") {
		t.Fatalf("a call during the drain must be refused as upstream_unavailable, shutting down: %+v", refused)
	}
	select {
	case r := <-drained:
		t.Fatalf("Drain returned while a call was still in flight: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}

	close(d.release)
	if out := <-running; !out.Success || out.Kind != "" {
		t.Fatalf("the call in flight must finish normally: %+v", out)
	}
	r := <-drained
	if r.InFlight != 1 || r.Cancelled != 0 || r.Abandoned != 0 {
		t.Errorf("report %+v, want 1 in flight, none cancelled", r)
	}
	if len(st.Lockouts()) != 0 {
		t.Errorf("a non-physical call locked out: %+v", st.Lockouts())
	}

	var finished, late *store.Record
	for _, rec := range auditRecords(t, st) {
		switch rec.Principal {
		case "test":
			finished = &rec
		case "late":
			late = &rec
		}
	}
	if finished == nil || finished.Outcome != governor.OutcomeOK {
		t.Errorf("the finished call's audit record: %+v", finished)
	}
	if late == nil || late.Kind != string(governor.KindUpstreamUnavailable) || late.Server != "robot" || late.Decision != "refused" {
		t.Errorf("the refused call's audit record: %+v", late)
	}
}

func TestDrainCancelsAPhysicalCallPastTheGraceAndLocksOut(t *testing.T) {
	d := newHeldDispatcher()
	g, st := drainGateway(t, true, d)
	running := callAsync(t, g, d)

	start := time.Now()
	r := g.Drain(context.Background(), 200*time.Millisecond)
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("Drain took %s with a grace of 200ms", took)
	}
	if r.InFlight != 1 || r.Cancelled != 1 || r.Abandoned != 0 {
		t.Errorf("report %+v, want 1 in flight and cancelled", r)
	}
	if cause := <-d.cause; !errors.Is(cause, ErrShuttingDown) {
		t.Errorf("the upstream call's context ended with %v, want ErrShuttingDown", cause)
	}
	out := <-running
	if out.Kind != governor.KindExecutionStatusUnknown || !strings.Contains(out.Reason, "locked out") {
		t.Errorf("a physical call cancelled at shutdown: %+v", out)
	}
	lo, locked := st.Lockout("robot")
	if !locked || lo.Tool != "robot__wait" || lo.Principal != "test" {
		t.Errorf("lockout %+v (locked %v), want robot locked by robot__wait", lo, locked)
	}
}

func TestDrainWithNothingInFlightReturnsAtOnce(t *testing.T) {
	g, _ := drainGateway(t, true, newHeldDispatcher())
	start := time.Now()
	if r := g.Drain(context.Background(), time.Minute); r.InFlight != 0 || r.Cancelled != 0 {
		t.Errorf("report %+v", r)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Drain with nothing in flight took %s", took)
	}
	g.Drain(context.Background(), time.Minute) // idempotent
	if out := g.Call(context.Background(), &governor.Call{Name: "robot__wait"}); out.Kind != governor.KindUpstreamUnavailable {
		t.Errorf("a call after the drain: %+v", out)
	}
}

// TestEnterRacesBegin: every call is either refused or counted by the drain, never lost
// between the two.
func TestEnterRacesBegin(t *testing.T) {
	for range 200 {
		var s shutdown
		var wg sync.WaitGroup
		finishes := make(chan func(), 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if finish, ok := s.enter(func(error) {}); ok {
					finishes <- finish
				}
			}()
		}
		running, idle := s.begin(func() governor.Handler { return nil })
		wg.Wait()
		close(finishes)
		admitted := 0
		for finish := range finishes {
			admitted++
			finish()
		}
		if admitted != running {
			t.Fatalf("%d calls admitted, %d counted by the drain", admitted, running)
		}
		select {
		case <-idle:
		default:
			t.Fatal("idle not closed once every admitted call finished")
		}
	}
}

// TestShutdownCancelsExactlyTheCallsInFlight admits calls, finishes some of them in an order
// that unlinks the head, the tail and the middle of shutdown's list, and cancels: every call
// still in flight, and none that finished, ends with ErrShuttingDown; the drain then sees the
// last of them finish.
func TestShutdownCancelsExactlyTheCallsInFlight(t *testing.T) {
	var s shutdown
	const n = 64
	ctxs := make([]context.Context, n)
	finishes := make([]func(), n)
	for i := range n {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		finish, ok := s.enter(cancel)
		if !ok {
			t.Fatalf("call %d not admitted", i)
		}
		ctxs[i], finishes[i] = ctx, finish
	}
	r := rand.New(rand.NewPCG(1, 2))
	done := map[int]bool{0: true, n - 1: true, n / 2: true}
	for len(done) < n/2 {
		done[r.IntN(n)] = true
	}
	for i := range n {
		if done[i] {
			finishes[i]()
		}
	}
	if got := s.inFlight(); got != n-len(done) {
		t.Fatalf("%d calls in flight, want %d", got, n-len(done))
	}
	listed := 0
	for c, prev := s.calls.head, (*listedCall)(nil); c != nil; prev, c = c, c.next {
		if c.prev != prev {
			t.Fatalf("call %d of the list does not point back at the one before it", listed)
		}
		listed++
	}
	if listed != n-len(done) {
		t.Fatalf("the list holds %d calls, %d are in flight", listed, n-len(done))
	}
	_, idle := s.begin(func() governor.Handler { return nil })
	if _, ok := s.enter(func(error) {}); ok {
		t.Fatal("a call was admitted while draining")
	}
	s.cancel(ErrShuttingDown)
	for i, ctx := range ctxs {
		cause := context.Cause(ctx)
		switch {
		case done[i] && errors.Is(cause, ErrShuttingDown):
			t.Errorf("call %d finished before the cancel, and its context says %v", i, cause)
		case !done[i] && !errors.Is(cause, ErrShuttingDown):
			t.Errorf("call %d was in flight at the cancel, and its context says %v", i, cause)
		}
	}
	select {
	case <-idle:
		t.Fatal("idle before the calls in flight finished")
	default:
	}
	for i := range n {
		if !done[i] {
			finishes[i]()
		}
	}
	select {
	case <-idle:
	case <-time.After(5 * time.Second):
		t.Fatalf("not idle once every call finished (%d in flight)", s.inFlight())
	}
}

// TestCallListRemoveTwiceKeepsTheRest: an element removed a second time (a finish called
// twice) leaves the other calls on the list, to be cancelled.
func TestCallListRemoveTwiceKeepsTheRest(t *testing.T) {
	var l callList
	var cancelled []int
	var elems []*listedCall
	for i := range 3 {
		elems = append(elems, l.push(func(error) { cancelled = append(cancelled, i) }))
	}
	for range 2 {
		l.remove(elems[2]) // the head
		l.remove(elems[1])
	}
	l.cancelAll(ErrShuttingDown)
	if !slices.Equal(cancelled, []int{0}) {
		t.Errorf("cancelled %v, want [0]", cancelled)
	}
}

// TestShutdownAdmitsNothingAfterItsCancel: a call that comes after the calls in flight were
// cancelled is refused, as it is while draining.
func TestShutdownAdmitsNothingAfterItsCancel(t *testing.T) {
	var s shutdown
	s.cancel(ErrShuttingDown)
	if _, ok := s.enter(func(error) {}); ok {
		t.Error("a call was admitted after the calls in flight were cancelled")
	}
}
