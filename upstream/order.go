package upstream

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK completes a call as soon as its response is read, but passes the notifications read
// before it (log messages, progress) to their handlers a moment later, on another goroutine. A
// server's "started… done" log would then reach the client after the result. For a stdio
// server, whose connection the gateway can watch, a forwarded request therefore returns only
// once the notifications read before its response have been handled (bounded by orderWait).
// An HTTP server's connection carries the SDK's own session state and cannot be wrapped; there
// the origins' linger keeps late log messages attributed (forward.go).

// orderWait bounds the wait for notifications read before a response.
const orderWait = 250 * time.Millisecond

// notes counts the ordered notifications read and handled.
type notes struct {
	read, handled atomic.Uint64
}

// handledOne records that a notification counted by the connection was handled.
func (n *notes) handledOne() { n.handled.Add(1) }

// catchUp waits until every counted notification read so far has been handled. A notification
// the SDK dropped without calling its handler would stall every later wait: after orderWait the
// count is taken as caught up.
func (n *notes) catchUp(ctx context.Context) {
	target := n.read.Load()
	if n.handled.Load() >= target {
		return
	}
	deadline := time.Now().Add(orderWait)
	for n.handled.Load() < target {
		if time.Now().After(deadline) || ctx.Err() != nil {
			for {
				h := n.handled.Load()
				if h >= target || n.handled.CompareAndSwap(h, target) {
					return
				}
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// count counts msg if it is a log or progress notification; the stdio connection calls it
// before it hands msg on to the SDK.
func (n *notes) count(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() {
		switch req.Method {
		case "notifications/message", "notifications/progress":
			n.read.Add(1)
		}
	}
}
