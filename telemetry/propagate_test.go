package telemetry

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestFromMetaTakesTheClientsContext(t *testing.T) {
	p, _ := newTestProvider(t, config.Telemetry{})
	ctx := p.FromMeta(context.Background(), map[string]any{
		KeyTraceparent: clientTraceparent, KeyTracestate: clientTracestate, KeyBaggage: clientBaggage, "progressToken": 3,
	})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("span context %+v: want valid, remote and sampled", sc)
	}
	if sc.TraceID().String() != clientTraceID || sc.SpanID().String() != clientSpanID {
		t.Errorf("ids %s %s, want %s %s", sc.TraceID(), sc.SpanID(), clientTraceID, clientSpanID)
	}
	if got := sc.TraceState().String(); got != clientTracestate {
		t.Errorf("tracestate %q, want %q", got, clientTracestate)
	}
	bag := baggage.FromContext(ctx)
	if bag.Member("userId").Value() != "alice" || bag.Member("serverNode").Value() != "DF 28" {
		t.Errorf("baggage %q, want the client's", bag.String())
	}

	// A trace context without tracestate or baggage.
	ctx = p.FromMeta(context.Background(), map[string]any{KeyTraceparent: "00-" + clientTraceID + "-" + clientSpanID + "-00"})
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || sc.IsSampled() || sc.TraceState().Len() != 0 || baggage.FromContext(ctx).Len() != 0 {
		t.Errorf("traceparent alone, flags 00: %+v, baggage %q", sc, baggage.FromContext(ctx).String())
	}
	// A version after 00 may carry more fields (W3C: parse what version 00 defines).
	ctx = p.FromMeta(context.Background(), map[string]any{KeyTraceparent: "cc-" + clientTraceID + "-" + clientSpanID + "-01-what-the-future-holds"})
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID().String() != clientTraceID {
		t.Errorf("a future version's traceparent was not read: %+v", sc)
	}
	// A tracestate that does not parse does not affect the traceparent.
	ctx = p.FromMeta(context.Background(), map[string]any{KeyTraceparent: clientTraceparent, KeyTracestate: "=,UPPER=x"})
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || sc.TraceState().Len() != 0 {
		t.Errorf("bad tracestate: %+v", sc)
	}
}

// TestFromMetaIgnoresWhatIsNotATraceContext: an absent, non-string or malformed traceparent
// (W3C Trace Context: version, lengths, lowercase hex, ids not all zero) leaves ctx as it was.
func TestFromMetaIgnoresWhatIsNotATraceContext(t *testing.T) {
	p, _ := newTestProvider(t, config.Telemetry{})
	tid, sid := clientTraceID, clientSpanID
	for name, tp := range map[string]any{
		"absent":               nil,
		"number":               42,
		"list":                 []any{clientTraceparent},
		"object":               map[string]any{"version": "00"},
		"bytes":                []byte(clientTraceparent),
		"empty":                "",
		"version ff":           "ff-" + tid + "-" + sid + "-01",
		"version not hex":      "0g-" + tid + "-" + sid + "-01",
		"version one digit":    "0-" + tid + "-" + sid + "-01",
		"version uppercase":    "0A-" + tid + "-" + sid + "-01",
		"all-zero trace id":    "00-" + strings.Repeat("0", 32) + "-" + sid + "-01",
		"all-zero span id":     "00-" + tid + "-" + strings.Repeat("0", 16) + "-01",
		"trace id too short":   "00-" + tid[1:] + "-" + sid + "-01",
		"trace id too long":    "00-" + tid + "0-" + sid + "-01",
		"span id too short":    "00-" + tid + "-" + sid[1:] + "-01",
		"flags one digit":      "00-" + tid + "-" + sid + "-1",
		"no flags":             "00-" + tid + "-" + sid,
		"version 00, more":     clientTraceparent + "-00",
		"version 00, longer":   clientTraceparent + "0",
		"uppercase trace id":   "00-" + strings.ToUpper(tid) + "-" + sid + "-01",
		"uppercase span id":    "00-" + tid + "-" + strings.ToUpper(sid) + "-01",
		"uppercase flags":      "00-" + tid + "-" + sid + "-0A",
		"leading space":        " " + clientTraceparent,
		"underscores":          strings.ReplaceAll(clientTraceparent, "-", "_"),
		"future version, tail": "01-" + tid + "-" + sid + "-01x",
		"not utf-8":            "00-" + tid[:30] + "\xff\xfe-" + sid + "-01",
	} {
		t.Run(name, func(t *testing.T) {
			meta := map[string]any{"progressToken": 1}
			if tp != nil {
				meta[KeyTraceparent] = tp
				meta[KeyTracestate] = clientTracestate
			}
			ctx := context.Background()
			if got := p.FromMeta(ctx, meta); got != ctx {
				t.Errorf("ctx changed: span context %+v", trace.SpanContextFromContext(got))
			}
			// The baggage is the client's all the same: it does not depend on the traceparent.
			meta[KeyBaggage] = clientBaggage
			got := p.FromMeta(ctx, meta)
			if trace.SpanContextFromContext(got).IsValid() || baggage.FromContext(got).Member("userId").Value() != "alice" {
				t.Errorf("with baggage: span context %+v, baggage %q", trace.SpanContextFromContext(got), baggage.FromContext(got).String())
			}
		})
	}
	ctx := context.Background()
	if got := p.FromMeta(ctx, nil); got != ctx {
		t.Error("nil meta changed ctx")
	}
}

