package store

import (
	"bytes"
	"strings"
	"testing"
)

// A record's trace and span ids are stored under trace_id and span_id and covered by its hash
// like every other field; a record without them is stored without the keys, exactly as before
// the fields existed, and a log mixing both verifies. An export shows them, a scan reads them
// back, and a filter on the trace id finds the record.
func TestTraceIDsAreStoredInTheChain(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", 1)); err != nil {
		t.Fatal(err)
	}
	traced := callRecord("arm", "move", 2)
	traced.TraceID, traced.SpanID = traceID, spanID
	if _, err := s.Audit().AppendSync(t.Context(), traced); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", 3)); err != nil {
		t.Fatal(err)
	}
	if checked, bad := s.AuditVerify(); bad != nil || checked != 3 {
		t.Fatalf("AuditVerify = %d, %v; want 3 records intact", checked, bad)
	}

	var lines [][]byte
	if err := s.AuditExport(AuditFilter{}, func(raw []byte) error { lines = append(lines, bytes.Clone(raw)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 {
		t.Fatalf("exported %d records, want 3", len(lines))
	}
	for _, i := range []int{0, 2} {
		if bytes.Contains(lines[i], []byte("trace_id")) || bytes.Contains(lines[i], []byte("span_id")) {
			t.Errorf("a record without trace context is stored with trace keys: %s", lines[i])
		}
	}
	want := `"call_id":"call-2","trace_id":"` + traceID + `","span_id":"` + spanID + `"`
	if !strings.Contains(string(lines[1]), want) {
		t.Errorf("traced record exported as %s; want it to hold %s", lines[1], want)
	}

	var found []Record
	if err := s.AuditScan(AuditFilter{TraceID: traceID}, func(r Record) bool { found = append(found, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].CallID != "call-2" || found[0].TraceID != traceID || found[0].SpanID != spanID {
		t.Fatalf("records of trace %s: %+v", traceID, found)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The ids are part of what the hash covers: one changed digit breaks the chain there.
	tamper(t, dir, 2, func(v []byte) []byte {
		return bytes.Replace(v, []byte(traceID), []byte("5"+traceID[1:]), 1)
	})
	s = openStore(t, dir, Options{ReadOnly: true})
	if _, bad := s.AuditVerify(); bad == nil || bad.Seq != 2 {
		t.Fatalf("AuditVerify after the trace id was changed = %v; want a break at record 2", bad)
	}
}
