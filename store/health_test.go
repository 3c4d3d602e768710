package store

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// smallDisk mounts a tmpfs of size bytes (root only) and returns its path; it skips the test
// where mounting is not permitted.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root; CI runs as root): %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", dir).Run(); err != nil {
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillDisk writes into path until the filesystem refuses more.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

func TestJournalEntryGoesWithItsRecord(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	for _, id := range []string{"c1", "c2"} {
		if err := s.BeginPhysical(Lockout{Server: "arm", Tool: "arm__pick", CallID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Audit().AppendSync(context.Background(), Record{Type: RecordCall, Server: "arm", CallID: "c1", EndsCall: "c1"}); err != nil {
		t.Fatal(err)
	}
	// The record is durable in the write-ahead file; its journal entry goes in the transaction
	// that moves it into the audit bucket.
	if err := s.audit.movePass(); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketInFlight).ForEach(func(k, _ []byte) error { left = append(left, string(k)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0] != "c2" {
		t.Fatalf("journal after c1's record: %v, want only c2", left)
	}
	// The journal id is not part of the stored, hashed record.
	if err := s.AuditScan(AuditFilter{}, func(r Record) bool {
		if r.EndsCall != "" {
			t.Errorf("record %d came back with EndsCall %q", r.Seq, r.EndsCall)
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Fatal(bad)
	}
}

func TestTooLittleFreeSpaceIsUnavailable(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{MinFreeBytes: 1 << 62})
	err := s.Available()
	var ue *UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "the disk is full") || !strings.Contains(err.Error(), "audit.min_free_bytes") {
		t.Fatalf("Available = %v", err)
	}
	if strings.Contains(err.Error(), s.Path()) {
		t.Errorf("the reason callers read names the state file's path: %v", err)
	}
	// A lockout is in force at once even though it cannot be written, and says so.
	err = s.PutLockout(Lockout{Server: "arm", Tool: "arm__pick", CallID: "c1"})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutLockout on an unavailable store = %v", err)
	}
	if _, ok := s.Lockout("arm"); !ok {
		t.Fatal("the lockout is not in force in memory")
	}
	if err := s.BeginPhysical(Lockout{Server: "arm", CallID: "c2"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("BeginPhysical on an unavailable store = %v", err)
	}
}

// TestFullDiskFailsClosedAndRecovers fills the state file's real filesystem: writes fail, the
// store says why, no wait outlasts the commit timeout, a lockout holds in memory, and once space
// is freed the store takes writes again by itself and the lockout reaches the disk.
func TestFullDiskFailsClosedAndRecovers(t *testing.T) {
	dir := smallDisk(t, "1m")
	s, err := Open(dir, Options{CommitTimeout: 300 * time.Millisecond, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	filler := filepath.Join(dir, "fill")
	fillDisk(t, filler)

	// bbolt reuses free pages, so the first writes may still fit; large records soon do not.
	big := Record{Type: RecordCall, Server: "arm", Reason: strings.Repeat("x", 64<<10)}
	var failed error
	for i := 0; i < 200 && failed == nil; i++ {
		start := time.Now()
		_, failed = s.Audit().AppendSync(context.Background(), big)
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("AppendSync on a full disk took %s; every wait must be bounded", took)
		}
	}
	if failed == nil {
		t.Fatal("200 records of 64 KiB fit on a full 1 MiB disk")
	}
	if !errors.Is(failed, ErrUnavailable) {
		t.Fatalf("AppendSync error = %v, want one wrapping ErrUnavailable", failed)
	}
	avail := s.Available()
	if avail == nil || !strings.Contains(avail.Error(), "the disk is full") {
		t.Fatalf("Available on a full disk = %v", avail)
	}
	start := time.Now()
	if err := s.PutLockout(Lockout{Server: "arm", Tool: "arm__pick", CallID: "c9"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutLockout on a full disk = %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("PutLockout on a full disk took %s", took)
	}
	if _, ok := s.Lockout("arm"); !ok {
		t.Fatal("the lockout is not in force")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Available() != nil || s.hasPendingLockouts() {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after space was freed: Available = %v, pending lockouts %v", s.Available(), s.hasPendingLockouts())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Audit().AppendSync(context.Background(), Record{Type: RecordCall, Server: "arm"}); err != nil {
		t.Fatalf("a record after space was freed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The witness is the file: reopened, it has the lockout and a chain that verifies.
	s2 := openStore(t, dir, Options{MinFreeBytes: -1})
	if _, ok := s2.Lockout("arm"); !ok {
		t.Fatal("the lockout held in memory during the full disk is not in the state file")
	}
	if _, bad := s2.AuditVerify(); bad != nil {
		t.Fatal(bad)
	}
}

// TestJournalLeftByADeadGatewayIsAudited: a journal entry found at Open becomes a lockout and a
// lockout record in the audit log, so the log says what the robot may have done.
func TestJournalLeftByADeadGatewayIsAudited(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	if err := s.BeginPhysical(Lockout{Server: "arm", Tool: "arm__pick", CallID: "c7", Principal: "planner"}); err != nil {
		t.Fatal(err)
	}
	s.Close() // the call's record never came: as after kill -9
	s2 := openStore(t, dir, Options{})
	var got []Record
	s2.AuditScan(AuditFilter{Type: RecordLockout}, func(r Record) bool { got = append(got, r); return true })
	if len(got) != 1 || got[0].CallID != "c7" || got[0].Server != "arm" || got[0].Principal != "planner" || got[0].Detail["via"] != "crash journal" {
		t.Fatalf("lockout records after the restart: %+v", got)
	}
	if _, ok := s2.Lockout("arm"); !ok {
		t.Fatal("no lockout")
	}
}

// TestQueuedRecordsAreBoundedInMemory: Append refuses records beyond the queue's memory bound
// instead of holding them, whatever their number.
func TestQueuedRecordsAreBoundedInMemory(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	a := s.audit
	a.queued.Store(auditQueueBytes) // as if the disk had refused everything queued so far
	if a.Append(Record{Type: RecordCall, Args: []byte(`{"x":1}`)}) {
		t.Fatal("Append queued a record past the memory bound")
	}
	a.queued.Store(0)
	if !a.Append(Record{Type: RecordCall}) {
		t.Fatal("Append refused a record with room in the queue")
	}
}
