package store

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logBuffer is a logger's output, safe to read while the store logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func captureLog() (*slog.Logger, *logBuffer) {
	b := &logBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// killedWithRecordsInWAL is a copy of a state directory taken while the store was open (a
// kill): records 1 to 3 are in state.db, 4 to 7 only in the write-ahead file.
func killedWithRecordsInWAL(t *testing.T) (db, wal []byte) {
	t.Helper()
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	t.Cleanup(movedThenHeld(t, s, 3))
	appendCalls(t, s, 3, 4, -1, "")
	return snapshot(t, dir)
}

// walDamage is one way the write-ahead file of killedWithRecordsInWAL can be damaged.
type walDamage struct {
	name   string
	damage func(wal []byte) []byte // nil: the file is deleted
	found  string                  // WALGap.Found
	after  uint64                  // the last record left
	says   []string                // in the message
}

// restore is a state directory of db and wal with the damage done to (a copy of) wal, and the
// damaged file (nil: deleted).
func (d walDamage) restore(t *testing.T, db, wal []byte) (dir string, damaged []byte) {
	if d.damage != nil {
		damaged = d.damage(bytes.Clone(wal))
	}
	return restore(t, db, damaged), damaged
}

func walDamages(t *testing.T, wal []byte) []walDamage {
	offs := frames(wal)
	if len(offs) != 5 {
		t.Fatalf("%d frames in the write-ahead file, want 4", len(offs)-1)
	}
	last := offs[3]
	return []walDamage{
		{"bit_flipped_in_last_frame", func(w []byte) []byte { w[last+walHeader+20] ^= 0x04; return w }, WALTornFrame, 6,
			[]string{fmt.Sprintf("frame that does not check at byte %d (record 7)", last), "either a crash", "or damage to the file"}},
		{"last_frame_seq_flipped", func(w []byte) []byte { w[last+23] ^= 0x10; return w }, WALTornFrame, 6,
			[]string{fmt.Sprintf("at byte %d (it should be record 7; its header says 23)", last)}},
		{"truncated_mid_frame", func(w []byte) []byte { return w[:last+walHeader+40] }, WALShort, 6,
			[]string{"shorter than the", fmt.Sprintf("does not check at byte %d", last), "truncated"}},
		{"truncated_at_frame_boundary", func(w []byte) []byte { return w[:last] }, WALShort, 6,
			[]string{fmt.Sprintf("is %d bytes, shorter than the %d bytes", last, walMinSize)}},
		{"truncated_to_zero", func(w []byte) []byte { return w[:0] }, WALShort, 3,
			[]string{"is 0 bytes", "after record 3,"}},
		{"deleted", nil, WALMissing, 3, []string{"is missing", "removed or replaced", "after record 3,"}},
	}
}

