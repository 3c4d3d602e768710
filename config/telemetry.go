package config

import (
	"slices"
	"strings"
)

// Telemetry configures distributed tracing (OpenTelemetry, exported over OTLP) and, optionally,
// the export of audit records as OTLP log records (docs/operations.md, "Tracing"). With no
// endpoint here and none in OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
// telemetry is off: no exporter is made and a call pays nothing for it.
type Telemetry struct {
	// Endpoint is the OTLP endpoint: a base URL such as http://127.0.0.1:4318 for http/protobuf
	// (the signal's path, /v1/traces, is added) or http://127.0.0.1:4317 for grpc. http:// sends
	// in the clear, https:// over TLS.
	Endpoint string `yaml:"endpoint" json:"endpoint,omitempty" jsonschema:"description=OTLP endpoint such as http://127.0.0.1:4318 (http/protobuf) or http://127.0.0.1:4317 (grpc); empty: OTEL_EXPORTER_OTLP_ENDPOINT\\, else telemetry is off."`
	// Protocol is "http/protobuf" (default) or "grpc".
	Protocol string `yaml:"protocol" json:"protocol,omitempty" jsonschema:"enum=http/protobuf,enum=grpc,description=OTLP transport (default http/protobuf\\, or OTEL_EXPORTER_OTLP_PROTOCOL)."`
	// HeadersEnv maps an OTLP request header (an API key of a hosted backend) to the
	// environment variable holding its value; values are never in the file.
	HeadersEnv map[string]string `yaml:"headers_env" json:"headers_env,omitempty" jsonschema:"description=OTLP request header name to the environment variable holding its value."`
	// SampleRatio is the share of calls that start a new trace and are sampled (0 to 1). A call
	// whose client sent a trace context follows the client's sampling decision. Nil means the
	// default, 1 (or OTEL_TRACES_SAMPLER_ARG).
	SampleRatio *float64 `yaml:"sample_ratio" json:"sample_ratio,omitempty" jsonschema:"minimum=0,maximum=1,description=Share of new traces sampled (default 1); a call with a client's trace context follows the client's decision."`
	// Resource holds resource attributes added to every span, such as deployment.environment;
	// service.name is gateway.name unless OTEL_SERVICE_NAME or this map says otherwise.
	Resource map[string]string `yaml:"resource" json:"resource,omitempty" jsonschema:"description=Resource attributes of every span such as deployment.environment: lab-3; service.name defaults to gateway.name."`
	// ForwardBaggage passes the client's W3C baggage on to upstream servers. Off by default:
	// baggage can carry what a client should not tell a robot.
	ForwardBaggage bool `yaml:"forward_baggage" json:"forward_baggage,omitempty" jsonschema:"description=Pass the client's W3C baggage on to upstream servers (default false: only traceparent and tracestate are sent)."`
	// AuditLogs exports every audit record as an OTLP log record too, to the same endpoint (over
	// HTTP, /v1/logs): the same redacted content, with the hash-chain digest as an attribute.
	// It needs telemetry on; the state file stays the source of truth, and a collector that is
	// not there loses log records, never audit records (package telemetry).
	AuditLogs bool `yaml:"audit_logs" json:"audit_logs,omitempty" jsonschema:"description=Also export every audit record as an OTLP log record (the redacted record\\, its hash-chain digest as an attribute); default false."`
}

// Telemetry protocols.
const (
	TelemetryHTTP = "http/protobuf"
	TelemetryGRPC = "grpc"
)

// checkTelemetry checks the telemetry section. The OTEL_* environment is read when the gateway
// starts (telemetry.New), not here: check describes the file.
func (d *decoder) checkTelemetry(t *Telemetry) {
	src := d.src[t]
	if src == nil {
		return
	}
	loc := location{path: "telemetry"}
	if src.valid("endpoint") && t.Endpoint != "" {
		if msg := checkTelemetryEndpoint(t.Endpoint); msg != "" {
			d.errorf(src.valueLine("endpoint"), loc.field("endpoint"), "%s", msg)
		}
	}
	if src.has("protocol") {
		d.enum(src, loc, "protocol", &t.Protocol, "", TelemetryHTTP, TelemetryGRPC)
	}
	if src.valid("sample_ratio") && t.SampleRatio != nil && !(*t.SampleRatio >= 0 && *t.SampleRatio <= 1) { // NaN too
		d.errorf(src.valueLine("sample_ratio"), loc.field("sample_ratio"),
			"must be between 0 and 1, got %s", formatNumber(*t.SampleRatio))
	}
	if headers := d.src[&t.HeadersEnv]; headers != nil {
		hloc := loc.field("headers_env")
		seen := map[string]string{} // canonical name -> the name as written
		names := make([]string, 0, len(headers.keys))
		for name := range headers.keys {
			names = append(names, name)
		}
		// In the file's order, so that the second of two equal names is the one reported.
		slices.SortFunc(names, func(a, b string) int { return headers.keys[a].line - headers.keys[b].line })
		for _, name := range names {
			e := headers.keys[name]
			if !headerNameRE.MatchString(name) {
				d.errorf(e.line, hloc, "%q is not an HTTP header name", truncate(name))
			}
			canon := strings.ToLower(name)
			if other, dup := seen[canon]; dup {
				d.errorf(e.line, hloc, "%q and %q are the same HTTP header (names are case-insensitive); keep one", truncate(other), truncate(name))
			}
			seen[canon] = name
			if canon == "content-type" || canon == "content-length" || canon == "content-encoding" {
				d.errorf(e.line, hloc, "%q is set by the OTLP exporter itself; remove it", truncate(name))
			}
			if v := t.HeadersEnv[name]; e.ok && !envNameRE.MatchString(v) {
				d.errorf(e.value.Line, hloc.field(name), "must name the environment variable holding the header's value (letters, digits and _, not starting with a digit), never the value itself")
			}
		}
	}
	if res := d.src[&t.Resource]; res != nil {
		for name, e := range res.keys {
			if strings.TrimSpace(name) == "" {
				d.errorf(e.line, loc.field("resource"), "an attribute name must not be empty")
			}
		}
	}
}

// checkTelemetryEndpoint returns what is wrong with an OTLP endpoint, or "". Like checkURL it
// never repeats the value.
func checkTelemetryEndpoint(raw string) string {
	u, problem := webURL(raw, "must start with http:// (no TLS) or https://, such as http://127.0.0.1:4318",
		"must not carry credentials; name the environment variable holding them in headers_env")
	switch {
	case problem != "":
		return problem
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		// A query is where a backend's key would go; it is not repeated, and headers_env is
		// the place for one.
		return "must not have a query or a fragment; a backend's key goes in headers_env, such as {x-api-key: OTLP_API_KEY}"
	}
	return ""
}