// TestMalformedBaggageIsNotReported: a baggage member that does not parse is skipped, the others
// kept, and nothing goes to OpenTelemetry's global error handler (which writes to stderr).
func TestMalformedBaggageIsNotReported(t *testing.T) {
	p, _ := newTestProvider(t, config.Telemetry{})
	prev := otel.GetErrorHandler()
	defer otel.SetErrorHandler(prev)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { t.Errorf("reported to the global error handler: %v", err) }))
	ctx := p.FromMeta(context.Background(), map[string]any{KeyBaggage: "userId=alice,%zz,=x"})
	if bag := baggage.FromContext(ctx); bag.Len() != 1 || bag.Member("userId").Value() != "alice" {
		t.Errorf("baggage %q, want userId only", bag.String())
	}
	h := http.Header{}
	h.Set(KeyBaggage, strings.Repeat("k=v,", 3000))
	if bag := baggage.FromContext(p.FromHeader(context.Background(), h)); bag.Len() != 0 {
		t.Errorf("a header over the W3C size limit gave %d members", bag.Len())
	}
}

// TestNilProviderDoesNothing: telemetry off, every method is safe and changes nothing, even
// with a traced ctx and a client's trace context at hand.
func TestNilProviderDoesNothing(t *testing.T) {
	var p *Provider
	on, _ := newTestProvider(t, config.Telemetry{ForwardBaggage: true})
	traced, span := on.Tracer().Start(on.FromMeta(context.Background(), map[string]any{KeyTraceparent: clientTraceparent, KeyBaggage: clientBaggage}), "call")
	defer span.End()

	ctx := context.Background()
	if got := p.FromMeta(ctx, map[string]any{KeyTraceparent: clientTraceparent}); got != ctx {
		t.Error("FromMeta changed ctx")
	}
	h := http.Header{"Traceparent": {clientTraceparent}}
	if got := p.FromHeader(ctx, h); got != ctx {
		t.Error("FromHeader changed ctx")
	}
	if tp, ts, bag := p.Fields(traced); tp != "" || ts != "" || bag != "" {
		t.Errorf("Fields = %q %q %q", tp, ts, bag)
	}
	meta := map[string]any{KeyTraceparent: clientTraceparent, KeyBaggage: clientBaggage}
	before := maps.Clone(meta)
	if got := p.InjectMeta(traced, meta); !maps.Equal(got, before) {
		t.Errorf("InjectMeta = %v", got)
	}
	if got := p.InjectMeta(traced, nil); got != nil {
		t.Errorf("InjectMeta(nil) = %v", got)
	}
	out := http.Header{}
	p.InjectHeader(traced, out)
	if len(out) != 0 {
		t.Errorf("InjectHeader set %v", out)
	}
	if _, s := p.Tracer().Start(ctx, "x"); s.IsRecording() || s.SpanContext().IsValid() {
		t.Error("the nil provider's tracer made a span")
	}
	if p.TracerProvider() != nil || p.On() || p.Describe() != "" || p.AuditExporter() != nil || p.Shutdown(ctx) != nil {
		t.Error("a method of the nil provider did something")
	}
}

