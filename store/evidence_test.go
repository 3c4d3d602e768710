package store

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A record's model evidence is stored under "model" and covered by its hash like every other
// field; a record without it is stored without the key, exactly as before the field existed, and
// a log mixing both verifies. An id too long is cut at seal time without changing the caller's
// value.
func TestModelEvidenceIsStoredInTheChain(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", 1)); err != nil {
		t.Fatal(err)
	}
	ev := &ModelEvidence{RequestID: "req_abc123", Model: "gpt-4o-mini-2024-07-18", InvocationID: "agent-1-step1-req1"}
	withEvidence := callRecord("arm", "move", 2)
	withEvidence.Model = ev
	stored, err := s.Audit().AppendSync(t.Context(), withEvidence)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Model == nil || !reflect.DeepEqual(*stored.Model, *ev) {
		t.Fatalf("stored evidence %+v", stored.Model)
	}
	long := &ModelEvidence{RequestID: strings.Repeat("r", MaxTextBytes+10), Model: "m"}
	longRec := callRecord("arm", "move", 3)
	longRec.Model = long
	stored, err = s.Audit().AppendSync(t.Context(), longRec)
	if err != nil {
		t.Fatal(err)
	}
	if len(long.RequestID) != MaxTextBytes+10 {
		t.Errorf("sealing changed the caller's evidence")
	}
	if len(stored.Model.RequestID) > MaxTextBytes+200 || !strings.Contains(stored.Model.RequestID, "[truncated:") {
		t.Errorf("a request id of %d bytes stored as %d bytes", len(long.RequestID), len(stored.Model.RequestID))
	}
	if checked, bad := s.AuditVerify(); bad != nil || checked != 3 {
		t.Fatalf("AuditVerify = %d, %v; want 3 records intact", checked, bad)
	}

	var lines [][]byte
	if err := s.AuditExport(AuditFilter{}, func(raw []byte) error { lines = append(lines, bytes.Clone(raw)); return nil }); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(lines[0], []byte(`"model"`)) {
		t.Errorf("a record without evidence is stored with a model key: %s", lines[0])
	}
	want := `"model":{"request_id":"req_abc123","model":"gpt-4o-mini-2024-07-18","invocation_id":"agent-1-step1-req1"}`
	if !strings.Contains(string(lines[1]), want) {
		t.Errorf("record exported as %s; want it to hold %s", lines[1], want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The evidence is part of what the hash covers: a changed request id breaks the chain there.
	tamper(t, dir, 2, func(v []byte) []byte {
		return bytes.Replace(v, []byte("req_abc123"), []byte("req_abc124"), 1)
	})
	s = openStore(t, dir, Options{ReadOnly: true})
	if _, bad := s.AuditVerify(); bad == nil || bad.Seq != 2 {
		t.Fatalf("AuditVerify after the request id was changed = %v; want a break at record 2", bad)
	}
}

// The provider's warnings are kept in the record's model evidence, under "warnings", and bounded
// like its ids: each cut to MaxTextBytes, and at most MaxEvidenceWarnings of them, the last one
// counting those left out, without changing the caller's value.
func TestModelEvidenceKeepsWarningsBounded(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	defer s.Close()
	ev := &ModelEvidence{RequestID: "req_1", Warnings: []string{"temperature ignored by this model", "refused by claude-a, answered by fallback claude-b"}}
	rec := callRecord("arm", "move", 1)
	rec.Model = ev
	stored, err := s.Audit().AppendSync(t.Context(), rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored.Model.Warnings, ev.Warnings) {
		t.Fatalf("stored warnings %q, want %q", stored.Model.Warnings, ev.Warnings)
	}

	many := make([]string, MaxEvidenceWarnings+5)
	for i := range many {
		many[i] = fmt.Sprintf("warning %d", i)
	}
	many[0] = strings.Repeat("w", MaxTextBytes+10)
	rec = callRecord("arm", "move", 2)
	rec.Model = &ModelEvidence{RequestID: "req_2", Warnings: many}
	stored, err = s.Audit().AppendSync(t.Context(), rec)
	if err != nil {
		t.Fatal(err)
	}
	got := stored.Model.Warnings
	if len(got) != MaxEvidenceWarnings || got[len(got)-1] != "[truncated: 6 more warnings]" ||
		got[1] != "warning 1" || len(got[0]) > MaxTextBytes+200 || !strings.Contains(got[0], "[truncated:") {
		t.Errorf("stored %d warnings, the first %d bytes long, the last %q", len(got), len(got[0]), got[len(got)-1])
	}
	if len(many) != MaxEvidenceWarnings+5 || len(many[0]) != MaxTextBytes+10 {
		t.Errorf("sealing changed the caller's warnings")
	}
	var lines [][]byte
	if err := s.AuditExport(AuditFilter{}, func(raw []byte) error { lines = append(lines, bytes.Clone(raw)); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := `"warnings":["temperature ignored by this model","refused by claude-a, answered by fallback claude-b"]`; !strings.Contains(string(lines[0]), want) {
		t.Errorf("record exported as %s; want it to hold %s", lines[0], want)
	}
	if checked, bad := s.AuditVerify(); bad != nil || checked != 2 {
		t.Fatalf("AuditVerify = %d, %v; want 2 records intact", checked, bad)
	}
}
