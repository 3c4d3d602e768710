package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// runTraceServer is a real SDK stdio server whose "meta" tool answers with the _meta of the
// call as the server read it.
func runTraceServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "trace-robot", Version: "1"}, nil)
	addTraceTools(srv)
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "trace server:", err)
	}
	return 0
}

func addTraceTools(srv *mcp.Server) {
	srv.AddTool(objectTool("meta"), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(req.Params.Meta)
		if err != nil {
			return nil, err
		}
		return textResult(string(b)), nil
	})
}

// newTracing returns the gateway's propagation policy (a telemetry.Provider whose exporter is
// never reached: the spans of these tests come from tracer) and a tracer of the real OTel SDK
// that keeps its spans in memory.
func newTracing(t testing.TB, forwardBaggage bool) (*telemetry.Provider, trace.Tracer) {
	t.Helper()
	tel, err := telemetry.New(context.Background(),
		config.Telemetry{Endpoint: "http://127.0.0.1:1", ForwardBaggage: forwardBaggage},
		telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil || tel == nil {
		t.Fatalf("telemetry.New = %v, %v", tel, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
		_ = tel.Shutdown(ctx)
	})
	return tel, tp.Tracer("upstream-test")
}

// The client's trace context, as the gateway reads it from the client's _meta.
const (
	clientTraceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	clientTraceID     = "0af7651916cd43dd8448eb211c80319c"
)

var clientMeta = map[string]any{
	telemetry.KeyTraceparent: clientTraceparent,
	telemetry.KeyTracestate:  "client=1",
	telemetry.KeyBaggage:     "user=alice",
}

// traceCase is one way a call's context can be, and what the server must be sent for it.
type traceCase struct {
	name string
	// ctx makes the call's context: tel reads the client's context, tracer starts the
	// gateway's span; want is the traceparent the server must get ("" for none).
	ctx        func(tel *telemetry.Provider, tracer trace.Tracer) (ctx context.Context, want string)
	tracestate string // what the server must get, when want is set
}

var traceCases = []traceCase{
	{name: "the gateway's span under the client's", tracestate: "client=1",
		ctx: func(tel *telemetry.Provider, tracer trace.Tracer) (context.Context, string) {
			ctx, span := tracer.Start(tel.FromMeta(context.Background(), clientMeta), "tools/call robot__meta")
			sc := span.SpanContext()
			return ctx, "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		}},
	{name: "the gateway's span, no client's",
		ctx: func(_ *telemetry.Provider, tracer trace.Tracer) (context.Context, string) {
			ctx, span := tracer.Start(context.Background(), "tools/call robot__meta")
			sc := span.SpanContext()
			return ctx, "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		}},
	{name: "the client's only",
		ctx: func(tel *telemetry.Provider, _ trace.Tracer) (context.Context, string) {
			return tel.FromMeta(context.Background(), clientMeta), ""
		}},
	{name: "no trace context",
		ctx: func(*telemetry.Provider, trace.Tracer) (context.Context, string) { return context.Background(), "" }},
}

// checkTraceMeta checks the _meta a server read for a call made in case c's context.
func checkTraceMeta(t *testing.T, c traceCase, want string, on, forwardBaggage bool, meta map[string]any) {
	t.Helper()
	if !on {
		want = ""
	}
	if meta[mcp.MetaKeyClientCapabilities] == nil {
		t.Errorf("_meta %v lost the client's capabilities", meta)
	}
	if want == "" {
		for _, k := range []string{telemetry.KeyTraceparent, telemetry.KeyTracestate, telemetry.KeyBaggage} {
			if v, ok := meta[k]; ok {
				t.Errorf("the server got %s %v, want none", k, v)
			}
		}
		return
	}
	got, _ := meta[telemetry.KeyTraceparent].(string)
	if got != want {
		t.Errorf("the server got traceparent %q, want the gateway's span's %q", got, want)
	}
	if got == clientTraceparent {
		t.Errorf("the server got the client's traceparent as it is")
	}
	if c.tracestate != "" && got[3:35] != clientTraceID {
		t.Errorf("traceparent %q is not in the client's trace %s", got, clientTraceID)
	}
	if ts, _ := meta[telemetry.KeyTracestate].(string); ts != c.tracestate {
		t.Errorf("the server got tracestate %q, want %q", ts, c.tracestate)
	}
	bag, has := meta[telemetry.KeyBaggage]
	switch {
	case forwardBaggage && c.tracestate != "" && bag != "user=alice":
		t.Errorf("with forward_baggage the server got baggage %v, want user=alice", bag)
	case !forwardBaggage && has:
		t.Errorf("without forward_baggage the server got baggage %v", bag)
	}
}

// A call to a stdio server carries the trace context of the gateway's span in its _meta, on
// either path: the gateway's span replacing the client's, baggage only with forward_baggage,
// and nothing at all with telemetry off or without a span of the gateway's.
func TestCallSendsTheGatewaysTraceContext(t *testing.T) {
	checkGoroutines(t)
	for _, fast := range []bool{true, false} {
		for _, mode := range []string{"off", "on", "forward_baggage"} {
			t.Run(fmt.Sprintf("fast=%v/%s", fast, mode), func(t *testing.T) {
				tel, tracer := newTracing(t, mode == "forward_baggage")
				opts := Options{FastPath: fast}
				if mode != "off" {
					opts.Telemetry = tel
				}
				m, err := startManager(t, []config.Server{stdioServer(t, "trace")}, opts)
				if err != nil {
					t.Fatal(err)
				}
				u := m.Get("robot")
				for _, c := range traceCases {
					ctx, want := c.ctx(tel, tracer)
					ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					res, err := u.Call(ctx, "meta", nil, nil)
					cancel()
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					var meta map[string]any
					if err := json.Unmarshal([]byte(resultText(t, res)), &meta); err != nil {
						t.Fatal(err)
					}
					t.Run(c.name, func(t *testing.T) { checkTraceMeta(t, c, want, mode != "off", mode == "forward_baggage", meta) })
				}
				if got := fastCount(u) > 0; got != fast {
					t.Errorf("calls took the fast path: %v, want %v", got, fast)
				}
			})
		}
	}
}

// A call to an HTTP server carries the gateway's trace context in _meta and in the W3C headers
// of its POST; the session's own requests carry none.
func TestHTTPCallSendsTheGatewaysTraceContext(t *testing.T) {
	checkGoroutines(t)
	for _, mode := range []string{"off", "on", "forward_baggage"} {
		t.Run(mode, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "trace-cloud", Version: "1"}, nil)
			addTraceTools(srv)
			handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			var mu sync.Mutex
			headers := map[string][]http.Header{} // by JSON-RPC method
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
					var msg struct{ Method string }
					_ = json.Unmarshal(body, &msg)
					mu.Lock()
					headers[msg.Method] = append(headers[msg.Method], r.Header.Clone())
					mu.Unlock()
				}
				handler.ServeHTTP(w, r)
			}))
			t.Cleanup(ts.Close)

			tel, tracer := newTracing(t, mode == "forward_baggage")
			opts := Options{}
			if mode != "off" {
				opts.Telemetry = tel
			}
			m, err := startManager(t, []config.Server{{Name: "cloud", URL: ts.URL, StartupTimeoutSec: 5}}, opts)
			if err != nil {
				t.Fatal(err)
			}
			u := m.Get("cloud")
			for _, c := range traceCases {
				mu.Lock()
				clear(headers)
				mu.Unlock()
				ctx, want := c.ctx(tel, tracer)
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := u.Call(ctx, "meta", nil, nil)
				cancel()
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				var meta map[string]any
				if err := json.Unmarshal([]byte(resultText(t, res)), &meta); err != nil {
					t.Fatal(err)
				}
				t.Run(c.name, func(t *testing.T) {
					checkTraceMeta(t, c, want, mode != "off", mode == "forward_baggage", meta)
					mu.Lock()
					defer mu.Unlock()
					calls := headers["tools/call"]
					if len(calls) != 1 {
						t.Fatalf("%d tools/call POSTs, want 1", len(calls))
					}
					h := calls[0]
					if mode == "off" {
						want = ""
					}
					if got := h.Get(telemetry.KeyTraceparent); got != want {
						t.Errorf("traceparent header %q, want %q", got, want)
					}
					if got := h.Get(telemetry.KeyTraceparent); got != "" && got != meta[telemetry.KeyTraceparent] {
						t.Errorf("traceparent header %q and _meta %v differ", got, meta[telemetry.KeyTraceparent])
					}
					wantState, wantBag := "", ""
					if want != "" {
						wantState = c.tracestate
						if mode == "forward_baggage" && c.tracestate != "" {
							wantBag = "user=alice"
						}
					}
					if got := h.Get(telemetry.KeyTracestate); got != wantState {
						t.Errorf("tracestate header %q, want %q", got, wantState)
					}
					if got := h.Get(telemetry.KeyBaggage); got != wantBag {
						t.Errorf("baggage header %q, want %q", got, wantBag)
					}
				})
			}
			// The session's own requests were made without a call's span.
			if err := u.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(headers["initialize"]) == 0 {
				t.Fatal("no initialize POST seen after the restart")
			}
			for method, hs := range headers {
				if method == "tools/call" {
					continue
				}
				for _, h := range hs {
					if tp := h.Get(telemetry.KeyTraceparent); tp != "" {
						t.Errorf("%s carried traceparent %q", method, tp)
					}
				}
			}
		})
	}
}