// TestFromHeaderYieldsToMeta: the MCP-level context in _meta, read first, wins over the HTTP
// headers; the headers are used when _meta has none.
func TestFromHeaderYieldsToMeta(t *testing.T) {
	p, _ := newTestProvider(t, config.Telemetry{})
	const headerTrace = "0af7651916cd43dd8448eb211c80319c"
	h := http.Header{}
	h.Set(KeyTraceparent, "00-"+headerTrace+"-b7ad6b7169203331-01")
	h.Set(KeyTracestate, "h=1")
	h.Set(KeyBaggage, "from=header")

	fromMeta := p.FromMeta(context.Background(), map[string]any{KeyTraceparent: clientTraceparent, KeyBaggage: clientBaggage})
	ctx := p.FromHeader(fromMeta, h)
	if got := trace.SpanContextFromContext(ctx).TraceID().String(); got != clientTraceID {
		t.Errorf("with _meta and header: trace %s, want _meta's %s", got, clientTraceID)
	}
	if bag := baggage.FromContext(ctx); bag.Member("from").Value() != "" || bag.Member("userId").Value() != "alice" {
		t.Errorf("with _meta and header: baggage %q, want _meta's", bag.String())
	}

	ctx = p.FromHeader(context.Background(), h)
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != headerTrace || !sc.IsRemote() || sc.TraceState().String() != "h=1" {
		t.Errorf("header only: %+v, want the header's context", sc)
	}
	if baggage.FromContext(ctx).Member("from").Value() != "header" {
		t.Errorf("header only: baggage %q", baggage.FromContext(ctx).String())
	}

	// _meta's traceparent with the header's baggage: each comes from where it is.
	ctx = p.FromHeader(p.FromMeta(context.Background(), map[string]any{KeyTraceparent: clientTraceparent}), h)
	if trace.SpanContextFromContext(ctx).TraceID().String() != clientTraceID || baggage.FromContext(ctx).Member("from").Value() != "header" {
		t.Errorf("_meta traceparent, header baggage: %+v %q", trace.SpanContextFromContext(ctx), baggage.FromContext(ctx).String())
	}

	// Several baggage headers are one list; a member that does not parse is skipped.
	two := http.Header{}
	two.Add(KeyBaggage, "a=1,%zz")
	two.Add(KeyBaggage, "b=2")
	if bag := baggage.FromContext(p.FromHeader(context.Background(), two)); bag.Member("a").Value() != "1" || bag.Member("b").Value() != "2" || bag.Len() != 2 {
		t.Errorf("two baggage headers: %q", bag.String())
	}

	bad := http.Header{}
	bad.Set(KeyTraceparent, "00-"+strings.ToUpper(headerTrace)+"-b7ad6b7169203331-01")
	if got := p.FromHeader(context.Background(), bad); trace.SpanContextFromContext(got).IsValid() {
		t.Error("a malformed header became the parent")
	}
	bg := context.Background()
	if got := p.FromHeader(bg, http.Header{}); got != bg {
		t.Error("no header changed ctx")
	}
}

