package store

import (
	"bytes"
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
	if stored.Model == nil || *stored.Model != *ev {
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
