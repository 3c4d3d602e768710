package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

var (
	// ErrUnavailable: the server was not ready within the call's context (or is stopped), or a
	// physical server's turn did not come within it. The call was not sent.
	ErrUnavailable = errors.New("upstream unavailable")
	// ErrQueueFull: a physical server already has a call in flight and queue_size calls
	// waiting. The call was not sent.
	ErrQueueFull = errors.New("upstream queue full")
)

// CallError is the error of a call that was dispatched to the server.
type CallError struct {
	Server, Tool string
	// Crashed: the connection was lost while the call was in flight, so whether the tool ran,
	// partly or fully, is unknown. The server is being restarted.
	Crashed bool
	Err     error
}

func (e *CallError) Error() string {
	if e.Crashed {
		return fmt.Sprintf("server %q: tool %q: connection lost while the call was in flight, outcome unknown: %v", e.Server, e.Tool, e.Err)
	}
	return fmt.Sprintf("server %q: tool %q: %v", e.Server, e.Tool, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }

// Call calls the upstream tool name with args, a JSON object (nil or empty means no
// arguments). It does not add a deadline: callers give ctx the one Deadline computes.
//
// If the server is not ready the call waits for it within ctx; a physical server takes one
// call at a time and the others wait their turn in arrival order, except a call marked
// WithStop, which is sent at once. Options.Admit is asked right before sending, except for calls
// marked WithStop or WithInspection. If progress is not nil, the
// server's progress notifications for this call are passed to it, until Call returns. Their
// ProgressToken is the gateway's own token for the call; progress must not block.
//
// Errors: ErrUnavailable or ErrQueueFull (wrapped) when the call was not sent; otherwise a
// *CallError. When ctx ends while the call is in flight, notifications/cancelled is sent to the
// server and the error satisfies errors.Is(err, ctx.Err()). A CallError with Crashed set means
// the outcome is unknown. A tool's own failure is a result with IsError set, not an error.
func (u *Upstream) Call(ctx context.Context, name string, args json.RawMessage, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	cls := classOf(ctx)
	if u.queue != nil && cls != classStop {
		// The wait for the physical server's turn, under the dispatch span when traced.
		_, wait := telemetry.Child(ctx, "queue wait")
		if wait.IsRecording() {
			wait.SetAttributes(telemetry.AttrServer.String(u.cfg.Name))
		}
		err := u.queue.acquire(ctx)
		if err != nil {
			err = u.queueError(err)
			telemetry.Fail(wait, queueFailure(err))
			wait.End()
			return nil, err
		}
		wait.End()
		defer u.queue.release()
	}
	if admit := u.opts.Admit; admit != nil && cls == classAction {
		if err := admit(u.cfg.Name); err != nil {
			return nil, fmt.Errorf("server %q refused the call before sending it: %w", u.cfg.Name, err)
		}
	}
	origin := OriginOf(ctx)
	params := &mcp.CallToolParams{Name: name, Meta: origin.meta()}
	if u.opts.Telemetry != nil {
		params.Meta = u.traceMeta(ctx, params.Meta) // in Meta: both paths send it (trace.go)
	}
	if origin != nil {
		params.InputResponses, params.RequestState = origin.InputResponses, origin.RequestState
	}
	defer u.origins.add(origin)()
	if len(args) > 0 {
		params.Arguments = args // sent as the raw JSON it holds
	}
	if progress != nil {
		token := u.progress.add(progress)
		defer u.progress.remove(token)
		params.SetProgressToken(token) // after Meta: it is kept in it
	}
	var res *mcp.CallToolResult
	s, err := u.send(ctx, "call", func(s *session) (err error) {
		// A stdio server's call takes the fast path (fastcall.go) when it is on; it sends what
		// CallTool would and answers as it would.
		if c := u.fastConn(s); c != nil {
			var sent bool
			if res, sent, err = c.callTool(ctx, s, params); sent {
				return err
			}
		}
		res, err = s.cs.CallTool(ctx, params)
		return err
	})
	switch {
	case err == nil:
		return res, nil
	case s == nil:
		return nil, err // not sent
	}
	return nil, u.callError(ctx, s, name, args, err)
}

// send sends a request (what: "call" or "request", for messages) on the ready session, waiting
// for one within ctx. A request the connection failed before sending waits for the restarted
// session like any that arrives then. When the server answered, with a result or a JSON-RPC
// error, the log and progress messages it sent before its answer have been handled (order.go).
// The session is nil when nothing was sent (the error then wraps ErrUnavailable); otherwise it
// is the one the request went to.
func (u *Upstream) send(ctx context.Context, what string, request func(*session) error) (*session, error) {
	for {
		s := u.ready.Load()
		if s == nil {
			var err error
			if s, err = u.awaitReady(ctx); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			// It ended while the request waited (for its turn, say): nothing was sent.
			return nil, fmt.Errorf("%w: server %q: %v before the %s could be sent", ErrUnavailable, u.cfg.Name, err, what)
		}
		err := request(s)
		if te := tokenError(err); te != nil {
			// No token the server takes: the request was not sent, and the session is
			// sound (oauth.go).
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, te)
		}
		if err == nil || !transportFailed(err) {
			// An answer, a result or a JSON-RPC error: what the server sent before it is
			// handled first.
			s.notes.catchUp(ctx)
		}
		if err == nil {
			return s, nil
		}
		if notSent(err) && !closingAnswered(s, err) {
			// The server never saw the request, so it waits for the restart like any request
			// that arrives then.
			u.connectionFailed(s, err)
			if ctx.Err() == nil {
				continue
			}
			return nil, fmt.Errorf("%w: server %q: the connection failed before the %s could be sent: %v", ErrUnavailable, u.cfg.Name, what, err)
		}
		return s, err
	}
}

