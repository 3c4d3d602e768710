package telemetry

import (
	"bytes"
	"context"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// A client's trace context, as in the W3C specification's examples.
const (
	clientTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID      = "00f067aa0ba902b7"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
	clientTracestate  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	clientBaggage     = "userId=alice,serverNode=DF%2028"
)

// env is an environment for Options.Getenv: only what it holds is set.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// newTestProvider is New with an endpoint (never reached) and spans kept in memory; it is shut
// down when the test ends.
func newTestProvider(t *testing.T, cfg config.Telemetry) (*Provider, *tracetest.InMemoryExporter) {
	t.Helper()
	if cfg.Endpoint == "" {
		cfg.Endpoint = deadEndpoint(t)
	}
	spans := tracetest.NewInMemoryExporter()
	p, err := New(context.Background(), cfg, Options{ServiceName: "cell-3", Getenv: env(nil), spanExporter: spans})
	if err != nil || p == nil {
		t.Fatalf("New = %v, %v", p, err)
	}
	t.Cleanup(func() { shutdown(t, p) })
	return p, spans
}

// deadEndpoint is the URL of a port nothing listens on (never a collector's: other tests of the
// machine may run one on the usual ports).
func deadEndpoint(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

func shutdown(t *testing.T, p *Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// otelGoroutines are the stacks of the goroutines running OpenTelemetry code.
func otelGoroutines() []string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	var out []string
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "go.opentelemetry.io/") {
			out = append(out, g)
		}
	}
	return out
}

// waitNoOtelGoroutines waits a little for OpenTelemetry goroutines that are ending.
func waitNoOtelGoroutines(t *testing.T, after string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		g := otelGoroutines()
		if len(g) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, %d OpenTelemetry goroutines run; the first:\n%s", after, len(g), g[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
