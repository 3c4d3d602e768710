package gateway

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Bounded connections (SPEC.md §15 "Bounded", issue 12). A client costs the gateway a
// connection, a goroutine and its buffers for as long as it holds them, so each way of holding
// them has a bound:
//
//   - headers must arrive within headerTimeout, and a connection idle between requests closes
//     after idleTimeout (http.Server);
//   - a request's whole body must arrive within gateway.body_read_timeout (bodyDeadline), and
//     a refusal that does not read the body (401, 403, 404, 405) is answered at once and its
//     connection closed instead of waiting for the rest;
//   - at most gateway.max_connections connections are open (connLimiter): at the cap a new one
//     takes the place of the connection idle or silent longest, and is refused with 503 when
//     every open connection is busy with a request.
//
// There is no server-wide read or write timeout: a request whose body has arrived runs as long
// as its call (physical calls can take minutes), and an MCP stream stays open with its session.

// Bounds of the HTTP server that have no setting.
const (
	headerTimeout  = 10 * time.Second
	idleTimeout    = 120 * time.Second
	maxHeaderBytes = 64 << 10
)

// bodyDeadline bounds the reading of every request body to timeout from the end of its
// headers: it sets the connection's read deadline when a request with a body arrives, and
// lifts it once the body has been read to its end, so the call that follows is not cut. When
// the handler returns without reading the whole body (a refusal), the deadline is made to pass
// at once: the server then answers without waiting for the rest and closes the connection. A
// request without a body (a GET stream) is left alone.
func bodyDeadline(timeout time.Duration, m *httpMetrics, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		start := time.Now()
		if err := rc.SetReadDeadline(start.Add(timeout)); err != nil {
			// Only a ResponseWriter that is not a connection's (a recorder) cannot: nothing
			// to bound.
			next.ServeHTTP(w, r)
			return
		}
		body := &deadlineBody{ReadCloser: r.Body, rc: rc}
		r2 := *r
		r2.Body = body
		next.ServeHTTP(w, &r2)
		if body.timedOut {
			m.bodyTimeouts.Inc()
			log.Debug("request body did not arrive within gateway.body_read_timeout; connection closed",
				"remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path,
				"received_bytes", body.n, "content_length", r.ContentLength, "timeout", timeout)
		}
		if !body.done {
			_ = rc.SetReadDeadline(start)
		}
	})
}

// deadlineBody is a request body read under bodyDeadline's deadline. It is read by the
// handler's goroutine only, before the handler returns.
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	n        int64
	done     bool // read to its end; the deadline is lifted
	timedOut bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF && !b.done:
		// net/http lifts it too when it starts watching for the client going away, but
		// says nothing of it; a call that outlives the deadline must not depend on that.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut = true
	}
	return n, err
}

// readBody reads the whole body of a request, up to limit bytes, before next sees it, and
// answers itself when that fails: 408 when the body did not arrive within timeout
// (bodyDeadline's deadline), 413 when it is larger than limit, 400 when the client broke off.
// Next gets the body from memory, so nothing it does waits for the client. It runs after
// authentication: a request without a valid token is refused before its body is read. A body
// read whole is given to screen (strict.go), which answers and returns false for one next must
// not see.
func readBody(limit int64, timeout time.Duration, screen func(http.ResponseWriter, *http.Request, []byte) bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			if screen(w, r, nil) {
				next.ServeHTTP(w, r)
			}
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %s (gateway.body_read_timeout), "+
				"%d of its bytes did; send the whole body with the request, or ask the operator to raise gateway.body_read_timeout for a slow link",
				timeout, len(body)))
			return
		case errors.As(err, &tooLarge):
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes (gateway.max_body_bytes); "+
				"send a smaller request, or ask the operator to raise gateway.max_body_bytes", limit))
			return
		case err != nil:
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusBadRequest, "the request body could not be read to its end: the client broke off while sending it")
			return
		}
		if !screen(w, r, body) {
			return
		}
		r2 := *r
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		next.ServeHTTP(w, &r2)
	})
}

// fdReserve is how many of the process's open files connectionCap keeps for everything but
// client connections: the upstreams' pipes and connections, the state file, the listener.
const fdReserve = 64

// connectionCap is the cap on client connections: want, lowered to fit fileLimit (the
// process's open-file limit; 0 when unknown) with fdReserve to spare, so that a full house of
// clients never leaves the gateway unable to restart an upstream or write its state file.
func connectionCap(want int, fileLimit uint64) int {
	switch {
	case fileLimit == 0:
		return want
	case fileLimit <= 2*fdReserve:
		return min(want, int(fileLimit/2))
	case fileLimit-fdReserve < uint64(want):
		return int(fileLimit - fdReserve)
	}
	return want
}

