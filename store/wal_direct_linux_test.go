package store

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// openTwoWALs opens a write-ahead file in each of two fresh folders: the first written with
// direct writes (the test is skipped where the filesystem of the test's temporary folder does
// not take them), the second through the page cache.
func openTwoWALs(t *testing.T) (direct, buffered *walFile) {
	t.Helper()
	direct, _, err := openWAL(t.TempDir(), walMinSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.close)
	if direct.direct == nil {
		t.Skip("the filesystem of the test's temporary folder does not take O_DIRECT")
	}
	buffered, _, err = openWAL(t.TempDir(), walMinSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buffered.close)
	buffered.direct.close()
	buffered.direct = nil
	return direct, buffered
}

func readAll(t *testing.T, w *walFile) []byte {
	t.Helper()
	b, err := os.ReadFile(w.path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomFrames is n bytes (a multiple of walAlign) with no zero byte, so that a byte lost or
// misplaced shows.
func randomFrames(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + r.IntN(255))
	}
	return b
}

// Direct writes cover whole blocks: the bytes of the first block before the frames must be the
// file's own (kept from the last write, or read back when the block is not the one kept), and
// what follows the frames in the last block is zeros. Random batches at the offsets the audit
// log writes them (one after the other, and from the start again after a rewind), with the
// kept block sometimes dropped, must leave the file exactly as that says, and hold in their
// run the bytes the page-cache writes hold.
func TestWALDirectWritesKeepTheFilesBytes(t *testing.T) {
	direct, buffered := openTwoWALs(t)
	r := rand.New(rand.NewPCG(17, 4))
	model := make([]byte, direct.size)
	off := int64(0)
	for step := range 400 {
		n := walAlign * (1 + r.IntN(1200))
		if off+int64(n) > direct.size || r.IntN(12) == 0 {
			off = 0
		}
		if r.IntN(8) == 0 {
			direct.direct.forget()
		}
		frames := randomFrames(r, n)
		if err := direct.write(frames, off); err != nil {
			t.Fatalf("step %d: direct write of %d bytes at %d: %v", step, n, off, err)
		}
		if direct.direct == nil {
			t.Fatalf("step %d: the direct writer was dropped after a write at %d", step, off)
		}
		if err := buffered.write(frames, off); err != nil {
			t.Fatal(err)
		}
		end := off + int64(n)
		copy(model[off:], frames)
		clear(model[end:min((end+directBlock-1)&^(directBlock-1), direct.size)])
		got := readAll(t, direct)
		if !bytes.Equal(got, model) {
			i := 0
			for i < len(got) && got[i] == model[i] {
				i++
			}
			t.Fatalf("step %d (wrote %d bytes at %d): the file differs from what was written at byte %d", step, n, off, i)
		}
		if b := readAll(t, buffered); !bytes.Equal(b[:end], got[:end]) {
			t.Fatalf("step %d: the direct and the page-cache writes hold different bytes up to %d", step, end)
		}
		off = end
	}
}

// A direct write the kernel refuses (here: from a buffer that is not block-aligned, which
// O_DIRECT does not take) writes nothing; the frames go through the page cache instead, and so
// does every later write.
func TestWALDirectRefusedFallsBackToThePageCache(t *testing.T) {
	w, _ := openTwoWALs(t)
	r := rand.New(rand.NewPCG(3, 9))
	first := randomFrames(r, 1000)
	if err := w.write(first, 0); err != nil {
		t.Fatal(err)
	}
	w.direct.buf = alignedBlocks(4)[walAlign:]
	second := randomFrames(r, 2000)
	if err := w.write(second, 1000); err != nil {
		t.Fatalf("the write after a refused direct write: %v", err)
	}
	if w.direct != nil {
		t.Skip("the filesystem of the test's temporary folder takes unaligned direct writes: nothing was refused")
	}
	third := randomFrames(r, 600)
	if err := w.write(third, 3000); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]byte(nil), first...), second...), third...)
	if got := readAll(t, w); !bytes.Equal(got[:len(want)], want) || bytes.ContainsFunc(got[len(want):], func(c rune) bool { return c != 0 }) {
		t.Fatal("after the fallback the file does not hold the three writes followed by zeros")
	}
}

// The audit log of a store on a filesystem that takes direct writes uses them, and what it
// wrote that way is replayed from a copy taken as a crash leaves the files.
func TestWALDirectRecordsAreReplayed(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{walSize: walMinSize})
	if s.audit.wal.direct == nil {
		t.Skip("the filesystem of the test's temporary folder does not take O_DIRECT")
	}
	release := movedThenHeld(t, s, 5)
	appendCalls(t, s, 5, 60, -1, "")
	if s.audit.wal.direct == nil {
		t.Fatal("the audit log stopped writing directly")
	}
	db, wal := snapshot(t, dir)
	release()
	c := openStore(t, restore(t, db, wal), Options{})
	if got := seqs(t, c); len(got) != 65 || got[64] != 65 {
		t.Fatalf("replayed %d records (last %v), want 65", len(got), got[len(got)-1:])
	}
	if _, err := os.Stat(filepath.Join(c.dir, WALFileName)); err != nil {
		t.Fatal(err)
	}
}

// A file whose size is not a multiple of a block (made by hand, or by another program): the
// block read back around a write in its last, partial block ends at the end of the file,
// and the write still goes in.
func TestWALDirectWriteInTheLastPartialBlock(t *testing.T) {
	dir := t.TempDir()
	size := int64(walMinSize + 1000)
	if err := os.WriteFile(filepath.Join(dir, WALFileName), make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	w, _, err := openWAL(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if w.direct == nil {
		t.Skip("the filesystem of the test's temporary folder does not take O_DIRECT")
	}
	if w.size != size&^(walAlign-1) {
		t.Fatalf("the file was remade (size %d), want it kept at %d", w.size, size)
	}
	frames := randomFrames(rand.New(rand.NewPCG(5, 5)), 400)
	off := int64(walMinSize + 8)
	if err := w.write(frames, off); err != nil {
		t.Fatalf("a write in the last, partial block: %v", err)
	}
	got := readAll(t, w)
	if !bytes.Equal(got[off:off+int64(len(frames))], frames) || bytes.ContainsFunc(got[:off], func(c rune) bool { return c != 0 }) {
		t.Fatal("the file does not hold the frames where they were written, after zeros")
	}
}

// What counts as the filesystem refusing direct writes (then the page cache is used) and
// what is a failure to write (then the batch is refused and retried, as with fdatasync).
func TestDirectRefusedErrors(t *testing.T) {
	for _, c := range []struct {
		err     error
		refused bool
	}{
		{&os.PathError{Op: "write", Path: "audit.wal", Err: syscall.EINVAL}, true},
		{&os.PathError{Op: "write", Path: "audit.wal", Err: syscall.EOPNOTSUPP}, true},
		{&os.PathError{Op: "write", Path: "audit.wal", Err: syscall.ENOTSUP}, true},
		{&os.PathError{Op: "write", Path: "audit.wal", Err: syscall.ENOSPC}, false},
		{&os.PathError{Op: "write", Path: "audit.wal", Err: syscall.EIO}, false},
		{syscall.EDQUOT, false},
	} {
		if got := directRefused(c.err); got != c.refused {
			t.Errorf("directRefused(%v) = %v, want %v", c.err, got, c.refused)
		}
	}
}
