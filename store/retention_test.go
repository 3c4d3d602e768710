package store

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// auditBytes sums the stored keys and values of the audit bucket, read with bbolt directly: the
// witness for max_bytes, independent of the pruner's own count.
func auditBytes(t *testing.T, s *Store) (total int64, first, last uint64, n int) {
	t.Helper()
	// Records durable in the write-ahead file are counted once they are in the bucket.
	if err := s.audit.movePass(); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
			total += int64(len(k) + len(v))
			seq := uint64(0)
			for _, b := range k {
				seq = seq<<8 | uint64(b)
			}
			if first == 0 {
				first = seq
			}
			last = seq
			n++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, first, last, n
}

// allHashes returns the Hash of every stored record by Seq.
func allHashes(t *testing.T, s *Store) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	if err := s.AuditScan(AuditFilter{}, func(r Record) bool { out[r.Seq] = r.Hash; return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// fill appends n typical call records and waits for them.
func fill(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		s.Audit().Append(callRecord("arm", "move", i))
	}
	if err := s.Audit().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// prune runs one pruning round in the test's goroutine, on a Store opened without retention.
func prune(t *testing.T, s *Store, ret Retention) *pruner {
	t.Helper()
	p := newPruner(s, ret)
	if err := p.round(); err != nil {
		t.Fatalf("pruning: %v", err)
	}
	return p
}

func TestRetentionPrunesToMaxBytes(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	if err := s.PutLockout(Lockout{Server: "arm", Tool: "arm__move", CallID: "c1", Reason: "deadline passed"}); err != nil {
		t.Fatal(err)
	}
	const n, maxBytes = 3000, 256 << 10
	fill(t, s, n)
	before, _, _, _ := auditBytes(t, s)
	if before < 4*maxBytes {
		t.Fatalf("only %d bytes written; the test needs several times max_bytes", before)
	}
	hashes := allHashes(t, s)

	prune(t, s, Retention{MaxBytes: maxBytes})

	after, first, last, kept := auditBytes(t, s)
	if after > maxBytes {
		t.Errorf("audit records take %d bytes after pruning, want at most max_bytes %d (before: %d)", after, maxBytes, before)
	}
	if after < maxBytes/2 {
		t.Errorf("audit records take %d bytes after pruning: far more was pruned than max_bytes %d needs", after, maxBytes)
	}
	cp, ok, err := s.AuditPruned()
	if err != nil || !ok {
		t.Fatalf("AuditPruned = %+v, %v, %v", cp, ok, err)
	}
	if first != cp.LastSeq+1 || first < 2 || cp.FirstSeq != 1 || cp.Count != cp.LastSeq {
		t.Errorf("first kept record %d, checkpoint %+v", first, cp)
	}
	if last != cp.CheckpointSeq || last <= n {
		t.Errorf("the last record is %d, the checkpoint %d; want the checkpoint appended after the %d records", last, cp.CheckpointSeq, n)
	}
	// The digest covers exactly the pruned records' hashes, in order.
	digest := ""
	for seq := uint64(1); seq <= cp.LastSeq; seq++ {
		digest = ChainDigest(digest, hashes[seq])
	}
	if cp.Digest != digest || cp.LastHash != hashes[cp.LastSeq] {
		t.Errorf("checkpoint digest %s, last hash %s; want %s and %s", cp.Digest, cp.LastHash, digest, hashes[cp.LastSeq])
	}
	checked, bad := s.AuditVerify()
	if bad != nil || checked != uint64(kept) {
		t.Errorf("AuditVerify after pruning = %d, %v; want %d records intact", checked, bad, kept)
	}
	if l := s.Lockouts(); len(l) != 1 || l[0].Server != "arm" {
		t.Errorf("lockouts after pruning: %+v", l)
	}
	// A checkpoint record reads like any other.
	var cps []Record
	if err := s.AuditScan(AuditFilter{Type: RecordCheckpoint}, func(r Record) bool { cps = append(cps, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(cps) == 0 || cps[len(cps)-1].Seq != cp.CheckpointSeq || !strings.Contains(cps[len(cps)-1].Reason, "max_bytes") {
		t.Errorf("checkpoint records: %+v", cps)
	}
}

func TestRetentionRunsInTheBackgroundAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	const maxBytes = 128 << 10
	s, err := Open(dir, Options{Retention: Retention{MaxBytes: maxBytes}})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 4 {
		fill(t, s, 500)
		deadline := time.Now().Add(10 * time.Second)
		for {
			total, _, _, _ := auditBytes(t, s)
			if total <= maxBytes {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the audit records still take %d bytes 10s after the writes; max_bytes %d", round, total, maxBytes)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify with the pruner running: %v", bad)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened without retention: the chain continues from the kept records.
	s = openStore(t, dir, Options{})
	fill(t, s, 10)
	if _, bad := s.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify after a restart: %v", bad)
	}
	if _, first, last, _ := auditBytes(t, s); first < 2 || last < 2000 {
		t.Errorf("records %d to %d after restart", first, last)
	}
}

func TestRetentionPrunesByAge(t *testing.T) {
	var clock atomic.Int64
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock.Store(t0.UnixNano())
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }})
	fill(t, s, 100)
	clock.Store(t0.Add(90 * time.Minute).UnixNano())
	fill(t, s, 50)
	clock.Store(t0.Add(2 * time.Hour).UnixNano())

	prune(t, s, Retention{MaxAge: time.Hour})

	var recs []Record
	if err := s.AuditScan(AuditFilter{}, func(r Record) bool { recs = append(recs, r); return true }); err != nil {
		t.Fatal(err)
	}
	cutoff := t0.Add(time.Hour)
	if len(recs) != 51 || recs[0].Seq != 101 {
		t.Fatalf("%d records kept from %d; want the 50 newer ones and the checkpoint", len(recs), recs[0].Seq)
	}
	for _, r := range recs {
		if r.Time.Before(cutoff) {
			t.Errorf("record %d from %s kept; max_age 1h at %s", r.Seq, r.Time, t0.Add(2*time.Hour))
		}
	}
	if last := recs[len(recs)-1]; last.Type != RecordCheckpoint || !strings.Contains(last.Reason, "max_age") {
		t.Errorf("last record %+v, want the checkpoint", last)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify after pruning by age: %v", bad)
	}
	// An idle log keeps its last record, even once everything is old: it anchors the chain.
	clock.Store(t0.Add(10 * time.Hour).UnixNano())
	prune(t, s, Retention{MaxAge: time.Hour})
	if _, first, last, n := auditBytes(t, s); n != 2 || first != last-1 {
		t.Errorf("after everything aged out: %d records, %d to %d; want the last record and the new checkpoint", n, first, last)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify after pruning everything old: %v", bad)
	}
}

// prunedLog writes 400 records, prunes about the oldest half, writes 20 more (so the checkpoint
// is in the middle of the kept records) and closes the file.
func prunedLog(t *testing.T, dir string) Checkpoint {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, 400)
	total, _, _, _ := auditBytes(t, s)
	prune(t, s, Retention{MaxBytes: total / 2})
	fill(t, s, 20)
	cp, ok, err := s.AuditPruned()
	if err != nil || !ok {
		t.Fatalf("AuditPruned = %v, %v", ok, err)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Fatalf("AuditVerify before tampering: %v", bad)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return cp
}

// tamperMeta changes the meta copy of the last checkpoint (nil deletes it).
func tamperMeta(t *testing.T, dir string, change func(cp *Checkpoint) bool) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		var cp Checkpoint
		if err := json.Unmarshal(meta.Get(keyPruned), &cp); err != nil {
			return err
		}
		if !change(&cp) {
			return meta.Delete(keyPruned)
		}
		v, _ := json.Marshal(cp)
		return meta.Put(keyPruned, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerifyAfterPruningDetectsTampering(t *testing.T) {
	type ctx struct {
		dir string
		cp  Checkpoint
	}
	tests := []struct {
		name   string
		change func(t *testing.T, c ctx)
		reason string
	}{
		{"a kept record changed", func(t *testing.T, c ctx) {
			tamper(t, c.dir, c.cp.LastSeq+5, flipMiddle)
		}, "do not match its hash"},
		{"the first kept record deleted", func(t *testing.T, c ctx) {
			tamper(t, c.dir, c.cp.LastSeq+1, func([]byte) []byte { return nil })
		}, "missing"},
		{"a record deleted from the middle", func(t *testing.T, c ctx) {
			tamper(t, c.dir, c.cp.LastSeq+30, func([]byte) []byte { return nil })
		}, "missing"},
		{"the checkpoint record deleted", func(t *testing.T, c ctx) {
			tamper(t, c.dir, c.cp.CheckpointSeq, func([]byte) []byte { return nil })
		}, "missing"},
		{"the checkpoint record changed", func(t *testing.T, c ctx) {
			tamper(t, c.dir, c.cp.CheckpointSeq, func(v []byte) []byte {
				return bytes.Replace(v, []byte(c.cp.LastHash), []byte(strings.Repeat("0", 64)), 1)
			})
		}, "do not match its hash"},
		{"the checkpoint record rewritten with its hash recomputed", func(t *testing.T, c ctx) {
			tamper(t, c.dir, c.cp.CheckpointSeq, func(v []byte) []byte {
				var r Record
				if err := json.Unmarshal(v, &r); err != nil {
					t.Fatal(err)
				}
				r.Detail["last_seq"], r.Hash = c.cp.LastSeq+10, ""
				canon, _ := json.Marshal(r)
				return sealJSON(canon, &r)
			})
		}, "one of them was changed"},
		{"more records removed and the meta copy moved on", func(t *testing.T, c ctx) {
			for seq := c.cp.LastSeq + 1; seq <= c.cp.LastSeq+10; seq++ {
				tamper(t, c.dir, seq, func([]byte) []byte { return nil })
			}
			tamperMeta(t, c.dir, func(cp *Checkpoint) bool { cp.LastSeq += 10; return true })
		}, "prev link"},
		{"the meta copy's last hash changed", func(t *testing.T, c ctx) {
			tamperMeta(t, c.dir, func(cp *Checkpoint) bool { cp.LastHash = strings.Repeat("a", 64); return true })
		}, "last pruned record"},
		{"the meta copy points at another record", func(t *testing.T, c ctx) {
			tamperMeta(t, c.dir, func(cp *Checkpoint) bool { cp.CheckpointSeq -= 3; return true })
		}, "not a checkpoint record"},
		{"the meta copy deleted", func(t *testing.T, c ctx) {
			tamperMeta(t, c.dir, func(*Checkpoint) bool { return false })
		}, "missing"},
		{"the meta copy says less was pruned", func(t *testing.T, c ctx) {
			tamperMeta(t, c.dir, func(cp *Checkpoint) bool { cp.LastSeq -= 5; return true })
		}, "missing"},
		{"the meta copy says more was pruned", func(t *testing.T, c ctx) {
			tamperMeta(t, c.dir, func(cp *Checkpoint) bool { cp.LastSeq += 5; return true })
		}, "record is stored although"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cp := prunedLog(t, dir)
			tt.change(t, ctx{dir, cp})
			s := openStore(t, dir, Options{})
			_, bad := s.AuditVerify()
			if bad == nil {
				t.Fatal("AuditVerify found no break")
			}
			if !strings.Contains(bad.Reason, tt.reason) {
				t.Errorf("AuditVerify = %v; want a reason saying %q", bad, tt.reason)
			}
		})
	}
}

func TestPrunerNeverRemovesARecordThatDoesNotVerify(t *testing.T) {
	dir := t.TempDir()
	writeAudit(t, dir, 300)
	tamper(t, dir, 40, flipMiddle)
	s := openStore(t, dir, Options{})
	p := newPruner(s, Retention{MaxBytes: MinPruneTestBytes})
	err := p.round()
	if _, ok := err.(*damagedError); !ok {
		t.Fatalf("round = %v; want the damaged record reported", err)
	}
	if _, first, _, _ := auditBytes(t, s); first > 40 {
		t.Errorf("the pruner removed records up to %d, past the damaged record 40", first-1)
	}
	if _, bad := s.AuditVerify(); bad == nil || bad.Seq != 40 {
		t.Errorf("AuditVerify = %v; the damage at record 40 must still be reported", bad)
	}
	if err := p.round(); err == nil {
		t.Error("a halted pruner ran again")
	}
}

// MinPruneTestBytes is a bound far below what the test logs hold.
const MinPruneTestBytes = 16 << 10

// flipMiddle changes one bit in the middle of a stored record.
func flipMiddle(v []byte) []byte { v[len(v)/2] ^= 0x01; return v }

func TestACheckpointNeverAppliedIsHarmless(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	fill(t, s, 300)
	// The first half of a prune: the checkpoint is appended, then the process dies before the
	// batch is deleted.
	p := newPruner(s, Retention{MaxBytes: MinPruneTestBytes})
	p.loaded = true
	if err := p.count(); err != nil {
		t.Fatal(err)
	}
	b, err := p.plan()
	if err != nil || b.n == 0 {
		t.Fatalf("plan = %+v, %v", b, err)
	}
	if _, err := s.Audit().AppendSync(t.Context(), Record{Type: RecordCheckpoint, Action: "prune", Detail: b.next.detail()}); err != nil {
		t.Fatal(err)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Fatalf("AuditVerify with a checkpoint never applied: %v", bad)
	}
	// The next start prunes again, from the same first record.
	prune(t, s, Retention{MaxBytes: MinPruneTestBytes})
	if cp, _, _ := s.AuditPruned(); cp.FirstSeq != 1 || cp.LastSeq < b.to {
		t.Errorf("after the retry: %+v", cp)
	}
	if _, bad := s.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify after the retry: %v", bad)
	}
}
