package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Scope is the instrumentation scope of the gateway's spans.
const Scope = "github.com/mcp-gateway/mcp-gateway"

// Provider is the process's tracing set-up, and with telemetry.audit_logs the export of audit
// records as OTLP log records. A nil *Provider is telemetry off: every method is safe to call
// and does nothing.
type Provider struct {
	tp             *sdktrace.TracerProvider
	tracer         trace.Tracer
	spans          *exportReporter
	forwardBaggage bool
	endpoint       string // for messages; never carries credentials (config refuses them)
	protocol       string

	// lp and audit export audit records (audit.go); nil without telemetry.audit_logs.
	lp    *sdklog.LoggerProvider
	audit otellog.Logger
	logs  *exportReporter
}

// Options are what New needs beyond the telemetry section.
type Options struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or telemetry.resource says otherwise
	// (gateway.name).
	ServiceName string
	// Version is service.version.
	Version string
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// Logger receives the exporters' errors (an unreachable collector): the first failure, then
	// one line a minute while they go on, then the recovery. Nil discards them.
	Logger *slog.Logger

	// spanExporter and logExporter, when set (tests), replace the OTLP exporters.
	spanExporter sdktrace.SpanExporter
	logExporter  sdklog.Exporter
}

// Environment variables New reads itself; the OTLP exporters read the rest of the OTEL_EXPORTER_OTLP_*
// family (headers, timeouts, certificates) where the file says nothing.
const (
	envDisabled        = "OTEL_SDK_DISABLED"
	envEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envLogsEndpoint    = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
	envProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesSampler   = "OTEL_TRACES_SAMPLER"
	envResourceAttrs   = "OTEL_RESOURCE_ATTRIBUTES"
	envServiceName     = "OTEL_SERVICE_NAME"
	defaultServiceName = "mcp-gateway"
)

// Settings is what telemetry resolves to from the file and the environment: what New builds and
// what `mcp-gateway check` can show.
type Settings struct {
	// On is false when no endpoint is configured anywhere or OTEL_SDK_DISABLED is true.
	On bool
	// Endpoint is the configured endpoint ("" when it comes from the environment, where the
	// exporter reads it); EndpointFromEnv says which variable holds it then.
	Endpoint        string
	EndpointFromEnv string
	Protocol        string
}

// Resolve reads what turns telemetry on and how it exports. It reads no secret.
func Resolve(cfg config.Telemetry, getenv func(string) string) (Settings, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var s Settings
	if strings.EqualFold(strings.TrimSpace(getenv(envDisabled)), "true") {
		return s, nil
	}
	switch {
	case cfg.Endpoint != "":
		s.Endpoint = cfg.Endpoint
	case getenv(envTracesEndpoint) != "":
		s.EndpointFromEnv = envTracesEndpoint
	case getenv(envEndpoint) != "":
		s.EndpointFromEnv = envEndpoint
	default:
		return s, nil
	}
	s.On = true
	s.Protocol = cfg.Protocol
	for _, name := range []string{envTracesProtocol, envProtocol} {
		if s.Protocol == "" {
			s.Protocol = strings.TrimSpace(getenv(name))
			if s.Protocol != "" && s.Protocol != config.TelemetryHTTP && s.Protocol != config.TelemetryGRPC {
				return s, fmt.Errorf("%s is %q; the gateway exports OTLP as %s or %s", name, s.Protocol, config.TelemetryHTTP, config.TelemetryGRPC)
			}
		}
	}
	if s.Protocol == "" {
		s.Protocol = config.TelemetryHTTP
	}
	return s, nil
}

