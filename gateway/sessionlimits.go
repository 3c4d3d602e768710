package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
)

// Sessions and streams are bounded apart from connections (SPEC.md §15, "Bounded"): a session
// costs goroutines and buffers for as long as it lives whether or not its connection is open,
// and a GET stream holds a connection for as long as the client likes.
//
//   - At most gateway.max_sessions stateful sessions: a new initialize at the cap gets 503 with a
//     JSON-RPC error saying so.
//   - A session with no request in progress for gateway.session_idle_timeout is ended, as a
//     DELETE would (idleSessions): a client that went away without one leaves nothing behind.
//     Its next request, if it comes back, gets 404, which tells it to initialize again.
//   - mcp_gateway_http_sessions counts the stateful sessions open.
//   - The SDK logs one warning per session it could not send a list_changed to (every session
//     without an open GET stream, on each reload, unlock or pin change); those are summed into
//     one line (sdkLog).
//   - At most half of gateway.max_connections GET streams at once, so that held streams can
//     never take every connection: calls, /metrics and the operators' /admin API keep the rest.

// maxSessions is gateway.max_sessions, or its default for a config built in code.
func (g *Gateway) maxSessions() int {
	if n := g.cfg.Gateway.MaxSessions; n > 0 {
		return n
	}
	return config.DefaultMaxSessions
}

// sessionIdleTimeout is gateway.session_idle_timeout, or its default for a config built in code.
func (g *Gateway) sessionIdleTimeout() time.Duration {
	if d := time.Duration(g.cfg.Gateway.SessionIdleTimeout); d > 0 {
		return d
	}
	return config.DefaultSessionIdleTimeout
}

// sessionCount is the number of stateful HTTP sessions open now. Sessions without an id are
// not counted: stdio's, and the one each stateless request is served by for its duration.
func (g *Gateway) sessionCount() int {
	n := 0
	for ss := range g.server.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// sessionMetrics registers mcp_gateway_http_sessions, read from the server's sessions at
// scrape time like every other gauge of state (metrics.go).
func (g *Gateway) sessionMetrics() {
	if g.opts.Registry == nil {
		return
	}
	registered(g.opts.Registry, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: governor.Namespace, Name: "http_sessions",
		Help: "Stateful MCP sessions open over HTTP now (MCP 2025-03-26 to 2025-11-25 clients; 2026-07-28 requests need none). At most gateway.max_sessions; idle ones end after gateway.session_idle_timeout.",
	}, func() float64 { return float64(g.sessionCount()) }))
}

// endSession closes the stateful session id, as a DELETE of it would.
func (g *Gateway) endSession(id string) {
	for ss := range g.server.Sessions() {
		if ss.ID() == id {
			g.log.Debug("an idle MCP session was ended after gateway.session_idle_timeout", "session_id", id, "timeout", g.sessionIdleTimeout())
			_ = ss.Close()
			return
		}
	}
}

// idleSessions ends the stateful sessions nobody uses: a session with no request in progress
// for timeout is closed. A request in progress is a POST (a call may run for minutes) or a GET
// stream a client holds open to hear from the gateway: a client listening is there, however
// long it has nothing to ask. The SDK's own SessionTimeout counts POSTs only.
//
// What the ended sessions held is given back to the system (debug.FreeOSMemory) a second after
// the first of a burst ended, so at most once a second: the gateway runs with GOGC=400
// (cmd/mcp-gateway), under which the runtime keeps up to five times the live heap as room to
// grow, and the memory of sessions that ended while nothing else allocates would stay resident.
type idleSessions struct {
	timeout time.Duration
	end     func(id string)

	mu        sync.Mutex
	m         map[string]*idleSession
	releasing bool // a release of memory is due
}

// idleSession is one session's requests in progress and idle timer. The timer is not stopped
// and re-armed around every request (a call would pay two timer operations for it): it stays
// armed, and when it fires expire looks at the session
// and arms it again for what is left of the timeout, or not at all while requests are in
// progress (the last of them to end arms it).
type idleSession struct {
	busy      int         // requests in progress
	idleSince time.Time   // when the last request ended, while busy is 0
	timer     *time.Timer // nil before the first request ends
	armed     bool        // the timer will fire
}

