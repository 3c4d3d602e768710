package telemetry

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context keys, in params._meta (MCP SEP-414) as in HTTP headers.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
	KeyBaggage     = "baggage"
)

var (
	traceContext = propagation.TraceContext{}
	baggageProp  = propagation.Baggage{}
)

// metaCarrier reads and writes trace context in a message's _meta object.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	if key == KeyTraceparent && !traceparentLength(s) {
		return ""
	}
	return s
}

// headerCarrier reads trace context from HTTP headers as metaCarrier does from _meta.
type headerCarrier struct{ propagation.HeaderCarrier }

func (h headerCarrier) Get(key string) string {
	s := h.HeaderCarrier.Get(key)
	if key == KeyTraceparent && !traceparentLength(s) {
		return ""
	}
	return s
}

// traceparentLength checks what the SDK's parser lets through: a version 00 traceparent is
// exactly 55 characters (W3C Trace Context), and the SDK also takes one with a "-" after it.
// The parser checks the rest.
func traceparentLength(s string) bool {
	return len(s) == 55 || len(s) > 55 && s[:2] != "00"
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// FromMeta returns ctx with the remote span context and baggage that meta (a request's
// params._meta) carries, when telemetry is on. A traceparent that is absent, not a string or
// malformed leaves ctx as it is: trace context is a hint, never a reason to refuse a call.
func (p *Provider) FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if p == nil || len(meta) == 0 {
		return ctx
	}
	if _, ok := meta[KeyTraceparent].(string); !ok {
		if _, ok := meta[KeyBaggage].(string); !ok {
			return ctx
		}
	}
	ctx = traceContext.Extract(ctx, metaCarrier(meta))
	bag, _ := meta[KeyBaggage].(string)
	return withBaggage(ctx, bag)
}

// withBaggage returns ctx with the members of a baggage header that parse (W3C Baggage; an
// invalid member is skipped, too long a header is ignored). It is the SDK's propagator without
// its report of a malformed header to the global error handler, an unstructured line on stderr
// that a client's text would cause.
func withBaggage(ctx context.Context, header string) context.Context {
	if header == "" {
		return ctx
	}
	if bag, _ := baggage.Parse(header); bag.Len() > 0 {
		return baggage.ContextWithBaggage(ctx, bag)
	}
	return ctx
}

// FromHeader returns ctx with the remote span context and baggage of an HTTP request's
// traceparent, tracestate and baggage headers, when telemetry is on and ctx has no span context
// (or no baggage) yet: call it after FromMeta, since params._meta, the MCP-level context, wins
// over the transport's. A malformed header is ignored.
func (p *Provider) FromHeader(ctx context.Context, h http.Header) context.Context {
	if p == nil || h.Get(KeyTraceparent) == "" && h.Get(KeyBaggage) == "" {
		return ctx
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = traceContext.Extract(ctx, headerCarrier{propagation.HeaderCarrier(h)})
	}
	if baggage.FromContext(ctx).Len() == 0 {
		// Several baggage headers are one list (RFC 9110 field lines).
		ctx = withBaggage(ctx, strings.Join(h.Values(KeyBaggage), ","))
	}
	return ctx
}

// Fields are the trace context values to send upstream for ctx: traceparent and tracestate of
// its span, and its baggage when telemetry.forward_baggage is on. All are "" when telemetry is
// off or ctx holds no valid span context.
func (p *Provider) Fields(ctx context.Context) (traceparent, tracestate, bag string) {
	if p == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return "", "", ""
	}
	var c fieldCarrier
	traceContext.Inject(ctx, &c)
	if p.forwardBaggage {
		baggageProp.Inject(ctx, &c)
	}
	return c.traceparent, c.tracestate, c.baggage
}

// InjectMeta sets ctx's trace context (Fields) into meta, the _meta of a request about to go
// upstream, making meta when it is nil and there is something to set. Keys the caller's meta
// already had under these names are replaced: the upstream's parent is the gateway's span, not
// whatever the client put there. Telemetry off, meta is returned as it is.
func (p *Provider) InjectMeta(ctx context.Context, meta map[string]any) map[string]any {
	tp, ts, bag := p.Fields(ctx)
	if tp == "" {
		return meta
	}
	if meta == nil {
		meta = make(map[string]any, 3)
	}
	meta[KeyTraceparent] = tp
	if ts != "" {
		meta[KeyTracestate] = ts
	} else {
		delete(meta, KeyTracestate)
	}
	if bag != "" {
		meta[KeyBaggage] = bag
	} else {
		delete(meta, KeyBaggage)
	}
	return meta
}

// InjectHeader sets ctx's trace context (Fields) as the traceparent, tracestate and (when
// forwarded) baggage headers of an outgoing HTTP request: an upstream's, a model provider's.
// Like InjectMeta, it replaces those headers when h already has them, and removes a tracestate
// or baggage the gateway does not send. Telemetry off, or ctx untraced, h is left as it is.
func (p *Provider) InjectHeader(ctx context.Context, h http.Header) {
	tp, ts, bag := p.Fields(ctx)
	if tp == "" {
		return
	}
	h.Set(KeyTraceparent, tp)
	setOrDel(h, KeyTracestate, ts)
	setOrDel(h, KeyBaggage, bag)
}

func setOrDel(h http.Header, key, v string) {
	if v != "" {
		h.Set(key, v)
	} else {
		h.Del(key)
	}
}

// fieldCarrier collects the injected values without a map.
type fieldCarrier struct{ traceparent, tracestate, baggage string }

func (c *fieldCarrier) Get(string) string { return "" }
func (c *fieldCarrier) Keys() []string    { return nil }
func (c *fieldCarrier) Set(key, value string) {
	switch key {
	case KeyTraceparent:
		c.traceparent = value
	case KeyTracestate:
		c.tracestate = value
	case KeyBaggage:
		c.baggage = value
	}
}