// TestInjectMetaSendsTheGatewaysSpan: the upstream's parent is the gateway's span (its id, the
// client's trace and tracestate), never the client's own traceparent; baggage only with
// forward_baggage.
func TestInjectMetaSendsTheGatewaysSpan(t *testing.T) {
	for _, forward := range []bool{false, true} {
		p, _ := newTestProvider(t, config.Telemetry{ForwardBaggage: forward})
		client := map[string]any{KeyTraceparent: clientTraceparent, KeyTracestate: clientTracestate, KeyBaggage: clientBaggage}
		ctx, span := p.Tracer().Start(p.FromMeta(context.Background(), client), "tools/call")
		want := "00-" + clientTraceID + "-" + span.SpanContext().SpanID().String() + "-01"

		tp, ts, bag := p.Fields(ctx)
		if tp != want || ts != clientTracestate {
			t.Errorf("forward %v: Fields = %q %q; want %q %q", forward, tp, ts, want, clientTracestate)
		}
		if !sameBaggage(bag, map[bool]string{false: "", true: clientBaggage}[forward]) {
			t.Errorf("forward %v: baggage %q", forward, bag)
		}

		// The request going upstream carries the client's _meta: its trace keys are replaced.
		meta := p.InjectMeta(ctx, map[string]any{KeyTraceparent: clientTraceparent, KeyTracestate: "other=1", KeyBaggage: "secret=1", "progressToken": 7})
		if meta[KeyTraceparent] != want || meta[KeyTracestate] != clientTracestate || meta["progressToken"] != 7 {
			t.Errorf("forward %v: InjectMeta = %v", forward, meta)
		}
		if b, ok := meta[KeyBaggage].(string); forward != ok || (forward && !sameBaggage(b, clientBaggage)) {
			t.Errorf("forward %v: baggage in the upstream's _meta: %v", forward, meta[KeyBaggage])
		}
		if got := p.InjectMeta(ctx, nil); got[KeyTraceparent] != want {
			t.Errorf("forward %v: InjectMeta(nil) = %v", forward, got)
		}
		span.End()
	}

	// A span without tracestate or baggage: the client's are not passed on.
	p, _ := newTestProvider(t, config.Telemetry{ForwardBaggage: true})
	ctx, span := p.Tracer().Start(context.Background(), "tools/call")
	defer span.End()
	meta := p.InjectMeta(ctx, map[string]any{KeyTraceparent: clientTraceparent, KeyTracestate: clientTracestate, KeyBaggage: clientBaggage})
	if _, ok := meta[KeyTracestate]; ok || meta[KeyBaggage] != nil || !strings.Contains(meta[KeyTraceparent].(string), span.SpanContext().TraceID().String()) {
		t.Errorf("new trace: InjectMeta = %v", meta)
	}
	// Outside any span nothing is injected, and a nil meta stays nil.
	if got := p.InjectMeta(context.Background(), nil); got != nil {
		t.Errorf("untraced: InjectMeta(nil) = %v", got)
	}
	if tp, _, _ := p.Fields(context.Background()); tp != "" {
		t.Errorf("untraced: Fields = %q", tp)
	}
}

func TestInjectHeader(t *testing.T) {
	for _, forward := range []bool{false, true} {
		p, _ := newTestProvider(t, config.Telemetry{ForwardBaggage: forward})
		ctx, span := p.Tracer().Start(p.FromMeta(context.Background(), map[string]any{
			KeyTraceparent: clientTraceparent, KeyTracestate: clientTracestate, KeyBaggage: clientBaggage,
		}), "model request")
		h := http.Header{}
		h.Set(KeyBaggage, "stale=1")
		h.Set("Authorization", "Bearer x")
		p.InjectHeader(ctx, h)
		tp, ts, bag := p.Fields(ctx)
		if h.Get(KeyTraceparent) != tp || !strings.Contains(tp, span.SpanContext().SpanID().String()) || h.Get(KeyTracestate) != ts || h.Get("Authorization") != "Bearer x" {
			t.Errorf("forward %v: headers %v", forward, h)
		}
		if got := h.Values(KeyBaggage); (forward && (len(got) != 1 || !sameBaggage(got[0], bag))) || (!forward && len(got) != 0) {
			t.Errorf("forward %v: baggage headers %q", forward, got)
		}
		span.End()
		untraced := http.Header{}
		p.InjectHeader(context.Background(), untraced)
		if len(untraced) != 0 {
			t.Errorf("untraced: headers %v", untraced)
		}
	}
}