// New builds the tracer provider the telemetry section and the OTEL_* environment describe, or
// returns nil (telemetry off) when neither names an endpoint. Exporting is asynchronous and never
// blocks a call: spans are batched, and a collector that cannot be reached loses spans, not calls.
// With telemetry.audit_logs it also builds the logger provider that exports audit records
// ([Provider.AuditExporter]) to the same endpoint.
func New(ctx context.Context, cfg config.Telemetry, opts Options) (*Provider, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	s, err := Resolve(cfg, getenv)
	if err != nil || !s.On {
		return nil, err
	}
	headers := map[string]string{}
	for name, env := range cfg.HeadersEnv {
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("telemetry.headers_env.%s names the environment variable %s, which is not set (or empty): "+
				"set it to the header's value, or remove %s from headers_env", name, env, name)
		}
		headers[name] = v
	}
	res, err := newResource(ctx, cfg, opts, getenv)
	if err != nil {
		return nil, err
	}
	p := &Provider{forwardBaggage: cfg.ForwardBaggage, protocol: s.Protocol, endpoint: s.Endpoint}
	if p.endpoint == "" {
		p.endpoint = "$" + s.EndpointFromEnv
	}
	spanExp := opts.spanExporter
	if spanExp == nil {
		if spanExp, err = newExporter(ctx, s, headers); err != nil {
			return nil, fmt.Errorf("the OTLP span exporter for %s: %w", p.endpoint, err)
		}
	}
	p.spans = newReporter(opts.Logger, "spans", "Calls are not affected.")
	tpOpts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithRawSpanLimits(spanLimits()),
		sdktrace.WithBatcher(reportingSpans{spanExp, p.spans}, sdktrace.WithBatchTimeout(time.Second)),
	}
	switch {
	case cfg.SampleRatio != nil:
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*cfg.SampleRatio))))
	case getenv(envTracesSampler) != "":
		// The SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG itself.
	default:
		tpOpts = append(tpOpts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	}
	p.tp = sdktrace.NewTracerProvider(tpOpts...)
	p.tracer = p.tp.Tracer(Scope, trace.WithInstrumentationVersion(opts.Version))
	if cfg.AuditLogs {
		logExp := opts.logExporter
		if logExp == nil {
			if logExp, err = newLogExporter(ctx, s, headers, getenv); err != nil {
				_ = p.tp.Shutdown(ctx)
				return nil, fmt.Errorf("the OTLP log exporter for %s (telemetry.audit_logs): %w", p.endpoint, err)
			}
		}
		p.logs = newReporter(opts.Logger, "audit log records", "The state file keeps every audit record; only their copies in the collector are missing.")
		p.lp = sdklog.NewLoggerProvider(
			sdklog.WithResource(res),
			sdklog.WithAttributeValueLengthLimit(maxAttributeLength),
			// The exporter function sets each key once: the SDK need not look for duplicates.
			sdklog.WithAllowKeyDuplication(),
			sdklog.WithProcessor(sdklog.NewBatchProcessor(reportingLogs{logExp, p.logs})),
		)
		p.audit = p.lp.Logger(Scope, otellog.WithInstrumentationVersion(opts.Version))
	}
	return p, nil
}

// maxAttributeLength bounds every attribute value on a span or a log record, in bytes. The
// gateway's own attributes are names, ids and kinds well under it; what a client chose (a
// JSON-RPC id, a tracestate) is cut there rather than kept in memory until export.
const maxAttributeLength = 256

// spanLimits are the SDK's defaults (and OTEL_SPAN_* / OTEL_ATTRIBUTE_* where set) with
// attribute values bounded at maxAttributeLength unless the environment bounds them already.
func spanLimits() sdktrace.SpanLimits {
	l := sdktrace.NewSpanLimits()
	if l.AttributeValueLengthLimit < 0 || l.AttributeValueLengthLimit > maxAttributeLength {
		l.AttributeValueLengthLimit = maxAttributeLength
	}
	return l
}

// newExporter makes the OTLP span exporter. With the endpoint from the environment the exporter
// reads it (and the rest of OTEL_EXPORTER_OTLP_*) itself.
func newExporter(ctx context.Context, s Settings, headers map[string]string) (*otlptrace.Exporter, error) {
	switch s.Protocol {
	case config.TelemetryGRPC:
		var o []otlptracegrpc.Option
		if s.Endpoint != "" {
			o = append(o, otlptracegrpc.WithEndpointURL(s.Endpoint))
		}
		if len(headers) > 0 {
			o = append(o, otlptracegrpc.WithHeaders(headers))
		}
		return otlptracegrpc.New(ctx, o...)
	default:
		var o []otlptracehttp.Option
		if s.Endpoint != "" {
			o = append(o, otlptracehttp.WithEndpointURL(SignalURL(s.Endpoint, "traces")))
		}
		if len(headers) > 0 {
			o = append(o, otlptracehttp.WithHeaders(headers))
		}
		return otlptracehttp.New(ctx, o...)
	}
}

// newLogExporter makes the OTLP log exporter of audit records: same endpoint, protocol and
// headers as the spans'. With the endpoint in OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) the exporter reads it itself; with only
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the log records go to the same collector (logsURL).
func newLogExporter(ctx context.Context, s Settings, headers map[string]string, getenv func(string) string) (sdklog.Exporter, error) {
	endpoint := s.Endpoint
	if endpoint == "" && s.EndpointFromEnv == envTracesEndpoint && getenv(envLogsEndpoint) == "" {
		endpoint = strings.TrimSpace(getenv(envTracesEndpoint))
		if s.Protocol != config.TelemetryGRPC {
			endpoint = logsURL(endpoint)
		}
	}
	switch s.Protocol {
	case config.TelemetryGRPC:
		var o []otlploggrpc.Option
		if endpoint != "" {
			o = append(o, otlploggrpc.WithEndpointURL(endpoint))
		}
		if len(headers) > 0 {
			o = append(o, otlploggrpc.WithHeaders(headers))
		}
		return otlploggrpc.New(ctx, o...)
	default:
		var o []otlploghttp.Option
		if endpoint != "" {
			o = append(o, otlploghttp.WithEndpointURL(SignalURL(endpoint, "logs")))
		}
		if len(headers) > 0 {
			o = append(o, otlploghttp.WithHeaders(headers))
		}
		return otlploghttp.New(ctx, o...)
	}
}

