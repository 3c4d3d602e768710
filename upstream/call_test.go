package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// slowRun is what the slow tool reports about one run.
type slowRun struct {
	Tag        string
	Start, End int64
}

func callSlow(u *Upstream, ctx context.Context, tag string, ms int) (slowRun, error) {
	res, err := u.Call(ctx, "slow", json.RawMessage(fmt.Sprintf(`{"ms":%d,"tag":%q}`, ms, tag)), nil)
	if err != nil {
		return slowRun{}, err
	}
	var run slowRun
	if len(res.Content) == 1 {
		if text, ok := res.Content[0].(*mcp.TextContent); ok {
			err = json.Unmarshal([]byte(text.Text), &run)
		}
	}
	return run, err
}

func inFlight(u *Upstream) bool {
	u.queue.mu.Lock()
	defer u.queue.mu.Unlock()
	return u.queue.busy
}

func TestPhysicalCallsRunOneAtATimeInArrivalOrder(t *testing.T) {
	checkGoroutines(t)
	cfg := stdioServer(t, "tools")
	cfg.Physical = true
	cfg.QueueSize = 4
	m, err := startManager(t, []config.Server{cfg}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")

	tags := []string{"a", "b", "c"}
	runs := make([]chan slowRun, len(tags))
	for i, tag := range tags {
		runs[i] = make(chan slowRun, 1)
		go func() {
			run, err := callSlow(u, context.Background(), tag, 150)
			if err != nil {
				t.Errorf("call %s: %v", tag, err)
			}
			runs[i] <- run
		}()
		// The next call arrives only once this one is in flight or queued.
		eventually(t, 5*time.Second, "call "+tag+" arrives", func() bool {
			return inFlight(u) && u.queue.queued() == i
		})
	}
	var prev slowRun
	for i, tag := range tags {
		run := <-runs[i]
		if run.Tag != tag {
			t.Fatalf("call %d ran %q", i, run.Tag)
		}
		if i > 0 && run.Start < prev.End {
			t.Errorf("%s started before %s ended: calls overlapped or ran out of order", run.Tag, prev.Tag)
		}
		prev = run
	}
}

func TestPhysicalQueueIsBounded(t *testing.T) {
	checkGoroutines(t)
	cfg := stdioServer(t, "tools")
	cfg.Physical = true
	cfg.QueueSize = 1
	m, err := startManager(t, []config.Server{cfg}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")

	first := make(chan error, 1)
	go func() {
		_, err := callSlow(u, context.Background(), "first", 600)
		first <- err
	}()
	eventually(t, 5*time.Second, "the first call is in flight", func() bool { return inFlight(u) })

	second := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := callSlow(u, ctx, "second", 10)
		second <- err
	}()
	eventually(t, 5*time.Second, "the second call waits", func() bool { return u.queue.queued() == 1 })

	begin := time.Now()
	_, err = callSlow(u, context.Background(), "third", 10)
	if !errors.Is(err, ErrQueueFull) {
		t.Errorf("third call = %v, want ErrQueueFull", err)
	}
	if elapsed := time.Since(begin); elapsed > 100*time.Millisecond {
		t.Errorf("a full queue took %s to refuse", elapsed)
	}
	// The second call's deadline passes while it waits: it was never sent.
	if err := <-second; !errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second call = %v, want ErrUnavailable (not sent), not a deadline of a sent call", err)
	}
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	if _, err := callSlow(u, context.Background(), "fourth", 10); err != nil {
		t.Errorf("call after the queue drained: %v", err)
	}
}

func TestFIFOHandsOverATurnThatArrivesAsTheWaitEnds(t *testing.T) {
	q := &fifo{limit: 2}
	if err := q.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- q.acquire(ctx) }()
	for q.queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	q.release() // races with the cancellation: either way the turn must not be lost
	if err := <-waited; err == nil {
		q.release() // the waiter won the turn: give it back
	}
	if err := q.acquire(context.Background()); err != nil {
		t.Fatalf("turn lost: %v", err)
	}
	if q.queued() != 0 {
		t.Errorf("%d still queued", q.queued())
	}
}