func newIdleSessions(timeout time.Duration, end func(id string)) *idleSessions {
	return &idleSessions{timeout: timeout, end: end, m: map[string]*idleSession{}}
}

// track counts the requests in progress of every session next serves. A session is known from
// the moment its initialize is answered with its Mcp-Session-Id; a request naming an id that is
// not known (ended, or never issued) is not counted, and the SDK answers it 404.
func (s *idleSessions) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			if s.begin(id, false) {
				defer s.done(id)
			}
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		// An initialize: the session is known once the answer's headers carry its id, before
		// its client can use it.
		sw := &sessionStart{ResponseWriter: w, idle: s}
		next.ServeHTTP(sw, r)
		if sw.id != "" {
			s.done(sw.id)
		}
	})
}

// begin counts a request of session id in progress, making the session known if add. It
// reports whether it counted one.
func (s *idleSessions) begin(id string, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		if !add {
			return false
		}
		e = &idleSession{}
		s.m[id] = e
	}
	e.busy++
	return true
}

// done ends a request begin counted; the session's idle time starts when its last one ends.
func (s *idleSessions) done(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return
	}
	if e.busy--; e.busy > 0 {
		return
	}
	e.idleSince = time.Now()
	switch {
	case e.timer == nil:
		e.timer = time.AfterFunc(s.timeout, func() { s.expire(id) })
	case !e.armed:
		e.timer.Reset(s.timeout)
	}
	e.armed = true
}

// expire ends session id when it has had no request in progress for the timeout; otherwise it
// arms the timer again for what is left of it, or leaves it to the last request in progress
// to end. A session that ended otherwise (DELETE, the gateway stopping) is forgotten here too.
func (s *idleSessions) expire(id string) {
	s.mu.Lock()
	e, ok := s.m[id]
	if !ok {
		s.mu.Unlock()
		return
	}
	if e.busy > 0 {
		e.armed = false
		s.mu.Unlock()
		return
	}
	if left := s.timeout - time.Since(e.idleSince); left > 0 {
		e.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	delete(s.m, id)
	release := !s.releasing
	s.releasing = true
	s.mu.Unlock()
	s.end(id)
	if release {
		time.AfterFunc(releaseAfter, s.release)
	}
}

// releaseAfter is how long after the first of a burst of idle sessions ended their memory is
// given back, so that a burst costs one collection.
const releaseAfter = time.Second

func (s *idleSessions) release() {
	s.mu.Lock()
	s.releasing = false
	s.mu.Unlock()
	debug.FreeOSMemory()
}

// sessionStart is the ResponseWriter of a request that may open a session: the first write
// makes the session of the Mcp-Session-Id header known, with this request in progress.
type sessionStart struct {
	http.ResponseWriter
	idle  *idleSessions
	id    string
	wrote bool
}

func (w *sessionStart) note() {
	if w.wrote {
		return
	}
	w.wrote = true
	if id := w.Header().Get("Mcp-Session-Id"); id != "" && w.idle.begin(id, true) {
		w.id = id
	}
}

func (w *sessionStart) WriteHeader(code int) {
	w.note()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionStart) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (the SDK flushes its event stream with one) reach the
// connection's writer.
func (w *sessionStart) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sdkLog is the MCP server's log handler: the gateway's, with two kinds of the SDK's lines
// changed so that the log does not grow with the number of sessions.
//
//   - The SDK logs a WARN "calling notifications/…: …" for every session a notification could
//     not be sent to: a list_changed after a reload, unlock or pin change reaches only sessions
//     with an open GET stream, so every other session (a client that went away, or one that
//     reads no stream) gave one line each time. Those are counted per notification and logged
//     as one INFO line noticeEvery after the first: the sessions see the change at their next
//     list, and idle ones end on their own.
//   - Its INFO lines of a session's life (connecting, connected, initialized, disconnected)
//     come once per session, and once per request of MCP 2026-07-28, which is served by a
//     session of its own: they are DEBUG.
type sdkLog struct {
	slog.Handler
	notices *noticeState
}

// sessionLifecycle are the SDK's INFO lines of a session's life.
var sessionLifecycle = map[string]bool{
	"server connecting": true, "server session connected": true, "session initialized": true,
	"server session disconnected": true, "server session ended": true,
}

type noticeState struct {
	log   *slog.Logger // the gateway's, for the summary
	mu    sync.Mutex
	held  map[string]int    // notification method → how many were not delivered since the last line
	last  map[string]string // notification method → the last reason the SDK gave
	armed bool
}

// noticeEvery is how long undelivered notifications are summed before their line.
const noticeEvery = time.Second

// notifyWarning is the start of the SDK's warning for a notification it could not send.
const notifyWarning = "calling notifications/"

// sdkLogger is the logger to give the MCP server: log, through sdkLog.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(sdkLog{Handler: log.Handler(), notices: &noticeState{log: log, held: map[string]int{}, last: map[string]string{}}})
}

