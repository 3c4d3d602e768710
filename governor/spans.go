package governor

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// The step spans of the chain (telemetry on). A step that does work starts its span with
// telemetry.Child under the call's span (Trace) and ends it before the next step runs, so the
// steps are siblings under the call in the order they ran; only the dispatch span is handed on,
// in the context the upstream call receives, so the upstream's spans nest under it. Without a
// recording span in ctx none of this allocates: Child returns ctx's own span, and attributes
// are set only behind IsRecording.
//
// Span names are short and fixed; attributes are names, ids and kinds from the config and the
// catalog, never an argument, a result, a guard's match or a reason (which may quote them).

// Span names of the chain's steps.
const (
	spanValidate     = "validate"
	spanGuardCall    = "guards tool_call"
	spanGuardResult  = "guards tool_result"
	spanPolicy       = "policy"
	spanApprovalWait = "approval wait"
	spanAudit        = "audit"
)

// Attribute keys of the governor's own, beside telemetry's.
const (
	attrGuardAction = attribute.Key("mcp_gateway.guard.action")
	attrApprovalID  = attribute.Key("mcp_gateway.approval.id")
)

// Event names on the call's span.
const (
	// eventLockout: this call's unknown outcome put its server's lockout in force.
	eventLockout = "lockout"
	// eventLockedOut: a lockout of the server refused the call.
	eventLockedOut = "locked out"
	// eventHalt: an operator's halt refused the call (its lockout is a halt's).
	eventHalt = "halt"
)

// endGuardSpan ends the span of one guard stage's scan with what the stage made of it: the
// stage, the guards that found something or failed (their ids from the config, never what they
// matched) and the enforced action; a block is the stage's refusal.
func endGuardSpan(span trace.Span, stage guards.Stage, r guards.Result) {
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrStage.String(string(stage)))
		if ids := actedGuards(r); len(ids) > 0 {
			span.SetAttributes(telemetry.AttrGuard.StringSlice(ids))
		}
		if r.Action != guards.ActionNone {
			span.SetAttributes(attrGuardAction.String(string(r.Action)))
		}
		if r.Action == guards.ActionBlock {
			telemetry.Fail(span, string(KindGuardBlocked))
		}
	}
	span.End()
}

// actedGuards are the ids of the guards with a finding or an error in r, each once, in order.
func actedGuards(r guards.Result) []string {
	var ids []string
	for _, f := range r.Findings {
		if !contains(ids, f.Guard) {
			ids = append(ids, f.Guard)
		}
	}
	for _, e := range r.Errors {
		if !contains(ids, e.Guard) {
			ids = append(ids, e.Guard)
		}
	}
	return ids
}

// startDispatch starts the dispatch span: a client span named for the upstream's tool, whose
// context is the one the upstream call gets. Untraced, ctx is returned as it is.
func startDispatch(ctx context.Context, t *Tool) (context.Context, trace.Span) {
	if !telemetry.Traced(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return telemetry.Child(ctx, "tools/call "+t.Upstream,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			telemetry.AttrMethod.String("tools/call"),
			telemetry.AttrToolName.String(t.Upstream),
			telemetry.AttrServer.String(t.Server),
		))
}

// endDispatch ends the dispatch span with the upstream's answer: a failure of the gateway's
// kind, or a result the server marked as an error (error.type tool_error, as the MCP semantic
// conventions have it).
func endDispatch(span trace.Span, out *Outcome) {
	if span.IsRecording() {
		switch {
		case out.Kind != "":
			telemetry.Fail(span, string(out.Kind))
		case out.Result != nil && out.Result.IsError:
			span.SetAttributes(telemetry.AttrErrorType.String("tool_error"))
			span.SetStatus(codes.Error, "tool_error")
		}
	}
	span.End()
}

// lockoutEvent notes on the call's span that a lockout refused the call: a "halt" event when it
// is an operator's halt, "locked out" otherwise, naming the locked server and the lockout's
// kind (never who set it or why: the audit record has that).
func lockoutEvent(ctx context.Context, lo store.Lockout) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	name := eventLockedOut
	if lo.Kind == store.LockoutHalt {
		name = eventHalt
	}
	span.AddEvent(name, trace.WithAttributes(telemetry.AttrServer.String(lo.Server), telemetry.AttrLockout.String(lockoutKind(lo))))
}

// lockoutKind is a lockout's kind as recorded, unknown_outcome for the lockouts written before
// kinds were.
func lockoutKind(lo store.Lockout) string {
	if lo.Kind == "" {
		return store.LockoutUnknown
	}
	return lo.Kind
}

// withTrace sets the trace and span ids of ctx's span on a record about the call ctx runs.
func withTrace(ctx context.Context, r store.Record) store.Record {
	r.TraceID, r.SpanID = telemetry.IDs(ctx)
	return r
}
