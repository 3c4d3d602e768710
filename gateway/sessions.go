package gateway

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// sessions keeps what policies know of each downstream session: how many calls it made and the
// labels guards set on it. Entries of sessions that are gone are dropped as new ones arrive.
type sessions struct {
	mu   sync.Mutex
	m    map[string]*sessionState
	live func() map[string]bool // ids of the sessions still connected
}

type sessionState struct {
	calls    atomic.Int64
	logLevel atomic.Value // mcp.LoggingLevel the client set with logging/setLevel
	mu       sync.Mutex
	labels   map[string]bool
}

func newSessions(live func() map[string]bool) *sessions {
	return &sessions{m: make(map[string]*sessionState), live: live}
}

// get returns the state of a session, creating it.
func (s *sessions) get(id string) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[id]
	if !ok {
		if len(s.m) >= 64 && len(s.m)&(len(s.m)-1) == 0 {
			s.prune()
		}
		st = &sessionState{}
		s.m[id] = st
	}
	return st
}

// prune drops sessions no longer connected. Called with mu held, when the table doubles.
// Requests without a session (MCP 2026-07-28, stateless HTTP) all share the entry "", which is
// never dropped: a label a guard set there (untrusted) must not vanish because other sessions
// came and went.
func (s *sessions) prune() {
	live := s.live()
	for id := range s.m {
		if id != "" && !live[id] {
			delete(s.m, id)
		}
	}
}

// begin notes a call in the session and fills the call's session fields.
func (s *sessions) begin(c *governor.Call) {
	st := s.get(c.Session)
	c.SessionCalls = st.calls.Add(1) - 1
	st.mu.Lock()
	if len(st.labels) > 0 {
		c.Labels = maps.Clone(st.labels)
	}
	st.mu.Unlock()
}

// label sets a label on a session, for the calls that follow.
func (s *sessions) label(session, name string) {
	st := s.get(session)
	st.mu.Lock()
	if st.labels == nil {
		st.labels = map[string]bool{}
	}
	st.labels[name] = true
	st.mu.Unlock()
}

// inFlight counts the calls running on each server, for `state.in_flight` in policies, and keeps
// the physical ones with a way to cancel each, for a halt and for status.
type inFlight struct {
	m map[string]*atomic.Int64 // fixed at start: one per configured server

	mu       sync.Mutex
	physical map[*flight]struct{}
	// admitted are the physical calls past the lockout check, before the policy step and
	// after it: a halt cancels those that have not reached dispatch yet (held for an approval,
	// above all) as well as those in flight.
	admitted map[*context.CancelCauseFunc]struct{}
}

// flight is a physical call past the policy step: waiting for its server's turn, or running on
// it. Its fields are fixed when it is registered, except those the end sets.
type flight struct {
	id, server, tool, principal, session string
	start                                time.Time // when it reached dispatch
	stop                                 bool      // the server's stop tool: never cancelled by a halt
	cancel                               context.CancelCauseFunc
	done                                 chan struct{} // closed once the call is back from dispatch

	// Set before done is closed.
	end time.Time
	out *governor.Outcome
}

func newInFlight(servers []string) *inFlight {
	f := &inFlight{m: make(map[string]*atomic.Int64, len(servers)), physical: map[*flight]struct{}{}, admitted: map[*context.CancelCauseFunc]struct{}{}}
	for _, s := range servers {
		f.m[s] = new(atomic.Int64)
	}
	return f
}

func (f *inFlight) get(server string) int64 {
	if n, ok := f.m[server]; ok {
		return n.Load()
	}
	return 0
}

// dispatchKey marks a context whose call reports when it reaches dispatch: the value is a
// func(time.Time), called once from the step below. A halt times its stop calls with it.
type dispatchKey struct{}

// step counts a call as in flight while later steps and the dispatch run. A physical call is
// also registered, with a context a halt can cancel, until it returns.
func (f *inFlight) step() governor.Step {
	return func(next governor.Handler) governor.Handler {
		return governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
			if reached, ok := ctx.Value(dispatchKey{}).(func(time.Time)); ok {
				reached(time.Now())
			}
			n, ok := f.m[c.Tool.Server]
			if !ok {
				return next.Handle(ctx, c)
			}
			n.Add(1)
			defer n.Add(-1)
			if !c.Tool.Physical() {
				return next.Handle(ctx, c)
			}
			ctx, fl := f.register(ctx, c)
			defer f.unregister(fl)
			fl.out = next.Handle(ctx, c)
			haltEvent(ctx, c)
			return fl.out
		})
	}
}

