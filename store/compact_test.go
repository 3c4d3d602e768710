package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCompactShrinksTheFileAndKeepsEveryBucket(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	lock := Lockout{Server: "arm", Tool: "arm__move", CallID: "c1", Reason: "deadline passed"}
	if err := s.PutLockout(lock); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := s.PutApproval(Approval{ID: "ap-1", Server: "arm", Tool: "arm__move", State: "pending", Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPin(Pin{Server: "arm", Tool: "move", Digest: "aaa", Pinned: now}); err != nil {
		t.Fatal(err)
	}
	fill(t, s, 5000)
	total, _, _, _ := auditBytes(t, s)
	prune(t, s, Retention{MaxBytes: total / 10})
	if err := s.BeginPhysical(Lockout{Server: "arm", Tool: "arm__move", CallID: "in-flight", At: now}); err != nil {
		t.Fatal(err)
	}
	_, _, _, kept := auditBytes(t, s)

	// Refused while the file is open.
	if _, err := Compact(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("Compact while a Store holds the file = %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	res, err := Compact(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if res.Before <= 0 || res.After != info.Size() || res.After > res.Before/2 {
		t.Errorf("Compact = %+v (file now %d bytes); want the file at most half its size after pruning 90%%", res, info.Size())
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".compact")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary copy is left behind: %v", err)
	}
	if _, err := os.Stat(ownerPath(filepath.Join(dir, FileName))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the owner record is left behind: %v", err)
	}

	s = openStore(t, dir, Options{})
	// The kept records, and the record of the lockout this Open recovered from the journal.
	if n, bad := s.AuditVerify(); bad != nil || n != uint64(kept)+1 {
		t.Errorf("AuditVerify after Compact = %d, %v; want %d records", n, bad, kept+1)
	}
	// The in-flight entry became a lockout at this Open, beside the one stored before.
	if l, ok := s.Lockout("arm"); !ok || l.Server != "arm" {
		t.Errorf("lockout after Compact: %+v, %v", l, ok)
	}
	if a, ok, err := s.GetApproval("ap-1"); !ok || err != nil || a.Server != "arm" {
		t.Errorf("approval after Compact: %+v, %v, %v", a, ok, err)
	}
	if p, ok, err := s.GetPin("arm", "move"); !ok || err != nil || p.Digest != "aaa" {
		t.Errorf("pin after Compact: %+v, %v, %v", p, ok, err)
	}
	if cp, ok, err := s.AuditPruned(); !ok || err != nil || cp.LastSeq == 0 {
		t.Errorf("the checkpoint in meta after Compact: %+v, %v, %v", cp, ok, err)
	}
	if _, err := s.Audit().AppendSync(t.Context(), Record{Type: RecordOperator, Action: "reload"}); err != nil {
		t.Fatal(err)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify after appending to the compacted file: %v", bad)
	}
}

func TestCompactWithoutAStateFile(t *testing.T) {
	if _, err := Compact(t.TempDir()); err == nil {
		t.Error("Compact of a directory without state.db succeeded")
	}
}