// callError classifies the error of a call that was sent.
func (u *Upstream) callError(ctx context.Context, s *session, tool string, args json.RawMessage, err error) error {
	ce := &CallError{Server: u.cfg.Name, Tool: tool, Err: err}
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return ce // the SDK has sent notifications/cancelled
	}
	if e, ok := u.refusals.take(err); ok {
		ce.Err = e // an HTTP answer boundedTransport replaced
		return ce
	}
	var refused *OutputError
	if errors.As(err, &refused) {
		// The answer was refused as it was read. Only a refusal that could not be tied to this
		// call ended the connection.
		if refused.Fatal {
			ce.Crashed = true
			u.connectionFailed(s, err)
		}
		return ce
	}
	if !transportFailed(err) {
		return ce // the server answered, with a protocol error
	}
	// Checked only now, off the hot path: the SDK fails to encode invalid JSON before sending.
	if len(args) > 0 && !json.Valid(args) {
		ce.Err = fmt.Errorf("arguments are not valid JSON: %w", err)
		return ce
	}
	ce.Crashed = true
	u.connectionFailed(s, err)
	return ce
}

// notSent reports whether err says the request never left: the SDK refused to write it on a
// connection that was already closing, or no HTTP connection to the server could be opened.
func notSent(err error) bool {
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// closingGrace is how long a connection the SDK calls closing has to end its session before the
// gateway takes the "closing" for the server's own answer (closingAnswered).
const closingGrace = 500 * time.Millisecond

// closingAnswered reports whether an ErrConnectionClosed from the SDK was in fact the server's
// answer. The SDK reports a JSON-RPC error answer with the code of its own "client/server is
// closing" errors (-32003, -32004) as ErrConnectionClosed, just as it reports a request it
// refused to write on a connection going away. Sending the call again after a restart would
// make a server that acted and then answered so act twice, so the connection must show that it
// is closing: its session ends within closingGrace. One that stays up sent the answer, and the
// call is taken as sent, its outcome unknown. (The fast path reads such an answer as the server's
// error; upstream/fastcall.go.)
func closingAnswered(s *session, err error) bool {
	if !errors.Is(err, mcp.ErrConnectionClosed) {
		return false
	}
	t := time.NewTimer(closingGrace)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// transportFailed reports whether err says the request, or its answer, was not carried: a
// broken pipe, a closed connection, a failed HTTP exchange, no answer in time. A JSON-RPC error
// that the server, or the HTTP front of it, sent back is an answer.
func transportFailed(err error) bool {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return true // the SDK also marks these as JSON-RPC errors ("rejected by transport")
	}
	var rpcErr *jsonrpc.Error
	return !errors.As(err, &rpcErr)
}

// connectionFailed takes a session whose connection failed out of service; the supervisor
// tears it down and starts the server again.
func (u *Upstream) connectionFailed(s *session, err error) {
	u.ready.CompareAndSwap(s, nil)
	s.cancel(fmt.Errorf("connection failed: %w", err))
}

// queueFailure is the error.type of a queue wait that failed: the queue was full, or the call's
// turn did not come before its deadline or cancellation.
func queueFailure(err error) string {
	if errors.Is(err, ErrQueueFull) {
		return "queue_full"
	}
	return "queue_wait_ended"
}

func (u *Upstream) queueError(err error) error {
	if errors.Is(err, ErrQueueFull) {
		return fmt.Errorf("%w: server %q is physical and already has a call in flight and %d waiting", ErrQueueFull, u.cfg.Name, u.queue.limit)
	}
	return fmt.Errorf("%w: server %q is physical and its call in flight did not finish in time for this one (%v); it was not sent", ErrUnavailable, u.cfg.Name, err)
}

// fifo gives a physical server's calls one turn at a time, in arrival order, to at most limit
// waiting calls.
type fifo struct {
	limit   int
	mu      sync.Mutex
	busy    bool
	waiting []chan struct{} // closed to hand the turn over
}

// acquire waits for the caller's turn. It fails at once with ErrQueueFull when limit calls are
// already waiting, and with ctx's error when ctx ends first.
func (q *fifo) acquire(ctx context.Context) error {
	q.mu.Lock()
	if !q.busy {
		q.busy = true
		q.mu.Unlock()
		return nil
	}
	if len(q.waiting) >= q.limit {
		q.mu.Unlock()
		return ErrQueueFull
	}
	turn := make(chan struct{})
	q.waiting = append(q.waiting, turn)
	q.mu.Unlock()

	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if i := slices.Index(q.waiting, turn); i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
		q.mu.Unlock()
		return ctx.Err()
	}
	q.mu.Unlock()
	q.release() // the turn arrived as ctx ended: pass it on
	return ctx.Err()
}

