package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// callRecord is a typical governed-call record.
func callRecord(server, tool string, i int) Record {
	return Record{
		Type:       RecordCall,
		Principal:  "planner",
		Session:    "sess-1",
		Server:     server,
		Tool:       server + "__" + tool,
		CallID:     fmt.Sprintf("call-%d", i),
		Args:       json.RawMessage(`{"target":"red_cup","speed":0.4,"pose":{"x":0.31,"y":-0.12,"z":0.05},"note":"[EMAIL]"}`),
		ArgsDigest: "9f2c3a7d1e4b5a6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c",
		Decision:   "allow",
		Outcome:    "success",
		RunID:      fmt.Sprintf("run-%d", i),
		DurationMS: 12.5,
	}
}

// auditSeqs lists the Seq of every record AuditScan yields for f.
func auditSeqs(t *testing.T, s *Store, f AuditFilter) []uint64 {
	t.Helper()
	var seqs []uint64
	if err := s.AuditScan(f, func(r Record) bool { seqs = append(seqs, r.Seq); return true }); err != nil {
		t.Fatal(err)
	}
	return seqs
}

func TestAppendSyncReturnsCommittedRecord(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	log := s.Audit()

	first, err := log.AppendSync(t.Context(), callRecord("arm", "move", 1))
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != 1 || first.Prev != "" || len(first.Hash) != 64 || !first.Time.Equal(now) {
		t.Errorf("first record: seq %d prev %q hash %q time %v", first.Seq, first.Prev, first.Hash, first.Time)
	}
	lock := Record{Type: RecordLockout, Server: "arm", Tool: "arm__move", CallID: "c9", Reason: "deadline passed"}
	second, err := log.AppendSync(t.Context(), lock)
	if err != nil {
		t.Fatal(err)
	}
	if second.Seq != 2 || second.Prev != first.Hash {
		t.Errorf("second record: seq %d prev %q, want 2 and %q", second.Seq, second.Prev, first.Hash)
	}
	// Committed means readable right away, exactly as returned.
	last, ok := s.AuditLast()
	if !ok || last.Hash != second.Hash || last.Seq != 2 || last.Reason != lock.Reason {
		t.Errorf("AuditLast = %+v, %v; want the record AppendSync returned", last, ok)
	}
}

func TestFlushCommitsEverythingAppended(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{AuditBatch: 50 * time.Millisecond})
	for i := range 700 {
		s.Audit().Append(callRecord("arm", "move", i))
	}
	if err := s.Audit().Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if last, ok := s.AuditLast(); !ok || last.Seq != 700 {
		t.Errorf("after Flush the last record is %d, want 700", last.Seq)
	}
	if n, bad := s.AuditVerify(); bad != nil || n != 700 {
		t.Errorf("AuditVerify = %d, %v", n, bad)
	}
}

