package upstream

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// Trace context goes upstream with every tools/call when telemetry is on (Options.Telemetry),
// so that a server's spans nest under the gateway's (MCP SEP-414). It is the context of the
// gateway's own span, the one the call's context holds, whose parent is the client's when the
// client sent one. What a client sent never reaches a server as it is: Origin.meta carries the
// capabilities and the log level, nothing else, and a context that holds only the client's
// remote span context (no span of the gateway's under it) sends none. The one exception is the
// client's tracestate, which W3C Trace Context has every hop pass on with its own span: it goes
// up as the OpenTelemetry SDK parsed it (at most 32 list members; one that does not parse is
// dropped whole), and the gateway's spans carry it too. Baggage goes too only
// with telemetry.forward_baggage: it can carry what a client should not tell a robot.
//
// It is set in the call's _meta (Call) before the path is chosen, so that the fast path
// encodes it as the SDK's path does: both marshal the same params, map keys in order, without
// HTML escaping (TestFastPathMatchesTheSDK runs with telemetry on). An HTTP server gets it in
// _meta and, since the SDK's streamable client makes a call's POST with the call's context,
// also as the traceparent, tracestate and baggage headers (traceTransport). With telemetry off
// none of this runs: not one allocation more per call (BenchmarkCallStdio).

// traceMeta is meta, the _meta of a tools/call about to be sent, with the trace context of
// ctx's span when that span is the gateway's own.
func (u *Upstream) traceMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if !ownSpan(ctx) {
		return meta
	}
	return u.opts.Telemetry.InjectMeta(ctx, meta)
}

// ownSpan reports whether ctx holds a span the gateway started, not only the remote parent a
// client's trace context was read into.
func ownSpan(ctx context.Context) bool {
	sc := trace.SpanContextFromContext(ctx)
	return sc.IsValid() && !sc.IsRemote()
}

// traceTransport sets the W3C trace context of a request's context as its headers, when it
// holds the gateway's own span. It is in an HTTP server's chain only when telemetry is on.
type traceTransport struct {
	base http.RoundTripper
	tel  *telemetry.Provider
}

func (t *traceTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A call's POST (and its cancellation) holds the call's span; the session's own requests
	// (initialize, lists, pings, the standalone stream) hold none and go as they are.
	if !ownSpan(req.Context()) {
		return t.base.RoundTrip(req)
	}
	req = req.Clone(req.Context()) // a RoundTripper must not modify the caller's request
	t.tel.InjectHeader(req.Context(), req.Header)
	return t.base.RoundTrip(req)
}
