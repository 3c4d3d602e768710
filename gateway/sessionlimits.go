package gateway

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Sessions and streams are bounded apart from connections (SPEC.md §15, "Bounded"): a session
// costs goroutines and buffers for as long as it lives whether or not its connection is open,
// and a GET stream holds a connection for as long as the client likes.
//
//   - At most gateway.max_sessions stateful sessions: a new initialize at the cap gets 503 with a
//     JSON-RPC error saying so; the SDK closes a session idle for gateway.session_idle_timeout.
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

// sessionCount is the number of downstream sessions open now.
func (g *Gateway) sessionCount() int {
	n := 0
	for range g.server.Sessions() {
		n++
	}
	return n
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