func TestCloseFlushesPendingRecords(t *testing.T) {
	dir := t.TempDir()
	// A long batch wait: without Close flushing, records would still be queued.
	s, err := Open(dir, Options{AuditBatch: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		s.Audit().Append(callRecord("arm", "move", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	if n := len(auditSeqs(t, s, AuditFilter{})); n != 1000 {
		t.Errorf("after Close and reopen: %d records, want 1000", n)
	}
	if _, err := s.Audit().AppendSync(t.Context(), Record{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Audit().AppendSync(t.Context(), Record{}); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendSync after Close: %v, want ErrClosed", err)
	}
	if err := s.Audit().Flush(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	s.Audit().Append(Record{}) // must neither panic nor block
}

func TestAuditChainContinuesAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	var hashes []string
	for round := range 3 {
		s := openStore(t, dir, Options{})
		for i := range 10 {
			r, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", i))
			if err != nil {
				t.Fatal(err)
			}
			if want := uint64(round*10 + i + 1); r.Seq != want {
				t.Fatalf("round %d: seq %d, want %d", round, r.Seq, want)
			}
			if len(hashes) > 0 && r.Prev != hashes[len(hashes)-1] {
				t.Fatalf("record %d: prev %q does not link to %q", r.Seq, r.Prev, hashes[len(hashes)-1])
			}
			hashes = append(hashes, r.Hash)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s := openStore(t, dir, Options{})
	if n, bad := s.AuditVerify(); bad != nil || n != 30 {
		t.Errorf("AuditVerify = %d, %v; want 30, nil", n, bad)
	}
}

// writeAudit stores n call records in a new state file under dir and closes it.
func writeAudit(t *testing.T, dir string, n int) {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		s.Audit().Append(callRecord("arm", "move", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// tamper opens the closed state file with bbolt directly and changes the stored record seq.
func tamper(t *testing.T, dir string, seq uint64, change func(v []byte) []byte) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		v := b.Get(seqKey(seq))
		if v == nil {
			return fmt.Errorf("no record %d", seq)
		}
		changed := change(bytes.Clone(v))
		if changed == nil {
			return b.Delete(seqKey(seq))
		}
		return b.Put(seqKey(seq), changed)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerifyFindsTheChangedRecord(t *testing.T) {
	flipAt := func(pos func(v []byte) int) func([]byte) []byte {
		return func(v []byte) []byte { v[pos(v)] ^= 0x01; return v }
	}
	tests := []struct {
		name   string
		change func(v []byte) []byte
		reason string
	}{
		{"byte in the middle", flipAt(func(v []byte) int { return len(v) / 2 }), "do not match its hash"},
		{"digit of an argument", flipAt(func(v []byte) int { return bytes.Index(v, []byte("0.31")) + 3 }), "do not match its hash"},
		{"case of a field name (still parses the same)", func(v []byte) []byte {
			i := bytes.Index(v, []byte(`"server"`))
			v[i+1] = 'S'
			return v
		}, "do not match its hash"},
		{"digit of the stored hash", flipAt(func(v []byte) int { return len(v) - 10 }), "do not match its hash"},
		{"digit of the prev link", flipAt(func(v []byte) int { return bytes.Index(v, []byte(`"prev":"`)) + 12 }), "do not match its hash"},
		{"no longer JSON", flipAt(func(v []byte) int { return 0 }), "not valid JSON"},
		{"record deleted", func([]byte) []byte { return nil }, "missing"},
	}
	const n, broken = 50, 23
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeAudit(t, dir, n)
			tamper(t, dir, broken, tt.change)

			s := openStore(t, dir, Options{})
			checked, bad := s.AuditVerify()
			if bad == nil {
				t.Fatalf("AuditVerify found no break after changing record %d", broken)
			}
			if bad.Seq != broken || checked != broken-1 {
				t.Errorf("AuditVerify = %d, %v; want the break at %d after %d good records", checked, bad, broken, broken-1)
			}
			if !strings.Contains(bad.Reason, tt.reason) {
				t.Errorf("reason %q does not say %q", bad.Reason, tt.reason)
			}
			// The log stays usable: reads skip nothing that parses, and new records chain on.
			if _, err := s.Audit().AppendSync(t.Context(), Record{Type: RecordOperator, Action: "reload"}); err != nil {
				t.Fatal(err)
			}
			if got := len(auditSeqs(t, s, AuditFilter{AfterSeq: broken})); got != n-broken+1 {
				t.Errorf("%d records after the break, want %d", got, n-broken+1)
			}
		})
	}
}

func TestAuditVerifyDetectsALastRecordReplacedWithItsHashRecomputed(t *testing.T) {
	dir := t.TempDir()
	writeAudit(t, dir, 5)
	// Rewrite record 3 consistently (valid hash over new contents): record 4's link breaks.
	tamper(t, dir, 3, func(v []byte) []byte {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			t.Fatal(err)
		}
		r.Outcome, r.Hash = "policy_denied", ""
		canon, _ := json.Marshal(r)
		return sealJSON(canon, &r)
	})
	s := openStore(t, dir, Options{})
	if _, bad := s.AuditVerify(); bad == nil || bad.Seq != 4 || !strings.Contains(bad.Reason, "prev link") {
		t.Errorf("AuditVerify = %v; want a broken prev link at record 4", bad)
	}
}

func TestAuditScanFilters(t *testing.T) {
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time {
		return base.Add(time.Duration(tick.Load()) * time.Minute)
	}})
	log := s.Audit()
	// Records 1..3000: server arm for odd, base for even seqs; every 10th is a policy denial;
	// records after 2000 are an hour later. More than two read chunks, to cross chunk edges.
	for i := 1; i <= 3000; i++ {
		if i == 2001 {
			if err := log.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			tick.Store(60)
		}
		r := callRecord("base", "drive", i)
		if i%2 == 1 {
			r = callRecord("arm", "move", i)
		}
		if i%10 == 0 {
			r.Kind = "policy_denied"
		}
		log.Append(r)
	}
	if _, err := log.AppendSync(t.Context(), Record{Type: RecordOperator, Action: "unlock", Server: "arm"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		f     AuditFilter
		count int
		first uint64
		last  uint64
	}{
		{"all", AuditFilter{}, 3001, 1, 3001},
		{"server", AuditFilter{Server: "arm"}, 1501, 1, 3001},
		{"tool", AuditFilter{Tool: "base__drive"}, 1500, 2, 3000},
		{"kind", AuditFilter{Kind: "policy_denied"}, 300, 10, 3000},
		{"type", AuditFilter{Type: RecordOperator}, 1, 3001, 3001},
		{"since", AuditFilter{Since: base.Add(time.Hour)}, 1001, 2001, 3001},
		{"after seq", AuditFilter{AfterSeq: 2990}, 11, 2991, 3001},
		{"limit", AuditFilter{Limit: 5}, 5, 2997, 3001},
		{"limit with filter across chunks", AuditFilter{Kind: "policy_denied", Limit: 150}, 150, 1510, 3000},
		{"limit larger than the log", AuditFilter{Server: "base", Limit: 10000}, 1500, 2, 3000},
		{"limit and after seq", AuditFilter{AfterSeq: 2995, Limit: 100}, 6, 2996, 3001},
		{"principal", AuditFilter{Principal: "planner"}, 3000, 1, 3000},
		{"before seq", AuditFilter{BeforeSeq: 11}, 10, 1, 10},
		{"after and before seq", AuditFilter{AfterSeq: 5, BeforeSeq: 9}, 3, 6, 8},
		{"limit and before seq across chunks", AuditFilter{BeforeSeq: 2500, Limit: 1100}, 1100, 1400, 2499},
		{"limit, before seq and principal", AuditFilter{Principal: "planner", Kind: "policy_denied", BeforeSeq: 2000, Limit: 3}, 3, 1970, 1990},
		{"before seq past the end", AuditFilter{BeforeSeq: 99999, Limit: 2}, 2, 3000, 3001},
		{"nothing", AuditFilter{Server: "nobody"}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seqs := auditSeqs(t, s, tt.f)
			if len(seqs) != tt.count {
				t.Fatalf("%d records, want %d", len(seqs), tt.count)
			}
			if tt.count == 0 {
				return
			}
			if seqs[0] != tt.first || seqs[len(seqs)-1] != tt.last {
				t.Errorf("seqs %d..%d, want %d..%d", seqs[0], seqs[len(seqs)-1], tt.first, tt.last)
			}
			for i := 1; i < len(seqs); i++ {
				if seqs[i] <= seqs[i-1] {
					t.Fatalf("not in seq order: %d after %d", seqs[i], seqs[i-1])
				}
			}
		})
	}

	var seen int
	if err := s.AuditScan(AuditFilter{}, func(Record) bool { seen++; return seen < 7 }); err != nil || seen != 7 {
		t.Errorf("AuditScan did not stop when fn returned false: %d records, %v", seen, err)
	}
}

func TestAuditKeepsAwkwardContent(t *testing.T) {
	var commits, records atomic.Int64
	s := openStore(t, t.TempDir(), Options{OnAuditCommit: func(n int, _ time.Duration) {
		commits.Add(1)
		records.Add(int64(n))
	}})
	r := callRecord("arm", "move", 1)
	r.Args = json.RawMessage(`{"unterminated": `)
	r.DurationMS = math.NaN()
	r.Detail = map[string]any{"bad": math.Inf(1)}
	got, err := s.Audit().AppendSync(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if got.Args != nil {
		t.Errorf("invalid args stored as %s, want them left out", got.Args)
	}
	if got.DurationMS != 0 || got.Detail["detail_error"] == nil {
		t.Errorf("stored duration %v detail %v", got.DurationMS, got.Detail)
	}
	pretty := callRecord("arm", "move", 2)
	pretty.Args = json.RawMessage("{\n  \"a\": 1\n}")
	if got, err = s.Audit().AppendSync(t.Context(), pretty); err != nil || string(got.Args) != `{"a":1}` {
		t.Errorf("args stored as %s (%v), want compact JSON", got.Args, err)
	}
	if n, bad := s.AuditVerify(); bad != nil || n != 2 {
		t.Errorf("AuditVerify = %d, %v", n, bad)
	}
	if commits.Load() == 0 || records.Load() != 2 {
		t.Errorf("OnAuditCommit saw %d commits, %d records; want some, 2", commits.Load(), records.Load())
	}
}

func TestAppendSyncFromManyGoroutines(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{})
	var wg sync.WaitGroup
	seqs := make(chan uint64, 400)
	for g := range 40 {
		wg.Go(func() {
			for i := range 10 {
				r, err := s.Audit().AppendSync(context.Background(), callRecord("arm", "move", g*10+i))
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- r.Seq
			}
		})
	}
	wg.Wait()
	close(seqs)
	seen := make(map[uint64]bool)
	for seq := range seqs {
		if seen[seq] {
			t.Fatalf("seq %d returned twice", seq)
		}
		seen[seq] = true
	}
	if n, bad := s.AuditVerify(); bad != nil || n != 400 || len(seen) != 400 {
		t.Errorf("AuditVerify = %d, %v; %d distinct seqs", n, bad, len(seen))
	}
}

// BenchmarkAuditAppend measures sustained throughput: b.N records through Append, then Flush.
func BenchmarkAuditAppend(b *testing.B) {
	s := openStore(b, b.TempDir(), Options{})
	defer s.Close()
	r := callRecord("arm", "move", 1)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Audit().Append(r)
	}
	if err := s.Audit().Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAuditAppendSync measures one caller waiting for each record's commit: the latency of
// a lockout or approval record.
func BenchmarkAuditAppendSync(b *testing.B) {
	s := openStore(b, b.TempDir(), Options{})
	defer s.Close()
	r := callRecord("arm", "move", 1)
	b.ResetTimer()
	for range b.N {
		if _, err := s.Audit().AppendSync(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAuditAppendSyncParallel: many callers each waiting for their own commit, as when
// several sessions' calls finish at once; group commit shares the fsyncs between them.
func BenchmarkAuditAppendSyncParallel(b *testing.B) {
	var commits atomic.Int64
	s := openStore(b, b.TempDir(), Options{OnAuditCommit: func(int, time.Duration) { commits.Add(1) }})
	defer s.Close()
	r := callRecord("arm", "move", 1)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Audit().AppendSync(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.N)/float64(max(commits.Load(), 1)), "records/commit")
}
