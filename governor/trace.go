package governor

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// maxSpanRequestID is the longest JSON-RPC id put on a call's span. The id is the client's
// choice, of any length; a longer one is left off rather than cut (a cut id names no request)
// or kept in memory with the span until it is exported.
const maxSpanRequestID = 128

// Trace is the outermost step when telemetry is on: the call's server span, a child of the
// client's trace context that the gateway put in ctx (from params._meta or the traceparent
// header), or the root of a new trace. Every other step's span is its child (telemetry.Child), and
// the span context it puts in ctx is what the audit record, the log line, the latency exemplar and
// the request sent upstream carry. Without telemetry the step is not in the chain at all.
//
// The span is named "tools/call" until the tool is resolved and "tools/call <public tool>" after:
// a name the catalog does not know is the caller's text and never becomes a span name.
func Trace(p *telemetry.Provider) Step { return traceWith(p.Tracer()) }

// traceWith is Trace over any tracer (a test's, recording in memory).
func traceWith(tracer trace.Tracer) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			ctx, span := tracer.Start(ctx, "tools/call",
				trace.WithSpanKind(trace.SpanKindServer),
				trace.WithTimestamp(c.Start),
				trace.WithAttributes(
					telemetry.AttrMethod.String("tools/call"),
					telemetry.AttrOperation.String("execute_tool"),
					telemetry.AttrCallID.String(c.ID),
					telemetry.AttrPrincipal.String(principalLabel(c.Principal)),
				))
			defer span.End()
			if span.IsRecording() {
				if c.Session != "" {
					span.SetAttributes(telemetry.AttrSessionID.String(c.Session))
				}
				if n := len(c.RequestID); n > 0 && n <= maxSpanRequestID {
					span.SetAttributes(telemetry.AttrRequestID.String(c.RequestID))
				}
				if c.Transport != "" {
					span.SetAttributes(telemetry.AttrTransport.String(c.Transport))
				}
			}
			out := next.Handle(ctx, c)
			if !span.IsRecording() {
				return out
			}
			if t := c.Tool; t != nil {
				span.SetName("tools/call " + t.Public)
				span.SetAttributes(
					telemetry.AttrToolName.String(t.Public),
					telemetry.AttrServer.String(t.Server),
					telemetry.AttrUpstreamTool.String(t.Upstream),
					telemetry.AttrPhysical.Bool(t.Physical()),
				)
			}
			span.SetAttributes(telemetry.AttrOutcome.String(out.Label()))
			switch {
			case out.Kind != "":
				telemetry.Fail(span, string(out.Kind))
			case !out.Success:
				// The tool ran and reported a failure: an error of the call, not of the gateway.
				telemetry.Fail(span, OutcomeToolFailure)
			}
			return out
		})
	}
}