func TestAdmitRefusesBeforeSending(t *testing.T) {
	refused := errors.New("locked out")
	var admit atomic.Bool
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{Admit: func(server string) error {
		if server != "robot" {
			t.Errorf("Admit asked for %q", server)
		}
		if admit.Load() {
			return nil
		}
		return refused
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := m.Get("robot")
	if _, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the Admit error", err)
	}
	admit.Store(true)
	if _, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"x"}`), nil); err != nil {
		t.Fatalf("admitted call: %v", err)
	}
}

// A stop call is sent beside the call in flight, ahead of the call waiting for its turn, even
// with the queue full, and it does not disturb the order of the others.
func TestStopCallJumpsThePhysicalQueue(t *testing.T) {
	checkGoroutines(t)
	cfg := stdioServer(t, "tools")
	cfg.Physical = true
	cfg.QueueSize = 1
	m, err := startManager(t, []config.Server{cfg}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")

	first, second := make(chan slowRun, 1), make(chan slowRun, 1)
	go func() {
		run, err := callSlow(u, context.Background(), "first", 800)
		if err != nil {
			t.Errorf("first: %v", err)
		}
		first <- run
	}()
	eventually(t, 5*time.Second, "the first call is in flight", func() bool { return inFlight(u) })
	go func() {
		run, err := callSlow(u, context.Background(), "second", 10)
		if err != nil {
			t.Errorf("second: %v", err)
		}
		second <- run
	}()
	eventually(t, 5*time.Second, "the second call waits", func() bool { return u.queue.queued() == 1 })

	stop, err := callSlow(u, WithStop(context.Background()), "stop", 10)
	if err != nil {
		t.Fatalf("stop call with the queue full: %v", err)
	}
	if q := u.queue.queued(); q != 1 || !inFlight(u) {
		t.Errorf("after the stop call: queued %d, in flight %v; want the second still waiting behind the first", q, inFlight(u))
	}
	a, b := <-first, <-second
	switch {
	case stop.End > a.End:
		t.Errorf("the stop call ended after the call in flight: it waited for its turn")
	case stop.Start < a.Start:
		t.Errorf("the stop call started before the first call: the test did not set up a call in flight")
	case b.Start < a.End:
		t.Errorf("the second call started before the first ended")
	}
	// An unmarked call still queues: the queue was not left busy or free by the stop call.
	if _, err := callSlow(u, context.Background(), "after", 10); err != nil || inFlight(u) {
		t.Errorf("call after the stop: %v, in flight %v", err, inFlight(u))
	}
}

// Admit is not asked for stop and inspection calls; an inspection call still takes its turn.
func TestStopAndInspectionCallsAreNotAskedOfAdmit(t *testing.T) {
	checkGoroutines(t)
	refused := errors.New("locked out")
	cfg := stdioServer(t, "tools")
	cfg.Physical = true
	var asked atomic.Int32
	m, err := startManager(t, []config.Server{cfg}, Options{Admit: func(string) error {
		asked.Add(1)
		return refused
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := m.Get("robot")
	if _, err := callSlow(u, ctx, "action", 1); !errors.Is(err, refused) {
		t.Fatalf("unmarked call: err = %v, want the Admit error", err)
	}
	if _, err := callSlow(u, WithStop(ctx), "stop", 1); err != nil {
		t.Errorf("stop call: %v", err)
	}
	if _, err := callSlow(u, WithInspection(ctx), "look", 1); err != nil {
		t.Errorf("inspection call: %v", err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("Admit asked %d times, want once (the unmarked call only)", n)
	}

	// An inspection waits for the call in flight: it is no stop.
	if err := u.queue.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	looked := make(chan error, 1)
	go func() {
		_, err := callSlow(u, WithInspection(ctx), "look", 1)
		looked <- err
	}()
	eventually(t, 5*time.Second, "the inspection waits for its turn", func() bool { return u.queue.queued() == 1 })
	select {
	case err := <-looked:
		t.Fatalf("the inspection did not wait for the call in flight: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	u.queue.release()
	if err := <-looked; err != nil {
		t.Errorf("inspection after its turn came: %v", err)
	}
}