// sameBaggage reports whether two baggage headers hold the same members, in any order.
func sameBaggage(a, b string) bool {
	ba, errA := baggage.Parse(a)
	bb, errB := baggage.Parse(b)
	if errA != nil || errB != nil || ba.Len() != bb.Len() {
		return false
	}
	for _, m := range ba.Members() {
		if bb.Member(m.Key()).Value() != m.Value() {
			return false
		}
	}
	return true
}

// w3cParse is the W3C Trace Context traceparent parser, written from the specification (Level
// 2, "traceparent Header Field Values"): version, trace-id, parent-id and trace-flags in
// lowercase hex; version ff is invalid; version 00 is exactly 55 characters; a later version
// may be longer, with a "-" after the flags; neither id may be all zeros.
func w3cParse(s string) (traceID, spanID string, flags byte, ok bool) {
	hex := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
		return true
	}
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return "", "", 0, false
	}
	version, tid, sid, fl := s[0:2], s[3:35], s[36:52], s[53:55]
	if !hex(version) || !hex(tid) || !hex(sid) || !hex(fl) || version == "ff" {
		return "", "", 0, false
	}
	if (version == "00" && len(s) != 55) || (len(s) > 55 && s[55] != '-') {
		return "", "", 0, false
	}
	if tid == strings.Repeat("0", 32) || sid == strings.Repeat("0", 16) {
		return "", "", 0, false
	}
	f := byte(0)
	for i := 0; i < 2; i++ {
		c := fl[i]
		if c >= 'a' {
			c = c - 'a' + 10
		} else {
			c -= '0'
		}
		f = f<<4 | c
	}
	return tid, sid, f, true
}

// FuzzFromMeta: whatever a client puts in _meta, FromMeta does not panic, and the span context
// it yields is one the W3C parser accepts, with the same ids and sampled flag. (The SDK may be
// stricter: it refuses a version 00 traceparent with reserved flag bits set.)
func FuzzFromMeta(f *testing.F) {
	for _, s := range [][3]string{
		{clientTraceparent, clientTracestate, clientBaggage},
		{"00-" + strings.ToUpper(clientTraceID) + "-" + clientSpanID + "-01", "", ""},
		{"00-" + strings.Repeat("0", 32) + "-" + clientSpanID + "-01", "a=b", "k=v"},
		{"cc-" + clientTraceID + "-" + clientSpanID + "-01-future", "", ""},
		{"ff-" + clientTraceID + "-" + clientSpanID + "-01", "", ""},
		{"00-" + clientTraceID + "-" + clientSpanID + "-ff", "", "%zz"},
		{clientTraceparent + "-", "=,=", "a=b;c;=;"},
		{"", "", strings.Repeat("k=v,", 100)},
	} {
		f.Add(s[0], s[1], s[2])
	}
	p, err := New(context.Background(), config.Telemetry{Endpoint: deadEndpoint(f)}, Options{Getenv: env(nil)})
	if err != nil {
		f.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	f.Fuzz(func(t *testing.T, tp, ts, bag string) {
		bg := context.Background()
		ctx := p.FromMeta(bg, map[string]any{KeyTraceparent: tp, KeyTracestate: ts, KeyBaggage: bag})
		tid, sid, flags, ok := w3cParse(tp)
		sc := trace.SpanContextFromContext(ctx)
		switch {
		case sc.IsValid():
			if !ok || sc.TraceID().String() != tid || sc.SpanID().String() != sid || !sc.IsRemote() || sc.IsSampled() != (flags&1 == 1) {
				t.Fatalf("traceparent %q became %+v; the W3C parser says ok=%v %s %s %02x", tp, sc, ok, tid, sid, flags)
			}
		case ok && !(tp[:2] == "00" && flags > 3):
			t.Fatalf("traceparent %q, valid for the W3C parser, was refused", tp)
		case bag == "" && ctx != bg:
			t.Fatalf("traceparent %q, not valid, without baggage, changed ctx", tp)
		}
		// What goes upstream is always well formed.
		if sc.IsValid() {
			cctx, span := p.Tracer().Start(ctx, "x")
			out, _, _ := p.Fields(cctx)
			span.End()
			if _, _, _, ok := w3cParse(out); !ok {
				t.Fatalf("the gateway would send traceparent %q", out)
			}
		}
	})
}
