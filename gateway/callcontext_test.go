package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/baggage"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// Two clients' trace contexts, sampled, and their parts.
const (
	traceA     = "0af7651916cd43dd8448eb211c80319c"
	spanA      = "b7ad6b7169203331"
	parentA    = "00-" + traceA + "-" + spanA + "-01"
	traceB     = "4bf92f3577b34da6a3ce929d0e0e4736"
	spanB      = "00f067aa0ba902b7"
	parentB    = "00-" + traceB + "-" + spanB + "-01"
	malformed  = "00-not-a-trace-context-01"
	stateA     = "vendor=a"
	baggageA   = "tenant=lab-3"
	noTraceYet = "" // the parent of a span that roots a new trace
)

// tracedProvider is a real tracer provider as telemetry.New makes it, exporting to an address
// where nothing listens (its spans are lost, as with an unreachable collector), with the OTel
// SDK's in-memory recorder beside the exporter: the spans as the backend would get them.
func tracedProvider(tb testing.TB) (*telemetry.Provider, *tracetest.SpanRecorder) {
	tb.Helper()
	p, err := telemetry.New(context.Background(), config.Telemetry{Endpoint: "http://127.0.0.1:1"},
		telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil || p == nil {
		tb.Fatalf("telemetry.New: %v, %v", p, err)
	}
	rec := tracetest.NewSpanRecorder()
	p.TracerProvider().(*sdktrace.TracerProvider).RegisterSpanProcessor(rec)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_ = p.Shutdown(ctx) // nothing listens: the flush fails, as it may in production
	})
	return p, rec
}

// remote is the remote span context ctx carries, as "traceid-spanid" ("" for none).
func remote(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	if !sc.IsRemote() {
		return "not remote: " + sc.TraceID().String()
	}
	return sc.TraceID().String() + "-" + sc.SpanID().String()
}

func TestCallContext(t *testing.T) {
	tel, _ := tracedProvider(t)
	g := &Gateway{opts: Options{Telemetry: tel}}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	for _, c := range []struct {
		name         string
		meta         map[string]any
		header       http.Header
		want         string // the remote parent, "" for none
		state, bag   string
		unchangedCtx bool
	}{
		{name: "none", unchangedCtx: true},
		{name: "_meta", meta: map[string]any{"traceparent": parentA, "tracestate": stateA, "progressToken": 1}, want: traceA + "-" + spanA, state: stateA},
		{name: "header", header: hdr("Traceparent", parentB, "Tracestate", "vendor=b"), want: traceB + "-" + spanB, state: "vendor=b"},
		{name: "both: _meta wins", meta: map[string]any{"traceparent": parentA}, header: hdr("Traceparent", parentB, "Tracestate", "vendor=b"), want: traceA + "-" + spanA},
		{name: "malformed _meta: the header", meta: map[string]any{"traceparent": malformed}, header: hdr("Traceparent", parentB), want: traceB + "-" + spanB},
		{name: "malformed _meta alone", meta: map[string]any{"traceparent": malformed}, want: noTraceYet},
		{name: "not a string", meta: map[string]any{"traceparent": 42.0}, want: noTraceYet, unchangedCtx: true},
		{name: "malformed header", header: hdr("Traceparent", "garbage"), want: noTraceYet},
		{name: "version ff", meta: map[string]any{"traceparent": "ff-" + traceA + "-" + spanA + "-01"}, want: noTraceYet},
		{name: "zero trace id", meta: map[string]any{"traceparent": "00-00000000000000000000000000000000-" + spanA + "-01"}, want: noTraceYet},
		{name: "baggage of _meta, parent of the header", meta: map[string]any{"baggage": baggageA}, header: hdr("Traceparent", parentB, "Baggage", "tenant=other"),
			want: traceB + "-" + spanB, bag: baggageA},
		{name: "other _meta keys only", meta: map[string]any{"progressToken": "t"}, unchangedCtx: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			got := g.callContext(ctx, c.meta, c.header)
			if r := remote(got); r != c.want {
				t.Errorf("remote parent %q, want %q", r, c.want)
			}
			if s := trace.SpanContextFromContext(got).TraceState().String(); s != c.state {
				t.Errorf("tracestate %q, want %q", s, c.state)
			}
			if b := baggage.FromContext(got).String(); b != c.bag {
				t.Errorf("baggage %q, want %q", b, c.bag)
			}
			if c.unchangedCtx && got != ctx {
				t.Error("the context was replaced though there was nothing to extract")
			}
		})
	}

	// Telemetry off: whatever the call carries, the context is the one given.
	off := &Gateway{}
	ctx := context.Background()
	if got := off.callContext(ctx, map[string]any{"traceparent": parentA}, hdr("Traceparent", parentB)); got != ctx {
		t.Errorf("with telemetry off the context was replaced: remote %q", remote(got))
	}
	meta, h := map[string]any{"traceparent": parentA}, hdr("Traceparent", parentB)
	if allocs := testing.AllocsPerRun(100, func() { _ = off.callContext(ctx, meta, h) }); allocs != 0 {
		t.Errorf("with telemetry off, callContext allocates %.0f times", allocs)
	}
}

