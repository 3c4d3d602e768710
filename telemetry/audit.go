package telemetry

import (
	"context"
	"time"

	segjson "github.com/segmentio/encoding/json"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"
)

// AuditEvent is the event name of an audit record exported as a log record.
const AuditEvent = "mcp_gateway.audit"

// auditFields are the fields of a stored audit record that its log record also carries as
// attributes or trace context, for a collector to route and index on; the body has them all.
type auditFields struct {
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Principal string    `json:"principal"`
	Server    string    `json:"server"`
	Tool      string    `json:"tool"`
	CallID    string    `json:"call_id"`
	Kind      string    `json:"kind"`
	Outcome   string    `json:"outcome"`
	Action    string    `json:"action"`
	TraceID   string    `json:"trace_id"`
	SpanID    string    `json:"span_id"`
}

// AuditExporter returns the function that exports an audit record as an OTLP log record, for
// the store's Options.OnAuditDurable, or nil when telemetry is off or telemetry.audit_logs is
// not set. It is called with each record once it is durable: seq is its sequence number, stored
// the record's JSON exactly as the state file keeps it (already redacted: never the call's
// original arguments) and digest its hash-chain hash.
//
// The log record's body is stored, as a string; its attributes are the sequence number
// (mcp_gateway.audit.seq), the digest (mcp_gateway.audit.digest), the record's type and, when
// set, its principal, server, tool (only a tool the catalog resolved: an unknown name is the
// caller's text, kept in the body alone), call id, outcome, failure kind (error.type) and operator
// action; its timestamp is the record's time, and its trace and span ids are the record's
// trace_id and span_id, which join it to the call's trace. A record that does not parse is
// exported all the same, with its body, sequence number and digest.
//
// The function does not block: the SDK's batch processor queues the record (dropping the
// oldest when the collector has not taken them for long) and exports it in the background.
func (p *Provider) AuditExporter() func(seq uint64, stored []byte, digest string) {
	if p == nil || p.audit == nil {
		return nil
	}
	logger := p.audit
	return func(seq uint64, stored []byte, digest string) {
		var f auditFields
		// What parses is used; the body is the record anyway. ZeroCopy: the strings share stored,
		// which is never changed.
		_, _ = segjson.Parse(stored, &f, segjson.ZeroCopy)
		// A record's tool is the name the caller asked for; only one the catalog resolved (the
		// record has its server) is a bounded name fit for an attribute. The body keeps the rest.
		tool := f.Tool
		if f.Server == "" {
			tool = ""
		}
		var rec otellog.Record
		rec.SetEventName(AuditEvent)
		rec.SetTimestamp(f.Time)
		rec.SetObservedTimestamp(time.Now())
		rec.SetSeverity(otellog.SeverityInfo)
		rec.SetSeverityText("INFO")
		rec.SetBody(attribute.StringValue(string(stored)))
		attrs := make([]attribute.KeyValue, 2, 10)
		attrs[0], attrs[1] = AttrAuditSeq.Int64(int64(seq)), AttrAuditDigest.String(digest)
		for _, a := range [...]struct {
			key attribute.Key
			val string
		}{
			{AttrAuditType, f.Type}, {AttrPrincipal, f.Principal}, {AttrServer, f.Server}, {AttrToolName, tool},
			{AttrCallID, f.CallID}, {AttrOutcome, f.Outcome}, {AttrErrorType, f.Kind}, {AttrAuditAction, f.Action},
		} {
			if a.val != "" {
				attrs = append(attrs, a.key.String(a.val))
			}
		}
		rec.AddAttributes(attrs...)
		ctx := context.Background()
		if sc := auditSpanContext(f.TraceID, f.SpanID); sc.IsValid() {
			ctx = trace.ContextWithSpanContext(ctx, sc)
		}
		logger.Emit(ctx, rec)
	}
}

// auditSpanContext is the span context a record's trace_id and span_id name; invalid when
// either is missing or not a valid id.
func auditSpanContext(traceID, spanID string) trace.SpanContext {
	if traceID == "" || spanID == "" {
		return trace.SpanContext{}
	}
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		return trace.SpanContext{}
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
}