// refusalDrain bounds how long a refused connection is kept to deliver its 503, and
// maxRefusing how many are kept at once; beyond that a refused connection is closed without
// an answer, so that a flood of them costs no more than this.
const (
	refusalDrain = time.Second
	maxRefusing  = 16
)

// connLimiter is a listener that keeps at most max client connections open. At the cap, a
// new connection takes the place of the open one that has waited longest without a request in
// progress (idle between requests, or not yet done sending its first headers), which is
// closed; the connections serving a request, a call or a stream are never touched. When every
// open connection is busy, the new one is answered 503 and closed at once rather than kept
// waiting. Its connState must be the http.Server's ConnState hook.
type connLimiter struct {
	net.Listener
	max     int
	metrics *httpMetrics
	log     *slog.Logger
	refusal []byte      // the 503 answer, written raw
	tls     *tls.Config // set when the listener serves TLS: the refusal goes over it

	mu       sync.Mutex
	open     map[*limitedConn]struct{}
	lastWarn time.Time
	refusing chan struct{} // a slot per refused connection being answered
}

// limitedConn is one admitted connection and what the server last said of it.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// Guarded by l.mu.
	state    http.ConnState
	since    time.Time
	released bool
}

func newConnLimiter(ln net.Listener, most int, m *httpMetrics, log *slog.Logger) *connLimiter {
	msg, _ := json.Marshal(map[string]string{"error": fmt.Sprintf("the gateway has %d client connections open (gateway.max_connections), "+
		"each busy with a request; retry in a moment, or ask the operator to raise gateway.max_connections", most)})
	msg = append(msg, '\n')
	refusal := fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
	m.limit.Set(float64(most))
	return &connLimiter{Listener: ln, max: most, metrics: m, log: log, refusal: refusal,
		open: map[*limitedConn]struct{}{}, refusing: make(chan struct{}, maxRefusing)}
}

// Accept returns the next connection admitted under the cap.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit takes c in, closing the connection it replaces at the cap; nil when c was refused.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	now := time.Now()
	lc := &limitedConn{Conn: c, l: l, state: http.StateNew, since: now}
	l.mu.Lock()
	var victim *limitedConn
	var victimState http.ConnState
	warn := false
	full := len(l.open) >= l.max
	if full {
		for o := range l.open {
			if (o.state == http.StateNew || o.state == http.StateIdle) && (victim == nil || o.since.Before(victim.since)) {
				victim = o
			}
		}
		if victim != nil {
			victim.released = true
			delete(l.open, victim)
			victimState = victim.state
		}
		warn = now.Sub(l.lastWarn) >= time.Minute
		if warn {
			l.lastWarn = now
		}
	}
	admitted := !full || victim != nil
	if admitted {
		l.open[lc] = struct{}{}
	}
	l.mu.Unlock()
	if warn {
		l.log.Warn("at gateway.max_connections: closing the connections idle longest to admit new ones, refusing new ones while all are busy",
			"max_connections", l.max)
	}
	if victim != nil {
		_ = victim.Conn.Close()
		l.metrics.open.Dec()
		l.metrics.evicted.Inc()
		l.log.Debug("closed a connection without a request in progress to admit a new one (gateway.max_connections)",
			"remote", victim.RemoteAddr().String(), "state", victimState.String())
	}
	if !admitted {
		l.metrics.refused.Inc()
		l.log.Debug("refused a connection: every connection is busy (gateway.max_connections)", "remote", c.RemoteAddr().String())
		l.refuse(c)
		return nil
	}
	l.metrics.open.Inc()
	return lc
}

// refuse answers c 503 and closes it. The answer goes out once the request's headers are in,
// since an HTTP client takes bytes that come before it has sent its request for a broken
// connection; a client that sends no headers within refusalDrain is closed without one. The
// rest of what it sends is read up to the same deadline, since closing with unread data would
// reset the connection and could lose the answer before the client reads it.
func (l *connLimiter) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	if l.tls != nil {
		c = tls.Server(c, l.tls)
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalDrain))
		r := bufio.NewReader(io.LimitReader(c, maxHeaderBytes))
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if _, err := c.Write(l.refusal); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, r)
	}()
}

// connState records what the server says of a connection; it is the http.Server's ConnState.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	now := time.Now()
	l.mu.Lock()
	lc.state, lc.since = s, now
	l.mu.Unlock()
}

// Close closes the connection and gives its place back.
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	released := c.released
	if !released {
		c.released = true
		delete(c.l.open, c)
	}
	c.l.mu.Unlock()
	if !released {
		c.l.metrics.open.Dec()
	}
	return err
}