// What handleCall records of a call's request: its transport, its id (over HTTP, from the door)
// and the client's trace context.
func TestTraceSDKCall(t *testing.T) {
	tel, _ := tracedProvider(t)
	on, off := &Gateway{opts: Options{Telemetry: tel}}, &Gateway{}
	httpReq := func() *mcp.CallToolRequest {
		return &mcp.CallToolRequest{
			Params: &mcp.CallToolParamsRaw{Name: "echo__say", Meta: mcp.Meta{"traceparent": parentA}},
			Extra:  &mcp.RequestExtra{Header: http.Header{requestIDHeader: {"17"}, "Traceparent": {parentB}}},
		}
	}
	stdioReq := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "echo__say", Meta: mcp.Meta{"traceparent": parentB}}}

	c := &governor.Call{}
	ctx := on.traceSDKCall(context.Background(), httpReq(), c)
	if c.Transport != "http" || c.RequestID != "17" || remote(ctx) != traceA+"-"+spanA {
		t.Errorf("over HTTP: transport %q, request id %q, parent %q", c.Transport, c.RequestID, remote(ctx))
	}
	c = &governor.Call{}
	ctx = on.traceSDKCall(context.Background(), stdioReq, c)
	if c.Transport != "stdio" || c.RequestID != "" || remote(ctx) != traceB+"-"+spanB {
		t.Errorf("over stdio: transport %q, request id %q, parent %q", c.Transport, c.RequestID, remote(ctx))
	}
	c = &governor.Call{}
	ctx = off.traceSDKCall(context.Background(), httpReq(), c)
	if c.Transport != "http" || c.RequestID != "" || remote(ctx) != "" {
		t.Errorf("telemetry off: transport %q, request id %q, parent %q", c.Transport, c.RequestID, remote(ctx))
	}
}

func TestNoteRequestIDs(t *testing.T) {
	if (&Gateway{}).noteRequestIDs(nil) != nil {
		t.Fatal("with telemetry off the door's hook is wrapped")
	}
	tel, _ := tracedProvider(t)
	g := &Gateway{opts: Options{Telemetry: tel}}
	for _, c := range []struct {
		name   string
		m      doorMessage
		served bool // by the fast path
		want   string
	}{
		{"a number", doorMessage{method: "tools/call", id: mustID(float64(42))}, false, "42"},
		{"a string", doorMessage{method: "tools/call", id: mustID("req 7 ✓")}, false, "req 7 ✓"},
		{"served by the fast path", doorMessage{method: "tools/call", id: mustID(float64(42))}, true, ""},
		{"a batch", doorMessage{method: "", batch: true}, false, ""},
		{"another method", doorMessage{method: "tools/list", id: mustID(float64(1))}, false, ""},
		{"a notification", doorMessage{method: "tools/call"}, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			serve := g.noteRequestIDs(func(http.ResponseWriter, *http.Request, doorMessage) bool { return c.served })
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set(requestIDHeader, "chosen by the client")
			if got := serve(httptest.NewRecorder(), r, c.m); got != c.served {
				t.Errorf("served %v, want %v", got, c.served)
			}
			if got := r.Header.Values(requestIDHeader); c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Errorf("header %q, want %q", got, c.want)
			}
		})
	}
	if g.noteRequestIDs(nil)(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil), doorMessage{method: "tools/call", id: mustID(float64(1))}) {
		t.Error("without a fast path the wrapped hook serves a request")
	}
}

// mustID is the JSON-RPC id of v, a float64 or a string as a JSON decoder gives them.
func mustID(v any) jsonrpc.ID {
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(err)
	}
	return id
}

func TestIDText(t *testing.T) {
	for id, want := range map[jsonrpc.ID]string{
		mustID(float64(0)): "0", mustID(float64(-12)): "-12", mustID(float64(1 << 53)): "9007199254740992",
		mustID("a b"): "a b", mustID(""): "", {}: "",
	} {
		if got := idText(id); got != want {
			t.Errorf("idText(%v) = %q, want %q", id.Raw(), got, want)
		}
	}
}

