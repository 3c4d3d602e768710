// Command tracedserver is a stdio MCP server for the end-to-end tests of tracing: an upstream
// that takes part in the caller's trace the way a robot's instrumented server would. On every
// tools/call it reads the W3C trace context from params._meta (MCP SEP-414), starts its own span
// as a child of it with the OpenTelemetry SDK, and exports that span over OTLP/HTTP before it
// answers, so a test that has its answer can look the span up in the trace backend.
//
// Flags: -otlp is the OTLP/HTTP base URL (such as http://127.0.0.1:4318; no export without it),
// -service the service.name of its spans, -record a file that gets one JSON line per call with
// the tool's name and the _meta it received, -name a marker for the process table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// lookupArgs are the arguments of the lookup tool; api_key is there so that a test can send a
// value the gateway's audit redacts.
type lookupArgs struct {
	Item   string `json:"item" jsonschema:"the item to look up"`
	APIKey string `json:"api_key,omitempty" jsonschema:"a key the lookup would need (never echoed)"`
}

// server holds what the handlers share.
type server struct {
	tracer trace.Tracer
	record string
	mu     sync.Mutex // serializes appends to record
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("tracedserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("otlp", "", "OTLP/HTTP base URL to export spans to, such as http://127.0.0.1:4318 (no export when empty)")
	service := fs.String("service", "traced-upstream", "service.name of the spans")
	record := fs.String("record", "", "file to append one JSON line per call to: the tool and the _meta received")
	fs.String("name", "", "a marker for the process table; not used otherwise")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	s := &server{tracer: noop.NewTracerProvider().Tracer("tracedserver"), record: *record}
	if *endpoint != "" {
		tp, err := newProvider(ctx, *endpoint, *service)
		if err != nil {
			fmt.Fprintf(stderr, "tracedserver: %v\n", err)
			return 1
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tp.Shutdown(sctx)
		}()
		s.tracer = tp.Tracer("tracedserver")
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "tracedserver", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "lookup",
		Description: "Looks an item up and says where it is.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.lookup)
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "tracedserver: %v\n", err)
		return 1
	}
	return 0
}

// newProvider exports every span synchronously when it ends: the span is at the collector
// before the call is answered.
func newProvider(ctx context.Context, endpoint, service string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res)), nil
}

// lookup answers with where the item is, in the gateway's result envelope (success and an
// observation), within a span that is the child of the trace context in the request's _meta (a
// root span when there is none, or it is malformed).
func (s *server) lookup(ctx context.Context, req *mcp.CallToolRequest, in lookupArgs) (*mcp.CallToolResult, any, error) {
	meta := req.Params.GetMeta()
	ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(meta))
	_, span := s.tracer.Start(ctx, "tools/call "+req.Params.Name,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.tool.name", req.Params.Name),
		))
	s.write(req.Params.Name, meta)
	span.End() // exported now (a synchronous exporter), before the answer
	b, _ := json.Marshal(map[string]any{"success": true, "observation": in.Item + " is on the shelf"})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}, nil, nil
}

// write appends the call's line to the record file, when there is one.
func (s *server) write(tool string, meta map[string]any) {
	if s.record == "" {
		return
	}
	line, _ := json.Marshal(map[string]any{"tool": tool, "meta": meta})
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.record, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
}

// metaCarrier reads trace context from a request's _meta.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string { s, _ := m[key].(string); return s }
func (m metaCarrier) Set(key, value string) { m[key] = value }
func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
