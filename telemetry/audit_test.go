package telemetry

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// memoryLogs is an exporter of the logs SDK that keeps what it is given.
type memoryLogs struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (m *memoryLogs) Export(_ context.Context, records []sdklog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range records {
		m.records = append(m.records, records[i].Clone())
	}
	return nil
}

func (m *memoryLogs) Shutdown(context.Context) error   { return nil }
func (m *memoryLogs) ForceFlush(context.Context) error { return nil }

func (m *memoryLogs) got() []sdklog.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.records)
}

// newAuditProvider is a provider with telemetry.audit_logs whose log records are kept in logs.
func newAuditProvider(t *testing.T, logs *memoryLogs) *Provider {
	t.Helper()
	p, err := New(context.Background(), config.Telemetry{Endpoint: deadEndpoint(t), AuditLogs: true},
		Options{ServiceName: "cell-3", Version: "1.2.3", Getenv: env(nil), logExporter: logs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func logAttrs(r sdklog.Record) map[string]attribute.Value {
	attrs := map[string]attribute.Value{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		attrs[string(kv.Key)] = kv.Value
		return true
	})
	return attrs
}

// TestAuditExporterSendsTheRecordAsStored: the log record's body is the stored record, byte for
// byte; its attributes are the sequence number, the digest and the fields worth indexing; its
// trace context is the record's trace_id and span_id; Shutdown flushes it.
func TestAuditExporterSendsTheRecordAsStored(t *testing.T) {
	logs := &memoryLogs{}
	p := newAuditProvider(t, logs)
	if d := p.Describe(); !strings.Contains(d, "audit records") {
		t.Errorf("Describe = %q", d)
	}
	export := p.AuditExporter()
	if export == nil {
		t.Fatal("AuditExporter is nil with audit_logs on")
	}
	call := `{"seq":41,"time":"2026-03-01T12:00:00.25Z","type":"call","principal":"planner","session":"s-1","server":"arm","tool":"arm__move",` +
		`"call_id":"c-9","args":{"target":"[REDACTED]"},"kind":"mcp_policy_denied","outcome":"refused","reason":"deny rule",` +
		`"trace_id":"` + clientTraceID + `","span_id":"` + clientSpanID + `","prev":"aa","hash":"d1"}`
	operator := `{"seq":42,"time":"2026-03-01T12:00:01Z","type":"operator","principal":"alice","action":"unlock","server":"arm","prev":"d1","hash":"d2"}`
	broken := `{"seq":43,"trace_id":"` + strings.ToUpper(clientTraceID) + `","span_id":"` + clientSpanID + `", not json`
	export(41, []byte(call), "d1")
	export(42, []byte(operator), "d2")
	export(43, []byte(broken), "d3")
	shutdown(t, p)

	got := logs.got()
	if len(got) != 3 {
		t.Fatalf("%d log records exported, want 3", len(got))
	}
	for i, body := range []string{call, operator, broken} {
		r := got[i]
		if r.Body().String() != body || r.Body().Type() != attribute.STRING {
			t.Errorf("record %d: body %q, want the stored record %q", i, r.Body().String(), body)
		}
		if r.EventName() != AuditEvent || r.Severity() != otellog.SeverityInfo || r.ObservedTimestamp().IsZero() {
			t.Errorf("record %d: event %q severity %v observed %v", i, r.EventName(), r.Severity(), r.ObservedTimestamp())
		}
		if r.InstrumentationScope().Name != Scope || r.InstrumentationScope().Version != "1.2.3" {
			t.Errorf("record %d: scope %+v", i, r.InstrumentationScope())
		}
		if name, _ := r.Resource().Set().Value("service.name"); name.AsString() != "cell-3" {
			t.Errorf("record %d: resource %v", i, r.Resource())
		}
	}

	want := map[string]string{
		"mcp_gateway.audit.seq": "41", "mcp_gateway.audit.digest": "d1", "mcp_gateway.audit.type": "call",
		"mcp_gateway.principal": "planner", "mcp_gateway.server": "arm", "gen_ai.tool.name": "arm__move",
		"mcp_gateway.call.id": "c-9", "mcp_gateway.outcome": "refused", "error.type": "mcp_policy_denied",
	}
	attrs := logAttrs(got[0])
	for k, v := range want {
		if attrs[k].String() != v {
			t.Errorf("call record: attribute %s = %q, want %q", k, attrs[k].String(), v)
		}
	}
	if attrs["mcp_gateway.audit.seq"].Type() != attribute.INT64 || len(attrs) != len(want) {
		t.Errorf("call record: attributes %v; want exactly %v (never the arguments or the reason)", attrs, want)
	}
	if got[0].TraceID().String() != clientTraceID || got[0].SpanID().String() != clientSpanID {
		t.Errorf("call record: trace %s span %s, want the record's", got[0].TraceID(), got[0].SpanID())
	}
	if want := time.Date(2026, 3, 1, 12, 0, 0, 250e6, time.UTC); !got[0].Timestamp().Equal(want) {
		t.Errorf("call record: timestamp %v, want the record's time %v", got[0].Timestamp(), want)
	}

	attrs = logAttrs(got[1])
	if attrs["mcp_gateway.audit.action"].String() != "unlock" || attrs["mcp_gateway.principal"].String() != "alice" || got[1].TraceID().IsValid() {
		t.Errorf("operator record: attributes %v, trace %s", attrs, got[1].TraceID())
	}
	// A record that does not parse is exported all the same, and no trace id is made up.
	attrs = logAttrs(got[2])
	if attrs["mcp_gateway.audit.seq"].AsInt64() != 43 || attrs["mcp_gateway.audit.digest"].String() != "d3" || got[2].TraceID().IsValid() {
		t.Errorf("unparsable record: attributes %v, trace %s", attrs, got[2].TraceID())
	}
}

// TestAuditLogsOffMakesNoLoggerProvider: without telemetry.audit_logs there is no logger
// provider, no exporter function and no goroutine of the logs SDK; with it, there is.
func TestAuditLogsOffMakesNoLoggerProvider(t *testing.T) {
	p, _ := newTestProvider(t, config.Telemetry{})
	if p.lp != nil || p.AuditExporter() != nil {
		t.Fatal("audit_logs off made a logger provider")
	}
	sdkLogGoroutines := func() int {
		n := 0
		for _, g := range otelGoroutines() {
			if strings.Contains(g, "go.opentelemetry.io/otel/sdk/log.") {
				n++
			}
		}
		return n
	}
	if n := sdkLogGoroutines(); n != 0 {
		t.Errorf("audit_logs off: %d goroutines of the logs SDK", n)
	}
	on := newAuditProvider(t, &memoryLogs{})
	if on.lp == nil || on.AuditExporter() == nil || sdkLogGoroutines() == 0 {
		t.Error("audit_logs on: no logger provider, exporter function or batch processor")
	}
	shutdown(t, on)
}

// TestAuditRecordsOfTheStoreAreExported wires the exporter to a real store, as serve does:
// every record the store makes durable is exported once, in order, with the bytes the state
// file keeps (the redacted arguments, never the original ones) and the record's hash.
func TestAuditRecordsOfTheStoreAreExported(t *testing.T) {
	logs := &memoryLogs{}
	p := newAuditProvider(t, logs)
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{OnAuditDurable: p.AuditExporter()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		rec := store.Record{Type: store.RecordCall, Principal: "planner", Server: "arm", Tool: "arm__move", CallID: "c-" + string(rune('a'+i)),
			Args: json.RawMessage(`{"target":"[REDACTED]"}`), ArgsDigest: "digest-of-the-original", Outcome: "success"}
		if i%2 == 0 {
			if !st.Audit().Append(rec) {
				t.Fatal("Append refused")
			}
		} else if _, err := st.Audit().AppendSync(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(dir, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var stored []string
	var hashes []string
	if err := ro.AuditExport(store.AuditFilter{}, func(raw []byte) error {
		stored = append(stored, string(raw))
		var r store.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		hashes = append(hashes, r.Hash)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	shutdown(t, p)

	got := logs.got()
	if len(got) != len(stored) || len(stored) != 20 {
		t.Fatalf("%d log records for %d stored records, want 20", len(got), len(stored))
	}
	for i, r := range got {
		attrs := logAttrs(r)
		if r.Body().String() != stored[i] || attrs["mcp_gateway.audit.seq"].AsInt64() != int64(i+1) || attrs["mcp_gateway.audit.digest"].String() != hashes[i] {
			t.Errorf("log record %d: seq %v digest %v body %q; want record %d as stored, hash %s", i, attrs["mcp_gateway.audit.seq"], attrs["mcp_gateway.audit.digest"], r.Body().String(), i+1, hashes[i])
		}
	}
}

// discardLogs is an exporter of the logs SDK that drops what it is given.
type discardLogs struct{}

func (discardLogs) Export(context.Context, []sdklog.Record) error { return nil }
func (discardLogs) Shutdown(context.Context) error                { return nil }
func (discardLogs) ForceFlush(context.Context) error              { return nil }

// BenchmarkAuditExporter is what exporting one typical record costs the store's writer
// goroutine, which calls it for every durable record.
func BenchmarkAuditExporter(b *testing.B) {
	p, err := New(context.Background(), config.Telemetry{Endpoint: deadEndpoint(b), AuditLogs: true},
		Options{Getenv: env(nil), logExporter: discardLogs{}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	export := p.AuditExporter()
	rec := []byte(`{"seq":41,"time":"2026-03-01T12:00:00.25Z","type":"call","principal":"planner","session":"sess-1","server":"arm",` +
		`"tool":"arm__move","call_id":"call-41","args":{"target":"red_cup","speed":0.4,"pose":{"x":0.31,"y":-0.12,"z":0.05},"note":"[EMAIL]"},` +
		`"args_digest":"9f2c3a7d1e4b5a6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c","decision":"allow","outcome":"success",` +
		`"run_id":"run-41","duration_ms":12.5,"trace_id":"` + clientTraceID + `","span_id":"` + clientSpanID + `",` +
		`"prev":"0d4f6c2a9b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a392817065f4e","hash":"1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809"}`)
	b.ReportAllocs()
	for b.Loop() {
		export(41, rec, "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809")
	}
}

// A record of a call to a tool the catalog does not know has the caller's text as its tool and
// no server: that name stays in the body alone, never an attribute a collector indexes, and a
// long value a client sent is cut to maxAttributeLength on what is an attribute.
func TestAuditExporterKeepsCallersTextOutOfAttributes(t *testing.T) {
	logs := &memoryLogs{}
	p := newAuditProvider(t, logs)
	export := p.AuditExporter()
	unknown := `{"seq":7,"time":"2026-03-01T12:00:00Z","type":"call","principal":"planner","tool":"UNKNOWN_SECRET_7777",` +
		`"call_id":"c-1","kind":"unknown_tool","outcome":"unknown_tool","prev":"aa","hash":"d7"}`
	long := `{"seq":8,"time":"2026-03-01T12:00:00Z","type":"call","principal":"planner","server":"arm","tool":"arm__move",` +
		`"call_id":"` + strings.Repeat("c", 4096) + `","outcome":"ok","prev":"d7","hash":"d8"}`
	export(7, []byte(unknown), "d7")
	export(8, []byte(long), "d8")
	shutdown(t, p)
	got := logs.got()
	if len(got) != 2 {
		t.Fatalf("%d log records exported, want 2", len(got))
	}
	for k, v := range logAttrs(got[0]) {
		if strings.Contains(v.String(), "UNKNOWN_SECRET") {
			t.Errorf("attribute %s = %q carries the unknown tool's name", k, v)
		}
	}
	if got[0].Body().String() != unknown {
		t.Errorf("body %q, want the stored record", got[0].Body().String())
	}
	if id := logAttrs(got[1])["mcp_gateway.call.id"].AsString(); len(id) != maxAttributeLength {
		t.Errorf("a 4096-byte call id is %d bytes as an attribute, want it cut to %d", len(id), maxAttributeLength)
	}
}
