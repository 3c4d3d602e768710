package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestResolve(t *testing.T) {
	const file, traces, generic = "http://collector:4318", "http://traces:4318/v1/traces", "http://generic:4318"
	for _, c := range []struct {
		name    string
		cfg     config.Telemetry
		env     map[string]string
		want    Settings
		wantErr string
	}{
		{name: "nothing", want: Settings{}},
		{name: "file", cfg: config.Telemetry{Endpoint: file}, want: Settings{On: true, Endpoint: file, Protocol: config.TelemetryHTTP}},
		{name: "file wins over the environment", cfg: config.Telemetry{Endpoint: file},
			env:  map[string]string{envTracesEndpoint: traces, envEndpoint: generic},
			want: Settings{On: true, Endpoint: file, Protocol: config.TelemetryHTTP}},
		{name: "traces endpoint wins over the generic one", env: map[string]string{envTracesEndpoint: traces, envEndpoint: generic},
			want: Settings{On: true, EndpointFromEnv: envTracesEndpoint, Protocol: config.TelemetryHTTP}},
		{name: "generic endpoint", env: map[string]string{envEndpoint: generic},
			want: Settings{On: true, EndpointFromEnv: envEndpoint, Protocol: config.TelemetryHTTP}},
		{name: "disabled", cfg: config.Telemetry{Endpoint: file}, env: map[string]string{envDisabled: " TRUE "}, want: Settings{}},
		{name: "disabled false", cfg: config.Telemetry{Endpoint: file}, env: map[string]string{envDisabled: "false"},
			want: Settings{On: true, Endpoint: file, Protocol: config.TelemetryHTTP}},
		{name: "protocol from the file wins", cfg: config.Telemetry{Endpoint: file, Protocol: config.TelemetryHTTP},
			env:  map[string]string{envTracesProtocol: "grpc", envProtocol: "grpc"},
			want: Settings{On: true, Endpoint: file, Protocol: config.TelemetryHTTP}},
		{name: "traces protocol wins over the generic one", cfg: config.Telemetry{Endpoint: file},
			env:  map[string]string{envTracesProtocol: "grpc", envProtocol: "http/protobuf"},
			want: Settings{On: true, Endpoint: file, Protocol: config.TelemetryGRPC}},
		{name: "generic protocol", env: map[string]string{envEndpoint: generic, envProtocol: " grpc "},
			want: Settings{On: true, EndpointFromEnv: envEndpoint, Protocol: config.TelemetryGRPC}},
		{name: "bad protocol", cfg: config.Telemetry{Endpoint: file}, env: map[string]string{envProtocol: "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL is "http/json"; the gateway exports OTLP as http/protobuf or grpc`},
		{name: "bad traces protocol", cfg: config.Telemetry{Endpoint: file}, env: map[string]string{envTracesProtocol: "udp"},
			wantErr: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is "udp"`},
		{name: "bad protocol ignored when off", env: map[string]string{envProtocol: "udp"}, want: Settings{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(c.cfg, env(c.env))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Resolve error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("Resolve = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestSignalURL(t *testing.T) {
	for _, c := range [][3]string{
		{"http://127.0.0.1:4318", "traces", "http://127.0.0.1:4318/v1/traces"},
		{"http://127.0.0.1:4318/", "logs", "http://127.0.0.1:4318/v1/logs"},
		{"https://otlp.example.com/otlp", "traces", "https://otlp.example.com/otlp/v1/traces"},
		{"https://otlp.example.com/otlp/", "logs", "https://otlp.example.com/otlp/v1/logs"},
		{"http://c:4318/v1/traces", "traces", "http://c:4318/v1/traces"},
		{"http://c:4318/v1/logs", "traces", "http://c:4318/v1/logs/v1/traces"},
		{"http://c:4318?tenant=a", "logs", "http://c:4318/v1/logs?tenant=a"},
		{"://not a url", "traces", "://not a url"},
	} {
		if got := SignalURL(c[0], c[1]); got != c[2] {
			t.Errorf("SignalURL(%q, %q) = %q, want %q", c[0], c[1], got, c[2])
		}
	}
	for _, c := range [][2]string{
		{"http://c:4318/v1/traces", "http://c:4318/v1/logs"},
		{"http://c:4318/v1/traces/", "http://c:4318/v1/logs"},
		{"https://c/tenant-a/v1/traces", "https://c/tenant-a/v1/logs"},
		{"http://c:4318", "http://c:4318/v1/logs"},
	} {
		if got := logsURL(c[0]); got != c[1] {
			t.Errorf("logsURL(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// TestNewOffStartsNothing: with no endpoint anywhere (or OTEL_SDK_DISABLED), New returns nil
// and no OpenTelemetry goroutine runs; with one, the exporter's goroutines run until Shutdown.
func TestNewOffStartsNothing(t *testing.T) {
	waitNoOtelGoroutines(t, "before New")
	before := runtime.NumGoroutine()
	for _, vars := range []map[string]string{nil, {envDisabled: "true", envEndpoint: "http://127.0.0.1:4318"}} {
		p, err := New(context.Background(), config.Telemetry{AuditLogs: true, HeadersEnv: map[string]string{"x-api-key": "UNSET"}}, Options{Getenv: env(vars)})
		if p != nil || err != nil {
			t.Fatalf("New with %v = %v, %v; want nil, nil", vars, p, err)
		}
	}
	if g := otelGoroutines(); len(g) != 0 || runtime.NumGoroutine() > before {
		t.Fatalf("telemetry off: %d goroutines (%d before), OpenTelemetry's: %v", runtime.NumGoroutine(), before, g)
	}

	p, err := New(context.Background(), config.Telemetry{Endpoint: deadEndpoint(t), Protocol: config.TelemetryGRPC, AuditLogs: true}, Options{Getenv: env(nil)})
	if err != nil || p == nil {
		t.Fatalf("New = %v, %v", p, err)
	}
	if len(otelGoroutines()) == 0 {
		t.Fatal("telemetry on: no OpenTelemetry goroutine found; the check above cannot fail")
	}
	shutdown(t, p)
	waitNoOtelGoroutines(t, "after Shutdown")
}

// TestNewWithAnEndpoint builds a provider for each protocol: its tracer records spans, and the
// spans of a child have the parent's trace.
func TestNewWithAnEndpoint(t *testing.T) {
	// The export Shutdown gives up on goes on in the background until the exporter's own
	// timeout: short, so that no goroutine outlives the test.
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	for _, cfg := range []config.Telemetry{
		{Endpoint: deadEndpoint(t)},
		{Endpoint: deadEndpoint(t) + "/otlp", Protocol: config.TelemetryGRPC, HeadersEnv: map[string]string{"x-api-key": "OTLP_KEY"}},
	} {
		p, err := New(context.Background(), cfg, Options{Getenv: env(map[string]string{"OTLP_KEY": "k"})})
		if err != nil || !p.On() || p.TracerProvider() == nil {
			t.Fatalf("New(%+v) = %v, %v", cfg, p, err)
		}
		if d := p.Describe(); !strings.Contains(d, cfg.Endpoint) || strings.Contains(d, "audit") {
			t.Errorf("Describe = %q", d)
		}
		ctx, span := p.Tracer().Start(context.Background(), "tools/call")
		if !span.IsRecording() || !Traced(ctx) {
			t.Error("the provider's span is not recording")
		}
		child, cs := Child(ctx, "validate")
		if cs.SpanContext().TraceID() != span.SpanContext().TraceID() || cs.SpanContext().SpanID() == span.SpanContext().SpanID() {
			t.Error("Child did not start a child span")
		}
		if tid, sid := IDs(child); tid != span.SpanContext().TraceID().String() || sid != cs.SpanContext().SpanID().String() {
			t.Errorf("IDs = %s %s", tid, sid)
		}
		cs.End()
		span.End()
		// Nothing listens: Shutdown reports the spans lost within its deadline, and returns.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		err = p.Shutdown(ctx)
		cancel()
		if time.Since(start) > 2*time.Second {
			t.Errorf("Shutdown took %v with a 300ms deadline", time.Since(start))
		}
		if err == nil {
			t.Errorf("%s: Shutdown with nothing listening = nil; want what was lost", cfg.Endpoint)
		}
	}
}

func TestNewHeadersEnvUnset(t *testing.T) {
	_, err := New(context.Background(), config.Telemetry{Endpoint: deadEndpoint(t), HeadersEnv: map[string]string{"x-honeycomb-team": "HONEYCOMB_KEY"}}, Options{Getenv: env(nil)})
	if err == nil || !strings.Contains(err.Error(), "telemetry.headers_env.x-honeycomb-team names the environment variable HONEYCOMB_KEY, which is not set") {
		t.Errorf("New with an unset headers_env variable: %v", err)
	}
}

// TestResourcePrecedence: service.name is Options.ServiceName (gateway.name), unless
// OTEL_SERVICE_NAME says otherwise, unless telemetry.resource does; OTEL_RESOURCE_ATTRIBUTES adds
// attributes below both. Checked on an exported span.
func TestResourcePrecedence(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     string
		env      map[string]string
		file     map[string]string
		wantName string
		want     map[string]string
	}{
		{name: "default", wantName: "mcp-gateway"},
		{name: "gateway name", opts: "cell-3", wantName: "cell-3"},
		{name: "resource attributes", opts: "cell-3", env: map[string]string{envResourceAttrs: "service.name=from-attrs,deployment.environment=lab%203, bad ,=x"},
			wantName: "from-attrs", want: map[string]string{"deployment.environment": "lab 3"}},
		{name: "OTEL_SERVICE_NAME", opts: "cell-3", env: map[string]string{envServiceName: "svc", envResourceAttrs: "service.name=from-attrs"}, wantName: "svc"},
		{name: "file", opts: "cell-3", env: map[string]string{envServiceName: "svc", envResourceAttrs: "deployment.environment=env"},
			file: map[string]string{"service.name": "from-file", "deployment.environment": "lab-3"}, wantName: "from-file",
			want: map[string]string{"deployment.environment": "lab-3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spans := tracetest.NewInMemoryExporter()
			p, err := New(context.Background(), config.Telemetry{Endpoint: deadEndpoint(t), Resource: c.file},
				Options{ServiceName: c.opts, Version: "1.2.3", Getenv: env(c.env), spanExporter: spans})
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.Tracer().Start(context.Background(), "x")
			span.End()
			if err := p.tp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := spans.GetSpans() // before Shutdown, which empties the exporter
			shutdown(t, p)
			if len(got) != 1 {
				t.Fatalf("%d spans exported", len(got))
			}
			attrs := map[string]string{}
			for _, kv := range got[0].Resource.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["service.name"] != c.wantName || attrs["service.version"] != "1.2.3" || attrs["telemetry.sdk.name"] != "opentelemetry" {
				t.Errorf("resource %v: want service.name %s", attrs, c.wantName)
			}
			for k, v := range c.want {
				if attrs[k] != v {
					t.Errorf("resource %v: want %s=%s", attrs, k, v)
				}
			}
		})
	}
}

// collector records the paths and headers of OTLP/HTTP requests, and answers them with an
// empty export response (an OTLP response with no partial success is empty protobuf).
type collector struct {
	mu    sync.Mutex
	paths []string
	keys  []string
	srv   *httptest.Server
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		c.keys = append(c.keys, r.Header.Get("X-Api-Key"))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) got() (paths, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.paths), slices.Clone(c.keys)
}

// TestExportsGoToTheSignalsPaths: over HTTP, spans are posted to /v1/traces and audit records
// to /v1/logs of the same endpoint, with the headers of headers_env; with only
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the logs go beside the traces.
func TestExportsGoToTheSignalsPaths(t *testing.T) {
	for _, c := range []struct {
		name      string
		endpoint  string // in the file
		tracesEnv string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, under the collector's URL
		want      []string
	}{
		{name: "file", endpoint: "/", want: []string{"/v1/logs", "/v1/traces"}},
		{name: "file with a path", endpoint: "/otlp", want: []string{"/otlp/v1/logs", "/otlp/v1/traces"}},
		{name: "traces endpoint only", tracesEnv: "/tenant/v1/traces", want: []string{"/tenant/v1/logs", "/tenant/v1/traces"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			col := newCollector(t)
			cfg := config.Telemetry{AuditLogs: true, HeadersEnv: map[string]string{"x-api-key": "OTLP_KEY"}}
			vars := map[string]string{"OTLP_KEY": "secret-1"}
			if c.endpoint != "" {
				cfg.Endpoint = col.srv.URL + c.endpoint
			} else {
				// The exporters read the environment themselves.
				t.Setenv(envTracesEndpoint, col.srv.URL+c.tracesEnv)
				vars[envTracesEndpoint] = col.srv.URL + c.tracesEnv
			}
			p, err := New(context.Background(), cfg, Options{Getenv: env(vars)})
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.Tracer().Start(context.Background(), "x")
			span.End()
			p.AuditExporter()(1, []byte(`{"seq":1,"type":"call","hash":"h"}`), "h")
			shutdown(t, p)
			paths, keys := col.got()
			slices.Sort(paths)
			if !slices.Equal(paths, c.want) || slices.Contains(keys, "") {
				t.Errorf("requests to %v with keys %q; want %v, each with the key", paths, keys, c.want)
			}
		})
	}
}

// TestExportFailuresAreLoggedNotSpammed: a collector that is not there is reported through
// Options.Logger, once and then once a minute, and Shutdown says what was lost.
func TestExportFailuresAreLoggedNotSpammed(t *testing.T) {
	dead := deadEndpoint(t)
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p, err := New(context.Background(), config.Telemetry{Endpoint: dead, AuditLogs: true}, Options{Getenv: env(nil), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, span := p.Tracer().Start(context.Background(), "x")
		span.End()
		start := time.Now()
		p.AuditExporter()(1, []byte(`{"seq":1,"hash":"h"}`), "h")
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("exporting an audit record to a dead collector took %v", d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = p.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "3 spans not exported") || !strings.Contains(err.Error(), "3 audit log records not exported") {
		t.Errorf("Shutdown = %v; want it to say the spans and records lost", err)
	}
	out := buf.String()
	if strings.Count(out, "telemetry: spans not exported") != 1 || strings.Count(out, "telemetry: audit log records not exported") != 1 ||
		!strings.Contains(out, "The state file keeps every audit record") {
		t.Errorf("log:\n%s\nwant one warning for each signal", out)
	}
}

func TestExportReporter(t *testing.T) {
	var buf syncBuffer
	now := time.Unix(0, 0)
	r := newReporter(slog.New(slog.NewTextHandler(&buf, nil)), "spans", "Calls are not affected.")
	r.now = func() time.Time { return now }
	fail := io.ErrUnexpectedEOF
	r.done(10, fail)
	now = now.Add(time.Second)
	r.done(10, fail) // within the minute: not logged
	if got := strings.Count(buf.String(), "level=WARN"); got != 1 {
		t.Errorf("%d warnings within a minute:\n%s", got, buf.String())
	}
	if err := r.err(); err == nil || !strings.Contains(err.Error(), "20 spans not exported") {
		t.Errorf("err = %v", err)
	}
	now = now.Add(reportEvery)
	r.done(5, fail)
	if got := strings.Count(buf.String(), "level=WARN"); got != 2 || !strings.Contains(buf.String(), "lost=25") {
		t.Errorf("after a minute:\n%s", buf.String())
	}
	r.done(5, nil)
	if !strings.Contains(buf.String(), "level=INFO msg=\"telemetry: spans are exported again\" lost=25") || r.err() != nil {
		t.Errorf("after recovery:\n%s\nerr %v", buf.String(), r.err())
	}
	r.done(5, nil)
	if got := strings.Count(buf.String(), "exported again"); got != 1 {
		t.Errorf("%d recovery lines", got)
	}
}

// syncBuffer is a bytes.Buffer that the exporters' goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