// release hands the turn to the longest waiting call, if any.
func (q *fifo) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.busy = false
		return
	}
	close(q.waiting[0])
	q.waiting = slices.Delete(q.waiting, 0, 1)
}

// queued is the number of calls waiting for their turn.
func (q *fifo) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// progressRoutes maps the progress tokens the gateway puts on its calls to the callers' progress
// functions. Tokens are unique per server ("gw-<server>-<n>"), so they cannot collide with a
// downstream client's own.
type progressRoutes struct {
	prefix string
	next   atomic.Uint64
	mu     sync.Mutex
	routes map[string]*progressRoute
}

type progressRoute struct {
	mu sync.Mutex // held while delivering, so that none is delivered after remove
	fn func(*mcp.ProgressNotificationParams)
}

func (r *progressRoutes) add(fn func(*mcp.ProgressNotificationParams)) string {
	token := r.prefix + strconv.FormatUint(r.next.Add(1), 10)
	r.mu.Lock()
	if r.routes == nil {
		r.routes = make(map[string]*progressRoute)
	}
	r.routes[token] = &progressRoute{fn: fn}
	r.mu.Unlock()
	return token
}

// remove stops the route; when it returns, its function is not running and will not run again.
func (r *progressRoutes) remove(token string) {
	r.mu.Lock()
	route := r.routes[token]
	delete(r.routes, token)
	r.mu.Unlock()
	route.mu.Lock()
	route.fn = nil
	route.mu.Unlock()
}

func (r *progressRoutes) deliver(p *mcp.ProgressNotificationParams) {
	token, ok := p.ProgressToken.(string)
	if !ok {
		return // not one of ours
	}
	r.mu.Lock()
	route := r.routes[token]
	r.mu.Unlock()
	if route == nil {
		return // its call has returned
	}
	route.mu.Lock()
	defer route.mu.Unlock()
	if route.fn != nil {
		route.fn(p)
	}
}
