package governor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// Dispatch is the end of the chain (steps 6 and 7): it applies the call's deadline (§4), sends
// the call to the tool's server, and maps every way that can fail to a failure envelope. The
// upstream's own result is returned unchecked, for CheckResult.
//
// The call's context carries its class to the upstream: a stop tool's call is sent at once,
// beside a physical server's call in flight and ahead of the calls waiting for their turn; an
// inspection tool's call waits for its turn. Neither is refused by the upstream's lockout check
// (Lockouts.Admit), since CheckLockout let them through.
//
// With telemetry on, the call to the server is a client span, "tools/call <upstream tool>",
// and its context is the one the upstream gets: the trace context sent to the server is that
// span's, so the server's spans nest under it.
func Dispatch() Handler {
	return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
		t := c.Tool
		deadline := upstream.Deadline(*t.ServerConfig, c.Args)
		callCtx, cancel := context.WithTimeout(classify(ctx, t), deadline)
		defer cancel()
		callCtx, span := startDispatch(callCtx, t)
		c.Dispatched = true
		res, err := t.Dispatcher.Call(callCtx, t.Upstream, c.Args, c.progressStage().sender())
		var out *Outcome
		switch {
		case err != nil:
			out = dispatchFailure(ctx, callCtx, c, deadline, err)
		case res == nil:
			out = Refuse(KindProtocolViolation, fmt.Sprintf("tool %s returned no result", c.Name))
		default:
			out = &Outcome{Result: res}
		}
		endDispatch(span, out)
		return out
	})
}

// classify marks ctx with the class of t's calls, for the upstream.
func classify(ctx context.Context, t *Tool) context.Context {
	switch {
	case t.Stop:
		return upstream.WithStop(ctx)
	case t.AllowWhileLocked:
		return upstream.WithInspection(ctx)
	}
	return ctx
}

// dispatchFailure explains why a dispatched call has no result.
func dispatchFailure(ctx, callCtx context.Context, c *Call, deadline time.Duration, err error) *Outcome {
	t := c.Tool
	var callErr *upstream.CallError
	var refused *upstream.OutputError
	var locked *LockoutError
	notSent := errors.Is(err, upstream.ErrUnavailable) || errors.Is(err, upstream.ErrQueueFull) || errors.As(err, &locked)
	switch {
	case locked != nil && locked.Lockout.Halted():
		// The call waited for its turn while an operator halted the robot. The halt cancels
		// every physical call, one after another: the call it cancelled first may have let
		// this one have its turn before its own cancellation came. Either way it was not sent,
		// and it ends as a cancellation by the halt, whichever reached it first.
		halt := &HaltCause{Operator: locked.Lockout.By, Reason: locked.Lockout.Reason}
		return cancelledBeforeSent(c, "because "+halt.Error())
	case locked != nil:
		// The call waited for its turn behind a call that then locked the server out.
		lockoutEvent(ctx, locked.Lockout)
		return Refuse(KindExecutionStatusUnknown, locked.Reason())
	case ctx.Err() != nil && notSent:
		return cancelledBeforeSent(c, cancelledBy(ctx))
	case ctx.Err() != nil:
		return unknown(Refuse(KindCancelled, fmt.Sprintf(
			"the call to %s was cancelled %s before it finished; the server %s was told to stop it. What the robot did is not known from here.", c.Name, cancelledBy(ctx), t.Server)))
	case errors.Is(err, upstream.ErrQueueFull):
		return Refuse(KindUpstreamBusy, fmt.Sprintf(
			"server %s runs one physical action at a time and too many calls are already waiting; wait for the current action to finish, then call %s again.", t.Server, c.Name))
	case errors.Is(err, upstream.ErrUnavailable):
		return Refuse(KindUpstreamUnavailable, fmt.Sprintf(
			"the call to %s was not sent: %v. The gateway keeps restarting servers that stopped; try again later or tell the operator.", c.Name, err))
	case errors.As(err, &refused):
		// The server answered and the answer was discarded as it was read (too large, not
		// UTF-8, not JSON-RPC): the call was sent, and what it did is lost with its result.
		return unknown(Refuse(KindProtocolViolation, refused.Explain(c.Name)))
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		return unknown(Refuse(KindExecutionStatusUnknown, timeoutReason(c, deadline)))
	case errors.As(err, &callErr) && callErr.Crashed:
		// The server stopped, or its connection broke, or it answered with something no
		// result can be read from (the SDK takes that for a broken connection): the call was
		// sent and no answer came back. The error says which.
		why := store.TruncateString(callErr.Err.Error(), maxUpstreamErrorBytes)
		if t.Physical() {
			return unknown(Refuse(KindExecutionStatusUnknown, fmt.Sprintf(
				"server %s stopped during the call to %s, or answered it with nothing a result can be read from (%s), so what the robot did is unknown.", t.Server, c.Name, why)))
		}
		return unknown(Refuse(KindUpstreamUnavailable, fmt.Sprintf(
			"server %s stopped during the call to %s, or answered it with nothing a result can be read from (%s), and is being restarted; the call may or may not have taken effect. Try again in a moment.", t.Server, c.Name, why)))
	default:
		out := Refuse(KindUpstreamError, fmt.Sprintf("server %s answered the call to %s with an error: %s", t.Server, c.Name, store.TruncateString(err.Error(), maxUpstreamErrorBytes)))
		var rpcErr *jsonrpc.Error
		if t.Passthrough() && errors.As(err, &rpcErr) && rpcErr.Code != 0 {
			out.RPCError = rpcErr
		}
		return out
	}
}

// maxUpstreamErrorBytes bounds the text of a server's error that a reason quotes: a server can
// answer with megabytes, and the reason is logged and returned.
const maxUpstreamErrorBytes = 2048

// HaltCause is the cause (context.Cause) of a physical call a halt cancelled, so that the
// call's failure and its audit record say who stopped the robot and why.
type HaltCause struct {
	Operator, Reason string
}

func (e *HaltCause) Error() string {
	return fmt.Sprintf("the operator %s halted the robot (%q)", e.Operator, e.Reason)
}

// cancelledBeforeSent is the answer to a call cancelled while it waited to be sent; by says by
// whom (cancelledBy).
func cancelledBeforeSent(c *Call, by string) *Outcome {
	return Refuse(KindCancelled, fmt.Sprintf(
		"the call to %s was cancelled %s before it was sent to server %s; nothing was done.", c.Name, by, c.Tool.Server))
}

// cancelledBy says who cancelled a call: the caller, or the cause the gateway gave (shutting
// down).
func cancelledBy(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
		return "because " + cause.Error()
	}
	return "by the caller"
}

// unknown marks an outcome whose call was sent and whose effect is unknown.
func unknown(o *Outcome) *Outcome {
	o.Unknown = true
	return o
}

func timeoutReason(c *Call, deadline time.Duration) string {
	if c.Tool.Physical() {
		return fmt.Sprintf(
			"the call to %s did not finish within its deadline of %s and was cancelled; server %s moves hardware, so what the robot did is unknown.",
			c.Name, deadline, c.Tool.Server)
	}
	return fmt.Sprintf("the call to %s did not finish within its deadline of %s and was cancelled; its outcome is unknown.", c.Name, deadline)
}
