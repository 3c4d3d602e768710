package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that goes away cancels its calls: a call held for approval is withdrawn and never
// runs (governor.Approvals), any other is told to stop, as on notifications/cancelled.
// The SDK ends a call's context on notifications/cancelled and, for MCP 2026-07-28, when the
// POST that carries it ends (PropagateRequestCancellation). For the older revisions it does
// neither when a session is deleted (the SDK's DELETE waits for the session's calls to return,
// so a call held for approval would hold the DELETE and then run for nobody) nor when the
// stream of a POST closes (the gateway keeps no event store, so nothing can resume it).
// callerWatch ends those calls' contexts itself: a DELETE cancels every call of its session
// before the SDK closes it, and a POST that ends before its calls answered cancels them. The
// cause says which (context.Cause), for the call's audit record and a withdrawn approval.
type callerWatch struct {
	seq      atomic.Uint64 // POST tokens
	mu       sync.Mutex
	posts    map[string]context.Context // token → a POST's context
	sessions map[string]callList        // session id → its calls in flight
}

// The causes callerWatch cancels calls with.
var (
	errSessionDeleted = errors.New("the caller ended its session")
	errStreamClosed   = errors.New("the caller closed the connection of its request")
)

// postTokenHeader carries a POST's token from watch to enter, through the SDK, which hands a
// handler the request's header (RequestExtra.Header). watch sets it on every POST, so a client
// cannot choose its own.
const postTokenHeader = "Mcp-Gateway-Post"

// watch wraps the SDK's handlers.
func (w *callerWatch) watch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		r.Header.Del(postTokenHeader)
		switch r.Method {
		case http.MethodDelete:
			if id := r.Header.Get("Mcp-Session-Id"); id != "" {
				w.endSession(id)
			}
		case http.MethodPost:
			// Only this process reads it, and watch overwrites any a client sent: a counter
			// is enough, no random token per request.
			token := strconv.FormatUint(w.seq.Add(1), 36)
			r.Header.Set(postTokenHeader, token)
			w.mu.Lock()
			if w.posts == nil {
				w.posts = map[string]context.Context{}
			}
			w.posts[token] = r.Context()
			w.mu.Unlock()
			defer func() {
				w.mu.Lock()
				delete(w.posts, token)
				w.mu.Unlock()
			}()
		}
		next.ServeHTTP(rw, r)
	})
}

// enter ties a call to its caller's POST and session, when watch saw them (a call over HTTP):
// cancel, which ends the call's context, is called with the cause when either ends first. It
// returns the function to call when the call returns, after which cancel is not called.
func (w *callerWatch) enter(req *mcp.CallToolRequest, cancel context.CancelCauseFunc) (left func()) {
	if req.Extra == nil || req.Extra.Header == nil {
		return func() {}
	}
	id := ""
	if req.Session != nil {
		id = req.Session.ID()
	}
	w.mu.Lock()
	post := w.posts[req.Extra.Header.Get(postTokenHeader)]
	w.mu.Unlock()
	return w.join(cancel, post, id)
}

// join ties a call whose context cancel ends to the context of the POST that carries it (nil:
// none known) and to session id ("": none), as enter does.
func (w *callerWatch) join(cancel context.CancelCauseFunc, post context.Context, id string) (left func()) {
	unhook := func() bool { return false }
	if post != nil {
		unhook = context.AfterFunc(post, func() { cancel(errStreamClosed) })
	}
	var call *listedCall
	if id != "" {
		w.mu.Lock()
		if w.sessions == nil {
			w.sessions = map[string]callList{}
		}
		calls := w.sessions[id]
		call = calls.push(cancel)
		w.sessions[id] = calls
		w.mu.Unlock()
	}
	return func() {
		unhook()
		if id != "" {
			w.mu.Lock()
			calls := w.sessions[id]
			calls.remove(call)
			if calls.head == nil {
				delete(w.sessions, id)
			} else {
				w.sessions[id] = calls
			}
			w.mu.Unlock()
		}
	}
}

// endSession cancels the calls in flight of session id.
func (w *callerWatch) endSession(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	calls := w.sessions[id]
	calls.cancelAll(errSessionDeleted)
}
