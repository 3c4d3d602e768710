package gateway

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mcp-gateway/mcp-gateway/governor"
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

// inFlight counts the calls running on each server, for `state.in_flight` in policies.
type inFlight struct {
	m map[string]*atomic.Int64 // fixed at start: one per configured server
}

func newInFlight(servers []string) *inFlight {
	f := &inFlight{m: make(map[string]*atomic.Int64, len(servers))}
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

// step counts a call as in flight while later steps and the dispatch run.
func (f *inFlight) step() governor.Step {
	return func(next governor.Handler) governor.Handler {
		return governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
			n, ok := f.m[c.Tool.Server]
			if !ok {
				return next.Handle(ctx, c)
			}
			n.Add(1)
			defer n.Add(-1)
			return next.Handle(ctx, c)
		})
	}
}