// A traced call that waits for a physical server's turn has a "queue wait" span under the span
// it was dispatched in, ended when its turn came; a call that did not wait has one too, ended
// at once, and an untraced call has none.
func TestQueueWaitIsASpan(t *testing.T) {
	checkGoroutines(t)
	cfg := stdioServer(t, "tools")
	cfg.Physical = true
	cfg.QueueSize = 4
	m, err := startManager(t, []config.Server{cfg}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("upstream-test")

	first := make(chan error, 1)
	go func() {
		ctx, span := tracer.Start(context.Background(), "dispatch first")
		defer span.End()
		_, err := callSlow(u, ctx, "a", 300)
		first <- err
	}()
	eventually(t, 5*time.Second, "the first call is in flight", func() bool { return inFlight(u) })
	ctx, second := tracer.Start(context.Background(), "dispatch second")
	start := time.Now()
	if _, err := callSlow(u, ctx, "b", 1); err != nil {
		t.Fatal(err)
	}
	second.End()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := callSlow(u, context.Background(), "untraced", 1); err != nil {
		t.Fatal(err)
	}

	var waits []sdktrace.ReadOnlySpan
	parents := map[trace.SpanID]string{}
	for _, s := range rec.Ended() {
		parents[s.SpanContext().SpanID()] = s.Name()
		if s.Name() == "queue wait" {
			waits = append(waits, s)
		}
	}
	if len(waits) != 2 {
		t.Fatalf("%d queue wait spans, want 2 (one per traced call)", len(waits))
	}
	for _, w := range waits {
		parent := parents[w.Parent().SpanID()]
		d := w.EndTime().Sub(w.StartTime())
		switch parent {
		case "dispatch first":
			if d > 100*time.Millisecond {
				t.Errorf("the first call's wait took %v; it had its turn at once", d)
			}
		case "dispatch second":
			if d < 100*time.Millisecond || w.StartTime().Before(start) {
				t.Errorf("the second call's wait took %v; it waited for the first (300 ms) to end", d)
			}
		default:
			t.Errorf("queue wait under %q, want a dispatch span", parent)
		}
		var server string
		for _, a := range w.Attributes() {
			if a.Key == telemetry.AttrServer {
				server = a.Value.AsString()
			}
		}
		if server != "robot" {
			t.Errorf("queue wait server = %q, want robot", server)
		}
	}
}