// The fast path reads trace context in _meta as plain, as the SDK reads it.
func TestReadCallParamsTraceContext(t *testing.T) {
	for _, c := range []struct {
		params string
		want   map[string]any // nil: none
	}{
		{`{"name":"echo__say","_meta":{"progressToken":"t","traceparent":"` + parentA + `","tracestate":"` + stateA + `"}}`,
			map[string]any{"traceparent": parentA, "tracestate": stateA}},
		{`{"name":"echo__say","_meta":{"baggage":"` + baggageA + `"}}`, map[string]any{"baggage": baggageA}},
		{`{"name":"echo__say","_meta":{"trace\u0070arent":"00-\u0030af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`,
			map[string]any{"traceparent": parentA}},
		{`{"name":"echo__say","_meta":{"traceparent":42,"tracestate":null,"baggage":["k=v"]}}`, nil},
		{`{"name":"echo__say","_meta":{"Traceparent":"` + parentA + `"}}`, nil}, // keys match exactly, as the SDK's
		{`{"name":"echo__say","arguments":{"traceparent":"` + parentA + `"}}`, nil},
		{`{"name":"echo__say"}`, nil},
	} {
		p, ok := readCallParams([]byte(c.params))
		if !ok {
			t.Errorf("%s: not plain", c.params)
			continue
		}
		if got := p.traceMeta(); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: trace context %v, want %v", c.params, got, c.want)
		}
	}
}

// callSpans are the server spans of calls the recorder got since it held n spans.
func callSpans(rec *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended()[n:] {
		if s.SpanKind() == trace.SpanKindServer && strings.HasPrefix(s.Name(), "tools/call") {
			out = append(out, s)
		}
	}
	return out
}

// attr is the value of span attribute key, "" when absent.
func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// parentOf is the span's parent as remote() writes it.
func parentOf(s sdktrace.ReadOnlySpan) string {
	p := s.Parent()
	if !p.IsValid() {
		return ""
	}
	if !p.IsRemote() {
		return "not remote: " + p.SpanID().String()
	}
	return p.TraceID().String() + "-" + p.SpanID().String()
}

