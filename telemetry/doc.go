// Package telemetry is the gateway's OpenTelemetry set-up: the tracer provider and its OTLP
// exporter, the propagation of W3C trace context through an MCP message's params._meta (SEP-414)
// and HTTP headers, the span helpers the call chain uses, the log handler that puts trace and
// span ids on log lines, and the optional export of audit records as OTLP log records.
//
// Telemetry is off unless an OTLP endpoint is configured (telemetry.endpoint, or
// OTEL_EXPORTER_OTLP_ENDPOINT). Off, [New] returns a nil *Provider: no exporter, no goroutine,
// and every method of a nil *Provider does nothing. The chain's step spans are made with [Child],
// which starts a span only under a recording one, so an untraced call pays one context lookup
// per step and nothing else.
//
// Nothing here puts an argument value, a result or a secret on a span: the attributes are names,
// ids and kinds (see attrs.go). Trace context a client sends is a hint: a traceparent that is
// not one by the W3C Trace Context rules is ignored, never an error.
//
// # Export failures
//
// Spans and log records are exported in batches in the background; a call never waits for the
// collector. A collector that cannot be reached loses exports, not calls: the first failure is
// logged at WARN through Options.Logger, then once a minute while they go on (with how many
// items were lost), and once at INFO when exports succeed again. [Provider.Shutdown] flushes
// both and says what it could not.
//
// # Audit records as log records
//
// With telemetry.audit_logs (and telemetry on), every audit record is also exported as an OTLP
// log record, to the same endpoint, protocol and headers as the spans (over HTTP, to /v1/logs).
// The store calls [Provider.AuditExporter]'s function with each record once it is durable
// (store.Options.OnAuditDurable): the log record's body is the record's JSON exactly as the state
// file keeps it — already redacted, never the call's original arguments — and its attributes
// are the sequence number (mcp_gateway.audit.seq), the hash-chain digest
// (mcp_gateway.audit.digest) and the record's type, principal, server, tool, call id, outcome,
// failure kind (error.type) and operator action; its trace and span ids are the record's
// trace_id and span_id, so a backend joins it to the call's trace. The event name is
// mcp_gateway.audit.
//
// The state file stays the source of truth. The hand-off to the logs SDK's batch processor does
// not block the store's writer (a few microseconds a record); a collector that does not take
// the records for long makes the processor drop the oldest queued ones, and a crash loses what
// was queued: the collector's copy may have gaps, the state file has none, and the sequence
// numbers and digests show where the gaps are and let the copy be checked against the chain.
// Records a previous run made durable are not exported again at start.
package telemetry