func (h sdkLog) Handle(ctx context.Context, r slog.Record) error {
	switch {
	case r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, notifyWarning):
		method, reason, _ := strings.Cut(strings.TrimPrefix(r.Message, "calling "), ": ")
		h.notices.add(method, reason)
		return nil
	case r.Level == slog.LevelInfo && sessionLifecycle[r.Message]:
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h sdkLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkLog{Handler: h.Handler.WithAttrs(attrs), notices: h.notices}
}

func (h sdkLog) WithGroup(name string) slog.Handler {
	return sdkLog{Handler: h.Handler.WithGroup(name), notices: h.notices}
}

func (s *noticeState) add(method, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[method]++
	s.last[method] = reason
	if !s.armed {
		s.armed = true
		time.AfterFunc(noticeEvery, s.flush)
	}
}

func (s *noticeState) flush() {
	s.mu.Lock()
	held, last := s.held, s.last
	s.held, s.last, s.armed = map[string]int{}, map[string]string{}, false
	s.mu.Unlock()
	for method, n := range held {
		s.log.Info("a notification was not delivered to MCP sessions without an open stream; they see the change at their next request, and idle ones end after gateway.session_idle_timeout",
			"notification", method, "undelivered", n, "over", noticeEvery, "reason", last[method])
	}
}

// limitSessions refuses a request that would open a session (a POST without Mcp-Session-Id on a
// stateful endpoint) while max sessions are open.
func (g *Gateway) limitSessions(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && g.sessionCount() >= max {
			g.log.Warn("a new MCP session was refused at gateway.max_sessions", "max_sessions", max, "remote", r.RemoteAddr)
			writeRefusal(w, http.StatusServiceUnavailable, "max_sessions", fmt.Sprintf(
				"the gateway holds gateway.max_sessions (%d) MCP sessions; close one you no longer use (DELETE /mcp with its Mcp-Session-Id) "+
					"or wait for idle ones to be closed after gateway.session_idle_timeout (%s), then initialize again",
				max, g.sessionIdleTimeout()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitStreams refuses a GET stream while max are open.
func (g *Gateway) limitStreams(max int, next http.Handler) http.Handler {
	var open atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		if open.Add(1) > int64(max) {
			open.Add(-1)
			g.log.Warn("a GET stream was refused: half of gateway.max_connections are held by streams", "streams", max, "remote", r.RemoteAddr)
			w.Header().Set("Retry-After", "5")
			writeRefusal(w, http.StatusServiceUnavailable, "max_streams", fmt.Sprintf(
				"the gateway already serves %d GET streams, half of gateway.max_connections, so that calls and operators keep the other half; "+
					"close a stream you no longer read, or raise gateway.max_connections", max))
			return
		}
		defer open.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// writeRefusal answers a refusal of the HTTP layer as a JSON-RPC error (code -32000, the
// reason in its data), as the door answers its own (strict.go).
func writeRefusal(w http.ResponseWriter, status int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write((&refusal{reason: reason, code: -32000, message: msg}).encode())
}

// maxConnections is gateway.max_connections, or its default for a config built in code.
func (g *Gateway) maxConnections() int {
	if n := g.cfg.Gateway.MaxConnections; n > 0 {
		return n
	}
	return config.DefaultMaxConnections
}
