package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The client side of the tracing tests: an MCP client that traces its own work with the
// OpenTelemetry SDK, as an instrumented agent does, and sends its trace context in params._meta
// (MCP SEP-414) or in the HTTP traceparent header; and the traced upstream server.

// tracedServerBuild is e2e/tracedserver, built once per test run.
var tracedServerBuild struct {
	once sync.Once
	path string
	err  error
}

// tracedServerBin is the path of the traced upstream test server (e2e/tracedserver).
func tracedServerBin(t *testing.T) string {
	t.Helper()
	tracedServerBuild.once.Do(func() {
		tracedServerBuild.path = filepath.Join(binDir, "tracedserver")
		out, err := exec.Command("go", "build", "-o", tracedServerBuild.path, "./tracedserver").CombinedOutput()
		if err != nil {
			tracedServerBuild.err = err
			tracedServerBuild.path = string(out)
		}
	})
	if tracedServerBuild.err != nil {
		t.Fatalf("building e2e/tracedserver: %v\n%s", tracedServerBuild.err, tracedServerBuild.path)
	}
	return tracedServerBuild.path
}

// clientService is the service.name of the test client's spans.
const clientService = "e2e-client"

// clientTracer is the test client's tracer: the OpenTelemetry SDK exporting to j over OTLP/HTTP,
// each span when it ends, so that a span ended is at Jaeger.
func clientTracer(t *testing.T, j *jaegerProc) trace.Tracer {
	t.Helper()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.otlpHTTP+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", clientService)))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	})
	return tp.Tracer("e2e-client")
}

// mapCarrier reads and writes trace context in a _meta object.
type mapCarrier map[string]any

func (m mapCarrier) Get(key string) string { s, _ := m[key].(string); return s }
func (m mapCarrier) Set(key, value string) { m[key] = value }
func (m mapCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// metaOf is a _meta holding ctx's trace context and baggage, as SEP-414 puts them.
func metaOf(ctx context.Context) mcp.Meta {
	m := mapCarrier{}
	propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}).Inject(ctx, m)
	return mcp.Meta(m)
}

// clientBaggage is the baggage the test client sends with its trace context; the gateway must
// not pass it on upstream unless telemetry.forward_baggage says so.
const clientBaggage = "tenant=acme-robotics"

// tracedCall is one step of an instrumented agent: a span of the client ("agent step"), and
// within it a call of tool whose _meta carries the span's context and the client's baggage. It
// returns the span's context, once the span has ended (and been exported), and the result or
// the protocol error.
func tracedCall(t *testing.T, tr trace.Tracer, cs *mcp.ClientSession, tool string, args any) (trace.SpanContext, *mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bag, err := baggage.Parse(clientBaggage)
	if err != nil {
		t.Fatal(err)
	}
	ctx = baggage.ContextWithBaggage(ctx, bag)
	ctx, span := tr.Start(ctx, "agent step", trace.WithSpanKind(trace.SpanKindInternal))
	res, callErr := cs.CallTool(ctx, &mcp.CallToolParams{Meta: metaOf(ctx), Name: tool, Arguments: args})
	span.End()
	return span.SpanContext(), res, callErr
}

// headerTransport sends the traceparent header it holds (none while it holds "") on every
// request: the transport-level trace context of a client that does not use _meta.
type headerTransport struct{ traceparent atomic.Value }

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tp, _ := h.traceparent.Load().(string); tp != "" {
		r = r.Clone(r.Context())
		r.Header.Set("traceparent", tp)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectWithHeaders connects an MCP client over streamable HTTP through h.
func connectWithHeaders(t *testing.T, addr string, h *headerTransport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: h},
	}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// randomHex is n random bytes in hex: a fresh trace or span id.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// upstreamSaw is what the traced server recorded of each call: the tool and the _meta it got.
type upstreamSaw struct {
	Tool string         `json:"tool"`
	Meta map[string]any `json:"meta"`
}

func readUpstreamRecord(t *testing.T, path string) []upstreamSaw {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []upstreamSaw
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var s upstreamSaw
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("%s: %v: %s", path, err, line)
		}
		out = append(out, s)
	}
	return out
}

// traceAuditRecord is the part of an audit record the tracing tests read.
type traceAuditRecord struct {
	Seq     uint64          `json:"seq"`
	Type    string          `json:"type"`
	Tool    string          `json:"tool"`
	Kind    string          `json:"kind"`
	Outcome string          `json:"outcome"`
	CallID  string          `json:"call_id"`
	TraceID string          `json:"trace_id"`
	SpanID  string          `json:"span_id"`
	Args    json.RawMessage `json:"args"`
	Hash    string          `json:"hash"`
}

// traceAudit reads the audit log with `mcp-gateway audit -o jsonl -c cfg`.
func traceAudit(t *testing.T, cfg string) []traceAuditRecord {
	t.Helper()
	out, _ := cliOK(t, "audit", "-o", "jsonl", "-c", cfg)
	var recs []traceAuditRecord
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r traceAuditRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit -o jsonl: %v\n%s", err, out)
		}
		recs = append(recs, r)
	}
	return recs
}

// goroutineDump is the gateway's goroutine profile with full stacks (gateway.pprof: true),
// read with the admin token.
func goroutineDump(t *testing.T, cfg, addr string) string {
	t.Helper()
	token := strings.TrimSpace(readFile(t, filepath.Join(cfgDir(cfg), ".mcp-gateway", "admin.token")))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/admin/debug/pprof/goroutine?debug=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), "goroutine ") {
		t.Fatalf("goroutine profile: %d %.300s", resp.StatusCode, b.String())
	}
	return b.String()
}
