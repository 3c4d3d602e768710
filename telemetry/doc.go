// Package telemetry is the gateway's OpenTelemetry set-up: the tracer provider and its OTLP
// exporter, the propagation of W3C trace context through an MCP message's params._meta (SEP-414)
// and HTTP headers, the span helpers the call chain uses, and the log handler that puts trace and
// span ids on log lines.
//
// Telemetry is off unless an OTLP endpoint is configured (telemetry.endpoint, or
// OTEL_EXPORTER_OTLP_ENDPOINT). Off, [New] returns a nil *Provider: no exporter, no goroutine,
// and every method of a nil *Provider does nothing. The chain's step spans are made with [Child],
// which starts a span only under a recording one, so an untraced call pays one context lookup
// per step and nothing else.
//
// Nothing here puts an argument value, a result or a secret on a span: the attributes are names,
// ids and kinds (see attrs.go).
package telemetry
