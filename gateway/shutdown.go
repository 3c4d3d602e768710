package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/governor"
)

// ErrShuttingDown is the cause of the context of a call cancelled because the gateway stopped
// before the call finished (context.Cause).
var ErrShuttingDown = errors.New("the gateway is shutting down")

// shutdown tracks the calls in flight so that a stopping gateway can refuse new ones, let the
// running ones finish and cancel what is left. Its zero value is ready; until a shutdown it
// costs a call its place in a list, under one mutex round trip each way.
type shutdown struct {
	mu       sync.Mutex
	draining bool
	running  int
	idle     chan struct{} // made by begin; closed when running drops to zero while draining

	refusal governor.Handler // set by begin: audits and refuses the calls that arrive while draining

	// calls are the admitted calls not yet finished, newest first; cause is set once they
	// were cancelled (cancel), after which none is admitted (Drain cancels only while
	// draining, which refuses them already).
	calls callList
	cause error
}

// enter admits a call unless the gateway is draining. cancel ends the admitted call's context:
// the gateway calls it with the cause if it cancels the calls left at the end of the grace.
// finish must be called when the call returns; after it, cancel is not called.
func (s *shutdown) enter(cancel context.CancelCauseFunc) (finish func(), admitted bool) {
	s.mu.Lock()
	if s.draining || s.cause != nil {
		s.mu.Unlock()
		return nil, false
	}
	call := s.calls.push(cancel)
	s.running++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.calls.remove(call)
		s.running--
		if s.draining && s.running == 0 {
			close(s.idle)
		}
		s.mu.Unlock()
	}, true
}

// cancel cancels every call in flight with cause, once.
func (s *shutdown) cancel(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cause != nil {
		return
	}
	s.cause = cause
	s.calls.cancelAll(cause)
}

// begin starts draining and returns how many calls are in flight and a channel closed once
// none is. Only the first call of begin builds the refusal; later ones just report.
func (s *shutdown) begin(refusal func() governor.Handler) (running int, idle <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining {
		s.refusal = refusal()
		s.draining = true
		s.idle = make(chan struct{})
		if s.running == 0 {
			close(s.idle)
		}
	}
	return s.running, s.idle
}

func (s *shutdown) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// drainingRefusal is the chain a call takes while the gateway drains: it is refused, logged and
// audited like any other refused call, and never reaches a guard, a policy or an upstream.
func (g *Gateway) drainingRefusal() governor.Handler {
	refuse := governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
		if t, ok := g.Resolve(c.Name); ok {
			c.Tool = t // for the audit record's server
		}
		return governor.Refuse(governor.KindUpstreamUnavailable, fmt.Sprintf(
			"the gateway is shutting down and accepts no new calls; %s was not sent to any server. Call it again once the gateway is back.", c.Name))
	})
	steps := []governor.Step{governor.Log(g.log)}
	if st := g.opts.Store; st != nil {
		g.syncMu.Lock()
		toolCall := g.guards.ToolCall
		g.syncMu.Unlock()
		redact := governor.NewAuditRedactor(g.config().Audit).WithGuards(toolCall)
		steps = append([]governor.Step{governor.Audit(st, redact, g.log)}, steps...)
	}
	return governor.Chain(refuse, steps...)
}

// refuseDraining answers a call that enter did not admit. The refusal was set before draining,
// under the mutex enter took, so it is there.
func (g *Gateway) refuseDraining(ctx context.Context, c *governor.Call) *governor.Outcome {
	return g.shutdown.refusal.Handle(ctx, c)
}

// DrainReport says how a Drain went.
type DrainReport struct {
	// InFlight is the number of calls running when the drain began.
	InFlight int
	// Cancelled is the number of calls still running at the end of the grace, which were
	// cancelled. A cancelled physical call locks its server out, as after a timeout.
	Cancelled int
	// Abandoned is the number of cancelled calls that had still not returned when ctx ended.
	Abandoned int
	// Took is how long the drain took.
	Took time.Duration
}

// Drain makes the gateway refuse every new call with an upstream_unavailable failure saying that
// it is shutting down (audited like any refused call), and waits up to grace for the calls in
// flight to finish. Those still running then are cancelled, their upstreams told to stop, and
// Drain waits until they have returned, with their audit records and lockouts handed to the
// store, or until ctx ends. A ctx that ends during the grace cuts it short. Upstreams keep
// running: stop them with Close afterwards. Drain is idempotent; calls stay refused for good.
func (g *Gateway) Drain(ctx context.Context, grace time.Duration) DrainReport {
	start := time.Now()
	running, idle := g.shutdown.begin(g.drainingRefusal)
	report := DrainReport{InFlight: running}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-idle:
		report.Took = time.Since(start)
		return report
	case <-timer.C:
	case <-ctx.Done():
	}
	report.Cancelled = g.shutdown.inFlight()
	g.shutdown.cancel(ErrShuttingDown)
	select {
	case <-idle:
	case <-ctx.Done():
		report.Abandoned = g.shutdown.inFlight()
	}
	report.Took = time.Since(start)
	return report
}