// A client's trace context, in params._meta or (over HTTP) in the traceparent header, is the
// parent of the gateway's call span, on the fast path and on the SDK's, and the answer is the
// same bytes as without telemetry: the fast path still serves calls whose _meta holds trace
// context.
func TestClientTraceContextParentsTheCallSpan(t *testing.T) {
	tel, rec := tracedProvider(t)
	fast, _, _ := fastGatewayWith(t, true, tel)
	sdk, _, _ := fastGatewayWith(t, false, tel)
	plain, _, _ := fastGatewayWith(t, true, nil) // telemetry off
	hc := &http.Client{}
	session := func(g *Gateway) *rawSession {
		srv := httptest.NewServer(g.Handler(nil))
		t.Cleanup(srv.Close)
		return openRaw(t, hc, srv.URL+"/mcp")
	}
	fastS, sdkS, plainS := session(fast), session(sdk), session(plain)

	for i, c := range []struct {
		name   string
		id     string // as JSON
		meta   string // the _meta member, "" for none
		header http.Header
		want   string // the call span's parent, "" for the root of a new trace
		state  string
	}{
		{name: "_meta", id: "1", meta: `"_meta":{"traceparent":"` + parentA + `","tracestate":"` + stateA + `"}`, want: traceA + "-" + spanA, state: stateA},
		{name: "_meta with a progress token", id: `"call-2"`, meta: `"_meta":{"progressToken":"p-2","traceparent":"` + parentA + `","baggage":"` + baggageA + `"}`, want: traceA + "-" + spanA},
		{name: "escaped _meta", id: "3", meta: `"_meta":{"trace\u0070arent":"00-\u0030af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`, want: traceA + "-" + spanA},
		{name: "header", id: "4", header: http.Header{"Traceparent": {parentB}, "Tracestate": {"vendor=b"}}, want: traceB + "-" + spanB, state: "vendor=b"},
		{name: "both: _meta wins", id: "5", meta: `"_meta":{"traceparent":"` + parentA + `"}`, header: http.Header{"Traceparent": {parentB}}, want: traceA + "-" + spanA},
		{name: "malformed _meta", id: "6", meta: `"_meta":{"traceparent":"` + malformed + `"}`, want: noTraceYet},
		{name: "malformed header", id: "7", header: http.Header{"Traceparent": {malformed}}, want: noTraceYet},
		{name: "not a string", id: "8", meta: `"_meta":{"traceparent":{"a":1},"other":1}`, want: noTraceYet},
		{name: "none", id: "9", want: noTraceYet},
		{name: "a request id chosen by the client", id: "10", header: http.Header{requestIDHeader: {"chosen"}, "Traceparent": {parentB}}, want: traceB + "-" + spanB},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := `{"name":"echo__say","arguments":{"n":` + fmt.Sprint(i) + `}`
			if c.meta != "" {
				params += "," + c.meta
			}
			body := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/call","params":` + params + `}}`
			send := func(s *rawSession) exchange {
				resp := s.postWith(t, context.Background(), body, c.header)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return describe(resp, b)
			}
			var wantID string
			if err := json.Unmarshal([]byte(c.id), &wantID); err != nil {
				wantID = c.id // a number
			}
			want := send(plainS)
			if !strings.Contains(want.Body, `"result":{"content":[{"type":"text","text":"{\"n\":`+fmt.Sprint(i)+`}"}]`) {
				t.Fatalf("the call failed: %+v", want)
			}
			for _, p := range []struct {
				name string
				g    *Gateway
				s    *rawSession
			}{{"fast path", fast, fastS}, {"SDK's path", sdk, sdkS}} {
				n, served := len(rec.Ended()), p.g.fast.served.Load()
				got := send(p.s)
				if got != want {
					t.Errorf("%s: the answer differs from the one without telemetry:\n got: %+v\nwant: %+v", p.name, got, want)
				}
				wantServed := uint64(0)
				if p.g == fast {
					wantServed = 1
				}
				if fastServed := p.g.fast.served.Load() - served; fastServed != wantServed {
					t.Errorf("%s: the fast path served %d calls, want %d", p.name, fastServed, wantServed)
				}
				spans := callSpans(rec, n)
				if len(spans) != 1 {
					t.Fatalf("%s: %d call spans", p.name, len(spans))
				}
				s := spans[0]
				if got := parentOf(s); got != c.want {
					t.Errorf("%s: the call span's parent is %q, want %q", p.name, got, c.want)
				}
				if c.want != "" && s.SpanContext().TraceID().String() != c.want[:32] {
					t.Errorf("%s: the call span is in trace %s", p.name, s.SpanContext().TraceID())
				}
				if got := s.Parent().TraceState().String(); got != c.state {
					t.Errorf("%s: the parent's tracestate is %q, want %q", p.name, got, c.state)
				}
				if s.Name() != "tools/call echo__say" || attr(s, "jsonrpc.request.id") != wantID || attr(s, "network.transport") != "http" {
					t.Errorf("%s: span %q, jsonrpc.request.id %q (want %q), network.transport %q",
						p.name, s.Name(), attr(s, "jsonrpc.request.id"), wantID, attr(s, "network.transport"))
				}
			}
		})
	}
	if plain.fast.served.Load() == 0 {
		t.Error("the gateway without telemetry did not serve its calls on the fast path: the comparison says little")
	}
}

// Over stdio, as over any transport without HTTP headers, the trace context in _meta is the
// parent of the call span.
func TestClientTraceContextOverStdio(t *testing.T) {
	tel, rec := tracedProvider(t)
	g, _, _ := fastGatewayWith(t, true, tel)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clientT, serverT := mcp.NewInMemoryTransports()
	if _, err := g.MCPServer().Connect(ctx, serverT, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct {
		meta mcp.Meta
		want string
	}{
		{mcp.Meta{"traceparent": parentA, "tracestate": stateA}, traceA + "-" + spanA},
		{mcp.Meta{"traceparent": malformed}, noTraceYet},
		{nil, noTraceYet},
	} {
		n := len(rec.Ended())
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"x": 1}, Meta: c.meta})
		if err != nil || res.IsError {
			t.Fatalf("%v: %v %+v", c.meta, err, res)
		}
		spans := callSpans(rec, n)
		if len(spans) != 1 {
			t.Fatalf("%v: %d call spans", c.meta, len(spans))
		}
		if got := parentOf(spans[0]); got != c.want {
			t.Errorf("%v: the call span's parent is %q, want %q", c.meta, got, c.want)
		}
		if tr := attr(spans[0], "network.transport"); tr != "stdio" {
			t.Errorf("%v: network.transport %q", c.meta, tr)
		}
	}
}
