package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdMoves makes every move into state.db fail until the returned func is called, and waits
// for a move in progress to end: from then on only the write-ahead file changes.
func holdMoves(s *Store) (release func()) {
	err := errors.New("moves held by the test")
	s.audit.failMove.Store(&err)
	s.audit.moveMu.Lock()
	//lint:ignore SA2001 waiting for a move in progress to end
	s.audit.moveMu.Unlock()
	return func() { s.audit.failMove.Store(nil) }
}

// movedThenHeld appends n call records and moves them into state.db, then holds the moves
// (holdMoves): what is appended after that is in the write-ahead file only.
func movedThenHeld(t *testing.T, s *Store, n int) (release func()) {
	t.Helper()
	appendCalls(t, s, 0, n, -1, "")
	if err := s.audit.movePass(); err != nil {
		t.Fatal(err)
	}
	return holdMoves(s)
}

// appendCalls appends the call records from to from+n-1 (callRecord) with AppendSync; the one
// numbered endsAt ends the physical call endsCall.
func appendCalls(t *testing.T, s *Store, from, n, endsAt int, endsCall string) {
	t.Helper()
	for i := from; i < from+n; i++ {
		r := callRecord("arm", "move", i)
		if i == endsAt {
			r.EndsCall = endsCall
		}
		if _, err := s.Audit().AppendSync(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot copies the state directory's two files as a crash would leave them: the
// write-ahead file first, so that whatever the mover does meanwhile is in state.db.
//
// The write-ahead file is read from its end backwards, in small pieces: a batch is written only
// after the one before it was synced, so a piece read later (nearer the start) is never older
// than one read before it, and the copy is what a crash could leave, whatever the writer does
// meanwhile.
func snapshot(t *testing.T, dir string) (db, wal []byte) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, WALFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	wal = make([]byte, info.Size())
	const piece = 512
	for off := (info.Size() - 1) / piece * piece; off >= 0; off -= piece {
		if _, err := f.ReadAt(wal[off:min(off+piece, info.Size())], off); err != nil {
			t.Fatal(err)
		}
	}
	if db, err = os.ReadFile(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	return db, wal
}

// restore writes a snapshot into a new directory.
func restore(t *testing.T, db, wal []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), db, 0o600); err != nil {
		t.Fatal(err)
	}
	if wal != nil {
		if err := os.WriteFile(filepath.Join(dir, WALFileName), wal, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// frames lists the offsets of the frames at the start of a write-ahead file.
func frames(wal []byte) []int {
	var offs []int
	off, last := 0, uint64(0)
	for {
		f, ok := parseFrame(wal, off)
		if !ok || (last != 0 && f.seq != last+1) {
			return append(offs, off)
		}
		offs = append(offs, off)
		last = f.seq
		off += f.size
	}
}

// seqs are the sequence numbers AuditScan returns, and whether AuditVerify passes.
func seqs(t *testing.T, s *Store) []uint64 {
	t.Helper()
	var out []uint64
	if err := s.AuditScan(AuditFilter{}, func(r Record) bool { out = append(out, r.Seq); return true }); err != nil {
		t.Fatal(err)
	}
	if n, bad := s.AuditVerify(); bad != nil || n != uint64(len(out)) {
		t.Fatalf("AuditVerify = %d, %v; AuditScan sees %d records", n, bad, len(out))
	}
	return out
}

// TestWALRecordsAreDurableBeforeTheMove: records AppendSync acknowledged while nothing is
// moved are in the write-ahead file only; a kill then (a copy of the directory) loses none,
// the next Open moves them into state.db, and a call ended by one of them is not locked out.
func TestWALRecordsAreDurableBeforeTheMove(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	defer movedThenHeld(t, s, 5)()
	if err := s.BeginPhysical(Lockout{Server: "arm", Tool: "arm__pick", CallID: "ended"}); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginPhysical(Lockout{Server: "gripper", Tool: "gripper__close", CallID: "open"}); err != nil {
		t.Fatal(err)
	}
	appendCalls(t, s, 5, 20, 15, "ended")
	if got := seqs(t, s); len(got) != 25 {
		t.Fatalf("the live store sees %d records, want 25", len(got))
	}
	db, wal := snapshot(t, dir)

	copyDir := restore(t, db, wal)
	c := openStore(t, copyDir, Options{})
	got := seqs(t, c)
	// 25 records, and the lockout record of the call that had no end record.
	if len(got) != 26 {
		t.Fatalf("after the kill: %d records %v, want 26", len(got), got)
	}
	if _, ok := c.Lockout("arm"); ok {
		t.Error("the call whose end record was in the write-ahead file was locked out")
	}
	if _, ok := c.Lockout("gripper"); !ok {
		t.Error("the call without an end record was not locked out")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Close left an empty file: a read-only open finds nothing in it, and everything in state.db.
	after, err := os.ReadFile(filepath.Join(copyDir, WALFileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parseFrame(after, 0); ok {
		t.Error("Close left a frame at the start of the write-ahead file")
	}
	ro := openStore(t, copyDir, Options{ReadOnly: true})
	if len(ro.audit.overlay()) != 0 || len(seqs(t, ro)) != 26 {
		t.Errorf("after Close: %d records in the write-ahead file", len(ro.audit.overlay()))
	}
}

// TestWALTornLastFrame cuts the last frame of the write-ahead file at every byte offset (a
// crash while it was written) and reopens: every record before it is there, the chain
// verifies, and the journal entry that record would have ended becomes a lockout.
func TestWALTornLastFrame(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	release := holdMoves(s)
	defer release()
	if err := s.BeginPhysical(Lockout{Server: "arm", Tool: "arm__pick", CallID: "last"}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	for i := range n {
		r := callRecord("arm", "move", i)
		if i == n-1 {
			r.EndsCall = "last"
		}
		if _, err := s.Audit().AppendSync(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	db, wal := snapshot(t, dir)
	offs := frames(wal)
	if len(offs) != n+1 {
		t.Fatalf("%d frames in the write-ahead file, want %d", len(offs)-1, n)
	}
	start, end := offs[n-1], offs[n]
	// The bytes after covered are padding, which the CRC does not cover.
	covered := start + walHeader + int(binary.BigEndian.Uint32(wal[start+4:]))
	// gap is the gap record's kind the reopened copy must have, "" for none.
	check := func(t *testing.T, wal []byte, intact bool, gap string) {
		t.Helper()
		c, err := Open(restore(t, db, wal), Options{walSize: walMinSize})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got := seqs(t, c)
		_, locked := c.Lockout("arm")
		want := n // n records, or n-1 and the lockout record of the call whose end was cut
		if gap != "" {
			want++
		}
		switch {
		case intact && (len(got) != want || locked):
			t.Fatalf("intact: %d records, locked %v; want %d, not locked", len(got), locked, want)
		case !intact && (len(got) != want || !locked):
			t.Fatalf("cut: records %v, locked %v; want %d records with the lockout record", got, locked, want)
		}
		// The gap record follows the last record found; the lockout record comes after it.
		after := uint64(n - 1)
		if intact {
			after = n
		}
		_, _, gaps := c.AuditVerifyGaps()
		switch {
		case gap == "" && len(gaps) != 0:
			t.Fatalf("gaps %+v, want none", gaps)
		case gap != "" && (len(gaps) != 1 || gaps[0].Kind != gap || gaps[0].Seq != after+1 ||
			!strings.Contains(gaps[0].Reason, fmt.Sprintf("after record %d,", after))):
			t.Fatalf("gaps %+v, want one %s at record %d", gaps, gap, after+1)
		}
	}
	for cut := start; cut < end; cut++ {
		zeroed := bytes.Clone(wal)
		clear(zeroed[cut:end])
		// A crash may leave the frame's magic number whole and the rest not: that cannot be
		// told from damage, and is recorded as a possible gap. Without its magic number the
		// frame was never there.
		torn := ""
		if cut >= start+4 && cut < covered {
			torn = WALTornFrame
		}
		t.Run(fmt.Sprintf("zeroed_from_%d", cut-start), func(t *testing.T) { check(t, zeroed, cut >= covered, torn) })
		if (cut-start)%7 == 0 || cut == end-1 {
			// A crash does not shorten the file: a short one is always a possible gap.
			t.Run(fmt.Sprintf("truncated_at_%d", cut-start), func(t *testing.T) { check(t, bytes.Clone(wal[:cut]), cut >= covered, WALShort) })
		}
	}
}

// TestWALCrashMidBatch copies the state directory while writers append, with moves held so
// that state.db does not change: every record acknowledged before the copy is found after
// reopening the copy, and the chain verifies.
func TestWALCrashMidBatch(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		s := openStore(t, dir, Options{walSize: 4 << 20})
		release := holdMoves(s)
		var (
			mu    sync.Mutex
			acked uint64 // the highest sequence number acknowledged
			stop  = make(chan struct{})
			wg    sync.WaitGroup
		)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					r, err := s.Audit().AppendSync(context.Background(), callRecord("arm", "move", w*100000+i))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acked = max(acked, r.Seq)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(20+round*10) * time.Millisecond)
		mu.Lock()
		before := acked
		mu.Unlock()
		db, wal := snapshot(t, dir)
		close(stop)
		wg.Wait()
		release()

		c := openStore(t, restore(t, db, wal), Options{})
		got := seqs(t, c)
		if uint64(len(got)) < before {
			t.Fatalf("round %d: record %d was acknowledged before the copy, %d records after reopening it", round, before, len(got))
		}
		for i, seq := range got {
			if seq != uint64(i+1) {
				t.Fatalf("round %d: record %d is %d", round, i+1, seq)
			}
		}
		c.Close()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWALCorruptMiddleFrameRefusesToOpen: a damaged frame followed by records synced after it
// is not a crash but damage to acknowledged records: Open refuses, naming the file and what
// to do, read-only too.
func TestWALCorruptMiddleFrameRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	release := holdMoves(s)
	defer release()
	appendCalls(t, s, 0, 6, -1, "")
	db, wal := snapshot(t, dir)
	offs := frames(wal)
	wal[offs[2]+walHeader+10] ^= 0x20
	for _, ro := range []bool{false, true} {
		_, err := Open(restore(t, db, wal), Options{ReadOnly: ro})
		var bad *CorruptWALError
		if !errors.As(err, &bad) || bad.Seq != 3 || !strings.Contains(err.Error(), WALFileName) || !strings.Contains(err.Error(), "move") {
			t.Errorf("read-only %v: Open = %v; want a *CorruptWALError at record 3 saying what to do", ro, err)
		}
	}
	// A write-ahead file of another state.db (records that do not follow) is refused too.
	_, err := Open(restore(t, mustEmptyDB(t), wal), Options{})
	if !errors.As(err, new(*CorruptWALError)) {
		t.Errorf("Open with the write-ahead file of another state.db = %v", err)
	}
}

// mustEmptyDB is a state.db with a record the write-ahead file above does not follow.
func mustEmptyDB(t *testing.T) []byte {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	if _, err := s.Audit().AppendSync(context.Background(), callRecord("cam", "look", 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestWALReadOnlyOpenSeesItsRecords: a command that opens the state read-only after a kill
// reads the records still in the write-ahead file, and writes nothing.
func TestWALReadOnlyOpenSeesItsRecords(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	defer movedThenHeld(t, s, 3)()
	if err := s.BeginPhysical(Lockout{Server: "arm", Tool: "arm__pick", CallID: "ended"}); err != nil {
		t.Fatal(err)
	}
	appendCalls(t, s, 3, 4, 6, "ended")
	db, wal := snapshot(t, dir)
	copyDir := restore(t, db, wal)

	ro := openStore(t, copyDir, Options{ReadOnly: true})
	if got := seqs(t, ro); len(got) != 7 {
		t.Errorf("read-only AuditScan: %v, want 7 records", got)
	}
	if last, ok := ro.AuditLast(); !ok || last.Seq != 7 {
		t.Errorf("read-only AuditLast = %d, %v", last.Seq, ok)
	}
	var exported int
	if err := ro.AuditExport(AuditFilter{}, func([]byte) error { exported++; return nil }); err != nil || exported != 7 {
		t.Errorf("read-only AuditExport: %d records, %v", exported, err)
	}
	var page []uint64
	if err := ro.AuditScan(AuditFilter{Limit: 3}, func(r Record) bool { page = append(page, r.Seq); return true }); err != nil || fmt.Sprint(page) != "[5 6 7]" {
		t.Errorf("read-only last page: %v, %v", page, err)
	}
	page = nil
	if err := ro.AuditScan(AuditFilter{Limit: 3, BeforeSeq: 5}, func(r Record) bool { page = append(page, r.Seq); return true }); err != nil || fmt.Sprint(page) != "[2 3 4]" {
		t.Errorf("read-only page before 5: %v, %v", page, err)
	}
	if _, ok := ro.Lockout("arm"); ok {
		t.Error("read-only: the call whose end record is in the write-ahead file shows as locked out")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	dbAfter, walAfter := snapshot(t, copyDir)
	if !bytes.Equal(dbAfter, db) || !bytes.Equal(walAfter, wal) {
		t.Error("a read-only open changed the files")
	}
}

// TestWALKeepsTakingRecordsWhileMovesFail: while state.db refuses the mover's transactions,
// the write-ahead file takes records and the store stays available; once the file is full,
// the store is unavailable; once moves succeed again, it recovers without a restart and no
// acknowledged record is lost.
func TestWALKeepsTakingRecordsWhileMovesFail(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: 64 << 10, CommitTimeout: 300 * time.Millisecond, MinFreeBytes: -1})
	refused := errors.New("input/output error (test)")
	s.audit.failMove.Store(&refused)
	acked := 0
	for {
		_, err := s.Audit().AppendSync(context.Background(), callRecord("arm", "move", acked))
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("AppendSync with the write-ahead file full = %v; want ErrUnavailable", err)
			}
			break
		}
		acked++
		if acked < 20 {
			if err := s.Available(); err != nil {
				t.Fatalf("record %d: the store is unavailable while the write-ahead file has room: %v", acked, err)
			}
		}
		if acked > 10000 {
			t.Fatal("the write-ahead file never filled")
		}
	}
	if acked < 50 {
		t.Fatalf("only %d records taken before the file was full", acked)
	}
	var unavailable *UnavailableError
	if err := s.Available(); !errors.As(err, &unavailable) || !strings.Contains(err.Error(), "full") {
		t.Errorf("Available with the write-ahead file full = %v; want it to say the file is full", err)
	}
	s.audit.failMove.Store(nil)
	deadline := time.Now().Add(5 * time.Second)
	for s.Available() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still unavailable after moves succeed again: %v", s.Available())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.Audit().AppendSync(context.Background(), callRecord("arm", "move", acked)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c := openStore(t, dir, Options{})
	// Every acknowledged record, the one whose wait timed out (written later) and the last.
	if got := seqs(t, c); len(got) < acked+1 {
		t.Errorf("%d records after the restart, %d acknowledged", len(got), acked+1)
	}
}

// TestWALMoverMovesALoneRecord: the mover sleeps while nothing waits, and one record appended
// to an idle store wakes it: the record is in state.db within moveEvery and a little more,
// with no further write.
func TestWALMoverMovesALoneRecord(t *testing.T) {
	s := openStore(t, t.TempDir(), Options{walSize: walMinSize})
	for round := range 2 {
		appendCalls(t, s, round, 1, -1, "")
		deadline := time.Now().Add(moveEvery + 2*time.Second)
		for {
			s.audit.walMu.Lock()
			n := len(s.audit.pending)
			s.audit.walMu.Unlock()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the record was not moved into state.db", round)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(3 * moveEvery) // idle: the mover is asleep again
	}
}

// TestWALCleanStopLeavesNoRecordInTheFile: after a clean stop the write-ahead file is all
// zeros, however far frames were written (past the start that marks it empty, and again from
// the start after a rewind), so nothing of a record stays there once state.db no longer holds
// it (retention, then compact). After a kill, the next clean stop clears it too.
func TestWALCleanStopLeavesNoRecordInTheFile(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	appendCalls(t, s, 0, 40, -1, "")
	if err := s.audit.movePass(); err != nil {
		t.Fatal(err)
	}
	appendCalls(t, s, 40, 3, -1, "") // written from the start again, after the rewind
	db, wal := snapshot(t, dir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(walBytes(t, dir), func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("after a clean stop the write-ahead file holds data at byte %d", i)
	}
	if nonZero(wal) < 40*100 {
		t.Fatalf("the copy taken while it ran holds %d bytes of frames, want the frames of 40 records", nonZero(wal))
	}
	c := openStore(t, restore(t, db, wal), Options{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(walBytes(t, c.dir), func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("after a kill and a clean stop the write-ahead file holds data at byte %d", i)
	}
}

func walBytes(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, WALFileName))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func nonZero(b []byte) int {
	n := 0
	for _, c := range b {
		if c != 0 {
			n++
		}
	}
	return n
}
