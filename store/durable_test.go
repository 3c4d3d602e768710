package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// durableRecord is what Options.OnAuditDurable was called with, and whether the record was on
// the disk at that moment.
type durableRecord struct {
	seq    uint64
	stored []byte
	digest string
	onDisk bool
}

// onDisk reports whether the record seq with the bytes stored is on the disk: a frame of the
// write-ahead file (read from the file, not from the writer's memory) or a value in the audit
// bucket. It runs on the writer goroutine, so it reports with Error, never Fatal.
func onDisk(t *testing.T, s *Store, seq uint64, stored []byte) bool {
	wal, err := os.ReadFile(filepath.Join(s.dir, WALFileName))
	if err != nil {
		t.Error(err)
	}
	for off := 0; ; {
		f, ok := parseFrame(wal, off)
		if !ok {
			break
		}
		if f.seq == seq && bytes.Equal(f.value, stored) {
			return true
		}
		off += f.size
	}
	found := false
	if err := s.db.View(func(tx *bolt.Tx) error {
		found = bytes.Equal(tx.Bucket(bucketAudit).Get(seqKey(seq)), stored)
		return nil
	}); err != nil {
		t.Error(err)
	}
	return found
}

// TestAuditDurableHookSeesEveryRecordOnceInOrderOnceDurable appends records every way a record
// becomes durable — Append (batched without a waiter), AppendSync from many goroutines, a
// record larger than the write-ahead file (committed to state.db directly) — and checks that
// OnAuditDurable saw each exactly once, in sequence order, with its stored bytes and hash, and
// that each was on the disk when the hook saw it.
func TestAuditDurableHookSeesEveryRecordOnceInOrderOnceDurable(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []durableRecord
		s    *Store
	)
	ready := make(chan struct{})
	hook := func(seq uint64, stored []byte, digest string) {
		<-ready // s is set
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, durableRecord{seq: seq, stored: bytes.Clone(stored), digest: digest, onDisk: onDisk(t, s, seq, stored)})
	}
	var err error
	s, err = Open(t.TempDir(), Options{walSize: 64 << 10, OnAuditDurable: hook})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	defer s.Close()

	for i := range 40 {
		if !s.Audit().Append(callRecord("arm", "move", i)) {
			t.Fatalf("Append %d refused", i)
		}
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 15 {
				if _, err := s.Audit().AppendSync(context.Background(), callRecord("gripper", "close", 100*g+i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	big := callRecord("arm", "move", 999)
	big.Args = json.RawMessage(fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", 70<<10)))
	if _, err := s.Audit().AppendSync(context.Background(), big); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	var stored [][]byte
	if err := s.AuditExport(AuditFilter{}, func(raw []byte) error { stored = append(stored, raw); return nil }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stored) != 101 || len(seen) != len(stored) {
		t.Errorf("the hook saw %d records, the log holds %d; want 101 each", len(seen), len(stored))
	}
	for i, d := range seen[:min(len(seen), len(stored))] {
		if d.seq != uint64(i+1) {
			t.Fatalf("call %d of the hook was for record %d; want %d (every record once, in order)", i, d.seq, i+1)
		}
		if !bytes.Equal(d.stored, stored[i]) {
			t.Errorf("record %d: the hook got\n%.200s\nthe log stores\n%.200s", d.seq, d.stored, stored[i])
		}
		if claimed, actual, ok := storedHash(stored[i]); !ok || d.digest != claimed || claimed != actual {
			t.Errorf("record %d: the hook's digest %q, the stored hash %q (recomputed %q)", d.seq, d.digest, claimed, actual)
		}
		if !d.onDisk {
			t.Errorf("record %d was not on the disk when the hook saw it", d.seq)
		}
	}
}

// TestAuditDurableHookNotCalledForReplayedRecords: the records a previous process made durable,
// which Open moves from the write-ahead file, are not passed again, nor is a flush that commits
// nothing; the next new record is.
func TestAuditDurableHookNotCalledForReplayedRecords(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	release := movedThenHeld(t, s, 3)
	appendCalls(t, s, 3, 4, -1, "")
	db, wal := snapshot(t, dir)
	release()

	var calls []uint64
	c := openStore(t, restore(t, db, wal), Options{OnAuditDurable: func(seq uint64, _ []byte, _ string) { calls = append(calls, seq) }})
	if err := c.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, c); len(got) != 7 {
		t.Fatalf("after the restart %d records, want 7", len(got))
	}
	if _, err := c.Audit().AppendSync(context.Background(), callRecord("arm", "move", 8)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0] != 8 {
		t.Errorf("the hook was called for %v; want only the new record 8", calls)
	}
}