// admitStep registers every physical call but a stop tool's from the lockout check on, with a
// context a halt can cancel (cancelAdmitted): a call held for an operator's approval when the
// robot is halted is withdrawn, so that no approval given later runs it.
func (f *inFlight) admitStep() governor.Step {
	return func(next governor.Handler) governor.Handler {
		return governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
			if !c.Tool.Physical() || c.Tool.Stop {
				return next.Handle(ctx, c)
			}
			ctx, cancel := context.WithCancelCause(ctx)
			f.mu.Lock()
			f.admitted[&cancel] = struct{}{}
			f.mu.Unlock()
			defer func() {
				f.mu.Lock()
				delete(f.admitted, &cancel)
				f.mu.Unlock()
				cancel(nil)
			}()
			out := next.Handle(ctx, c)
			if !c.Dispatched {
				haltEvent(ctx, c) // a dispatched call is step's to note
			}
			return out
		})
	}
}

// haltEvent notes on a traced call's span that an operator's halt cancelled it (ctx's cause is
// a HaltCause): a "halt" event naming the server, not the operator or the reason, which the
// audit record has. A call cancelled in flight is noted by inFlight.step, one held before
// dispatch (waiting for an approval) by admitStep, so that each is noted once.
func haltEvent(ctx context.Context, c *governor.Call) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	var halt *HaltCause
	if errors.As(context.Cause(ctx), &halt) {
		span.AddEvent("halt", trace.WithAttributes(telemetry.AttrServer.String(c.Tool.Server), telemetry.AttrLockout.String(store.LockoutHalt)))
	}
}

// cancelAdmitted cancels, with cause, every physical call admitStep registered; it returns how
// many.
func (f *inFlight) cancelAdmitted(cause error) int {
	f.mu.Lock()
	cancels := make([]context.CancelCauseFunc, 0, len(f.admitted))
	for c := range f.admitted {
		cancels = append(cancels, *c)
	}
	f.mu.Unlock()
	for _, cancel := range cancels {
		cancel(cause)
	}
	return len(cancels)
}

func (f *inFlight) register(ctx context.Context, c *governor.Call) (context.Context, *flight) {
	ctx, cancel := context.WithCancelCause(ctx)
	fl := &flight{
		id: c.ID, server: c.Tool.Server, tool: c.Name, principal: c.Principal, session: c.Session,
		start: time.Now(), stop: c.Tool.Stop, cancel: cancel, done: make(chan struct{}),
	}
	f.mu.Lock()
	f.physical[fl] = struct{}{}
	f.mu.Unlock()
	return ctx, fl
}

func (f *inFlight) unregister(fl *flight) {
	f.mu.Lock()
	delete(f.physical, fl)
	f.mu.Unlock()
	fl.end = time.Now()
	fl.cancel(nil)
	close(fl.done)
}

// cancelPhysical cancels every physical call in flight but stop-tool calls, with cause, and
// returns them, oldest first. A call that was sent fails as cancelled with an unknown outcome
// (governor.Dispatch says why, from cause); one still waiting for its turn is not sent.
func (f *inFlight) cancelPhysical(cause error) []*flight {
	f.mu.Lock()
	var out []*flight
	for fl := range f.physical {
		if !fl.stop {
			out = append(out, fl)
		}
	}
	f.mu.Unlock()
	for _, fl := range out {
		fl.cancel(cause)
	}
	sortFlights(out)
	return out
}

// physicalCalls is a snapshot of the physical calls in flight, oldest first.
func (f *inFlight) physicalCalls() []*flight {
	f.mu.Lock()
	out := make([]*flight, 0, len(f.physical))
	for fl := range f.physical {
		out = append(out, fl)
	}
	f.mu.Unlock()
	sortFlights(out)
	return out
}

func sortFlights(fs []*flight) {
	slices.SortFunc(fs, func(a, b *flight) int { return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.id, b.id)) })
}