// logsURL is the OTLP/HTTP logs URL beside a traces URL (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used
// as it is): its path's /v1/traces becomes /v1/logs, and a path without it gets /v1/logs added.
func logsURL(tracesURL string) string {
	u, err := url.Parse(tracesURL)
	if err != nil {
		return tracesURL
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1/traces")
	u.RawPath = ""
	return SignalURL(u.String(), "logs")
}

// SignalURL is the OTLP/HTTP URL of one signal ("traces", "logs") under a base endpoint, as
// OTEL_EXPORTER_OTLP_ENDPOINT is read: /v1/<signal> is appended to its path unless the path
// already ends with it.
func SignalURL(base, signal string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	suffix := "/v1/" + signal
	p := strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(p, suffix) {
		u.Path = p + suffix
	}
	return u.String()
}

// newResource is the resource of every span: service.name (gateway.name), service.version, then
// what OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME say, then telemetry.resource; later wins.
func newResource(ctx context.Context, cfg config.Telemetry, opts Options, getenv func(string) string) (*resource.Resource, error) {
	name := opts.ServiceName
	if name == "" {
		name = defaultServiceName
	}
	base := []attribute.KeyValue{attribute.String("service.name", name)}
	if opts.Version != "" {
		base = append(base, attribute.String("service.version", opts.Version))
	}
	var fromEnv []attribute.KeyValue
	if v := getenv(envResourceAttrs); v != "" {
		for _, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k, val = strings.TrimSpace(k), strings.TrimSpace(val)
			if !ok || k == "" {
				continue // the SDK's own reading skips malformed pairs too
			}
			if dec, err := url.QueryUnescape(val); err == nil {
				val = dec
			}
			fromEnv = append(fromEnv, attribute.String(k, val))
		}
	}
	if v := strings.TrimSpace(getenv(envServiceName)); v != "" {
		fromEnv = append(fromEnv, attribute.String("service.name", v))
	}
	var fromFile []attribute.KeyValue
	for k, v := range cfg.Resource {
		fromFile = append(fromFile, attribute.String(k, v))
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(base...),
		resource.WithAttributes(fromEnv...),
		resource.WithAttributes(fromFile...),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	return res, nil
}

// On reports whether telemetry is on.
func (p *Provider) On() bool { return p != nil }

// Describe is a one-line account of where spans (and audit records) go, for the start-up log
// ("" when off).
func (p *Provider) Describe() string {
	if p == nil {
		return ""
	}
	what := "traces"
	if p.lp != nil {
		what = "traces and audit records (as logs)"
	}
	return fmt.Sprintf("exporting %s over OTLP %s to %s", what, p.protocol, p.endpoint)
}

// Tracer is the gateway's tracer; a no-op one when telemetry is off.
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return noopTracer
	}
	return p.tracer
}

// TracerProvider is the SDK's provider, nil when telemetry is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.tp
}

// Shutdown flushes the spans and audit log records still batched and stops the exporters,
// within ctx. It reports what it could not flush: an error when the last export of either
// failed (a collector that is not there) or ctx ended first. Call it after the state file is
// closed, so that the audit records written while closing are exported too.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	// In parallel: a collector that is not there costs each the whole of ctx.
	var (
		wg            sync.WaitGroup
		lpErr, logErr error
	)
	if p.lp != nil {
		wg.Go(func() {
			lpErr = p.lp.Shutdown(ctx)
			logErr = p.logs.err()
		})
	}
	tpErr := p.tp.Shutdown(ctx)
	wg.Wait()
	return errors.Join(tpErr, p.spans.err(), lpErr, logErr)
}

// Child starts a span under the one ctx holds when that one is recording (the call is traced and
// sampled); otherwise it returns ctx and its non-recording span, without allocating. Steps of the
// chain use it, so they need no handle of the provider.
func Child(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer(Scope).Start(ctx, name, opts...)
}

// Traced reports whether ctx holds a recording span: whether attributes set now are kept.
func Traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Fail marks span as failed with kind (a failure kind of the chain, or an error class): the
// error.type attribute, an Error status whose description is kind, and an event named "refused"
// carrying the kind. The reason is not put on the span: it may quote what a caller sent (a
// schema error names the offending value); the audit record, found by its trace_id, has it.
func Fail(span trace.Span, kind string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(AttrErrorType.String(kind))
	span.SetStatus(codes.Error, kind)
	span.AddEvent("refused", trace.WithAttributes(AttrErrorType.String(kind)))
}

// IDs returns the trace and span ids of the span ctx holds, hex-encoded, or "" and "" when it
// holds no valid span context.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// SampledTraceID returns the trace id of ctx's span when it is sampled (it will be exported, so
// an exemplar pointing at it finds a trace), or "".
func SampledTraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

var noopTracer = noop.NewTracerProvider().Tracer(Scope)
