package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

func testTracer(t *testing.T) (*tracetest.SpanRecorder, trace.Tracer) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp.Tracer("test")
}

// /metrics answers a scraper that asks for OpenMetrics in that format, with the trace id of a
// traced call as the exemplar of its latency; one that does not ask gets the text format, which
// has no exemplars.
func TestMetricsServeExemplarsToOpenMetricsScrapers(t *testing.T) {
	_, tracer := testTracer(t)
	reg := prometheus.NewRegistry()
	h := governor.Chain(governor.HandlerFunc(func(context.Context, *governor.Call) *governor.Outcome {
		return &governor.Outcome{Success: true}
	}), governor.NewMetrics(reg).Observe())
	ctx, span := tracer.Start(context.Background(), "call")
	h.Handle(ctx, &governor.Call{Name: "arm__move", Start: time.Now()})
	span.End()
	traceID := span.SpanContext().TraceID().String()
	handler := MetricsHandler(reg, slog.New(slog.NewTextHandler(io.Discard, nil)))

	scrape := func(accept string) (string, string) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /metrics (Accept %q): %d %s", accept, w.Code, w.Body)
		}
		return w.Header().Get("Content-Type"), w.Body.String()
	}

	ct, body := scrape("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	if !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("asked for OpenMetrics, got %s", ct)
	}
	var bucket string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "mcp_gateway_tool_call_duration_seconds_bucket{") && strings.Contains(line, "# {") {
			bucket = line
		}
	}
	if !strings.Contains(bucket, `# {trace_id="`+traceID+`"}`) {
		t.Fatalf("no bucket of the latency names trace %s:\n%s", traceID, body)
	}

	ct, body = scrape("")
	if !strings.HasPrefix(ct, "text/plain") || strings.Contains(body, "trace_id") || !strings.Contains(body, "mcp_gateway_tool_call_duration_seconds_bucket") {
		t.Fatalf("a scraper that did not ask got %s:\n%s", ct, body)
	}
}

// A halt that cancels a physical call is one "halt" event on the call's span, whether the call
// was in flight (inFlight.step notes it) or held before dispatch (admitStep does), even though
// a halt cancels both ways; the event names the server, not the operator or the reason.
func TestHaltIsOneEventOnTheCallSpan(t *testing.T) {
	tool := &governor.Tool{Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: &config.Server{Name: "arm", Physical: true}}
	wait := func(dispatched bool, started chan<- struct{}) governor.Handler {
		return governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
			c.Dispatched = dispatched
			close(started)
			<-ctx.Done()
			return governor.Refuse(governor.KindCancelled, "cancelled")
		})
	}
	for _, tc := range []struct {
		name  string
		chain func(f *inFlight, started chan<- struct{}) governor.Handler
	}{
		{"in flight", func(f *inFlight, started chan<- struct{}) governor.Handler {
			return governor.Chain(wait(true, started), f.admitStep(), f.step())
		}},
		{"held before dispatch", func(f *inFlight, started chan<- struct{}) governor.Handler {
			// The call waits (for an approval, say) between the two steps.
			return governor.Chain(governor.HandlerFunc(func(context.Context, *governor.Call) *governor.Outcome {
				t.Error("the held call went on")
				return &governor.Outcome{}
			}), f.admitStep(), func(governor.Handler) governor.Handler { return wait(false, started) }, f.step())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tracer := testTracer(t)
			f := newInFlight([]string{"arm"})
			started := make(chan struct{})
			h := tc.chain(f, started)
			ctx, span := tracer.Start(context.Background(), "call")
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.Handle(ctx, &governor.Call{ID: "c1", Name: "arm__pick", Tool: tool})
			}()
			<-started
			cause := &HaltCause{Operator: "alice", Reason: "someone in the cell"}
			f.cancelPhysical(cause) // as Halt does
			f.cancelAdmitted(cause)
			<-done
			span.End()
			var halts []sdktrace.Event
			for _, e := range rec.Ended()[0].Events() {
				if e.Name == "halt" {
					halts = append(halts, e)
				}
			}
			if len(halts) != 1 {
				t.Fatalf("%d halt events on the call span, want 1", len(halts))
			}
			var server string
			for _, kv := range halts[0].Attributes {
				if kv.Key == telemetry.AttrServer {
					server = kv.Value.AsString()
				}
				if v := kv.Value.String(); strings.Contains(v, "alice") || strings.Contains(v, "cell") {
					t.Errorf("halt event names the operator or the reason: %v", kv)
				}
			}
			if server != "arm" {
				t.Errorf("halt event attributes %v, want the server", halts[0].Attributes)
			}
		})
	}
}