// TestWALDamagedTailIsRecordedAsGap: after a kill, each kind of damage to the end of the
// write-ahead file is logged at ERROR with what was found and what it may have lost, put on
// the audit chain as an audit_gap record that AuditVerify names, and not called a record that
// was never acknowledged. A clean stop afterwards leaves no new gap.
func TestWALDamagedTailIsRecordedAsGap(t *testing.T) {
	db, wal := killedWithRecordsInWAL(t)
	for _, d := range walDamages(t, wal) {
		t.Run(d.name, func(t *testing.T) {
			dir, _ := d.restore(t, db, wal)
			logger, logs := captureLog()
			s, err := Open(dir, Options{Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if !strings.Contains(out, "level=ERROR") || strings.Contains(out, "never acknowledged and is dropped") {
				t.Errorf("log:\n%s\nwant an ERROR, and no claim the record was never acknowledged", out)
			}
			for _, want := range append(d.says, "keep a copy of the state directory", "Check the disk") {
				if !strings.Contains(out, want) {
					t.Errorf("log:\n%s\nwant it to say %q", out, want)
				}
			}
			g := s.WALGap()
			if g == nil || g.Found != d.found || g.AfterSeq != d.after || g.AtMostBytes <= 0 {
				t.Fatalf("WALGap = %+v; want %s after record %d", g, d.found, d.after)
			}
			var gapRecs []Record
			if err := s.AuditScan(AuditFilter{Type: RecordAuditGap}, func(r Record) bool { gapRecs = append(gapRecs, r); return true }); err != nil {
				t.Fatal(err)
			}
			if len(gapRecs) != 1 || gapRecs[0].Seq != d.after+1 || gapRecs[0].Kind != d.found || gapRecs[0].Reason != g.Message ||
				gapRecs[0].Detail["after_seq"] != float64(d.after) {
				t.Fatalf("gap records %+v; want one %s at %d", gapRecs, d.found, d.after+1)
			}
			checked, bad, gaps := s.AuditVerifyGaps()
			if bad != nil || checked != d.after+1 || len(gaps) != 1 || gaps[0].Seq != d.after+1 || gaps[0].Reason != g.Message {
				t.Fatalf("AuditVerifyGaps = %d, %v, %+v; want the chain intact with one gap at %d", checked, bad, gaps, d.after+1)
			}
			if n, bad := s.AuditVerify(); bad != nil || n != checked {
				t.Fatalf("AuditVerify = %d, %v", n, bad)
			}
			if _, err := s.Audit().AppendSync(context.Background(), callRecord("arm", "move", 99)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// Stopped cleanly: the next start finds nothing to report.
			logger, logs = captureLog()
			c := openStore(t, dir, Options{Logger: logger})
			if c.WALGap() != nil || strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("after a clean stop: WALGap %+v, log:\n%s", c.WALGap(), logs)
			}
			if _, _, gaps := c.AuditVerifyGaps(); len(gaps) != 1 {
				t.Errorf("after a clean stop: gaps %+v, want the one recorded", gaps)
			}
		})
	}
}

// TestWALCleanCloseHasNoGap: after a clean stop the write-ahead file holds nothing that is
// not in state.db, so an intact file, and even one removed or shortened, loses nothing and
// records no gap; a short file is made its size again.
func TestWALCleanCloseHasNoGap(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	appendCalls(t, s, 0, 5, -1, "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, wal := snapshot(t, dir)
	for _, c := range []struct {
		name string
		wal  []byte
		warn bool
	}{
		{"intact", wal, false},
		{"truncated", wal[:1000], true},
		{"deleted", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := restore(t, db, c.wal)
			logger, logs := captureLog()
			s := openStore(t, dir, Options{Logger: logger})
			if s.WALGap() != nil || strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("WALGap %+v, log:\n%s", s.WALGap(), logs)
			}
			if warned := strings.Contains(logs.String(), "stopped cleanly last"); warned != c.warn {
				t.Errorf("warned %v, want %v; log:\n%s", warned, c.warn, logs)
			}
			if got := seqs(t, s); len(got) != 5 {
				t.Errorf("records %v, want 5", got)
			}
			if _, _, gaps := s.AuditVerifyGaps(); len(gaps) != 0 {
				t.Errorf("gaps %+v, want none", gaps)
			}
			info, err := os.Stat(filepath.Join(dir, WALFileName))
			if err != nil || info.Size() != walMinSize {
				t.Errorf("the write-ahead file after Open: %v, %v; want %d bytes", info, err, walMinSize)
			}
		})
	}
}

// TestWALDamageReadOnly: a command that opens a damaged copy read-only is told what was found
// (WALGap, for it to print), and writes nothing: no gap record, both files unchanged.
func TestWALDamageReadOnly(t *testing.T) {
	db, wal := killedWithRecordsInWAL(t)
	for _, d := range walDamages(t, wal) {
		t.Run(d.name, func(t *testing.T) {
			dir, damaged := d.restore(t, db, wal)
			logger, _ := captureLog()
			ro := openStore(t, dir, Options{ReadOnly: true, Logger: logger})
			g := ro.WALGap()
			if g == nil || g.Found != d.found || g.AfterSeq != d.after || !strings.Contains(g.Message, "keep a copy") {
				t.Fatalf("read-only WALGap = %+v; want %s after record %d", g, d.found, d.after)
			}
			if got := seqs(t, ro); uint64(len(got)) != d.after {
				t.Errorf("read-only records %v, want %d", got, d.after)
			}
			if _, _, gaps := ro.AuditVerifyGaps(); len(gaps) != 0 {
				t.Errorf("read-only gaps %+v: nothing is recorded without a write", gaps)
			}
			if err := ro.Close(); err != nil {
				t.Fatal(err)
			}
			dbAfter, err := os.ReadFile(filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			walAfter, err := os.ReadFile(filepath.Join(dir, WALFileName))
			if d.damage == nil {
				if !os.IsNotExist(err) {
					t.Errorf("a read-only open made the deleted write-ahead file: %v", err)
				}
			} else if err != nil || !bytes.Equal(walAfter, damaged) {
				t.Errorf("a read-only open changed the write-ahead file (%v)", err)
			}
			if !bytes.Equal(dbAfter, db) {
				t.Error("a read-only open changed state.db")
			}
		})
	}
}
