package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// WALFileName is the audit log's write-ahead file, beside state.db. The audit writer makes a
// record durable by appending it here and syncing once per batch; a background mover copies the
// records into state.db's audit bucket and then reuses the file from its start (doc.go,
// Durability).
const WALFileName = "audit.wal"

// The size of the write-ahead file. It is chosen when the file is created, from the free space
// of its filesystem, and kept after that. The file is written full of zeros once, ahead of use:
// a sync then only writes data blocks the file already owns, without a journal commit for new
// blocks or for converting fallocated (unwritten) extents. Measured on ext4 (700-byte appends,
// one fdatasync each): zeros p50 138 µs / p90 155 µs, fallocate 136 / 205 µs, growing the
// file 196 / 211 µs; zeros are kept.
//
// walMaxSize bounds what the file holds while state.db refuses the mover's transactions: at
// about a kilobyte a record, some 16,000 acknowledged calls, seconds to minutes of traffic. The
// records in the file are also held in memory until they are moved (readers see them there),
// so the size also bounds that memory; it is a quarter of the audit queue's memory bound. A
// smaller file only means the writer moves records into state.db itself more often.
const (
	walMaxSize = 16 << 20
	// walMinSize is the smallest file created, however little space there is: a small
	// filesystem still gets a file that holds a few hundred records.
	walMinSize = 256 << 10
	// walSpaceShare: a new file takes at most 1/walSpaceShare of the free space.
	walSpaceShare = 16
)

// A frame is one record in the file, 8-byte aligned:
//
//	magic    uint32  walMagic
//	length   uint32  bytes of the body: ends-call id, then the stored record
//	crc      uint32  CRC-32C (Castagnoli) of the header without crc, then the body
//	endsLen  uint32  bytes of the ends-call id (Record.EndsCall) at the start of the body
//	seq      uint64  the record's sequence number
//	batch    uint64  the sequence number of the first record synced with this one
//	body     length bytes, then zero padding to a multiple of 8
//
// All integers are big-endian. Frames run from the start of the file with consecutive sequence
// numbers; the run ends at the first frame that is zero, does not check, or does not follow
// (a frame left from before the file was last reused has a smaller sequence number).
const (
	walMagic     = 0xA7D1F05E
	walHeader    = 32
	walAlign     = 8
	walMaxEnds   = 4 * MaxTextBytes
	walResetSpan = 4096 // zeroed at the start of the file to empty it
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walEntry is one record in the write-ahead file: synced there, perhaps not yet in state.db.
type walEntry struct {
	seq   uint64
	value []byte // the record as stored
	ends  string // Record.EndsCall
}

// frameSize is the bytes e takes in the file.
func frameSize(e *walEntry) int {
	n := walHeader + len(e.ends) + len(e.value)
	return (n + walAlign - 1) &^ (walAlign - 1)
}

// appendFrame appends e's frame to buf, batch being the first sequence number of its batch.
func appendFrame(buf []byte, e *walEntry, batch uint64) []byte {
	start := len(buf)
	var h [walHeader]byte
	binary.BigEndian.PutUint32(h[0:], walMagic)
	binary.BigEndian.PutUint32(h[4:], uint32(len(e.ends)+len(e.value)))
	binary.BigEndian.PutUint32(h[12:], uint32(len(e.ends)))
	binary.BigEndian.PutUint64(h[16:], e.seq)
	binary.BigEndian.PutUint64(h[24:], batch)
	buf = append(buf, h[:]...)
	buf = append(buf, e.ends...)
	buf = append(buf, e.value...)
	for (len(buf)-start)%walAlign != 0 {
		buf = append(buf, 0)
	}
	frame := buf[start:]
	crc := crc32.Update(0, castagnoli, frame[0:8])
	crc = crc32.Update(crc, castagnoli, frame[12:walHeader+len(e.ends)+len(e.value)])
	binary.BigEndian.PutUint32(frame[8:], crc)
	return buf
}

// parsedFrame is a frame that checks.
type parsedFrame struct {
	walEntry
	batch uint64
	size  int
}

// parseFrame reads the frame at off; ok is false when there is none that checks there.
func parseFrame(data []byte, off int) (f parsedFrame, ok bool) {
	if off+walHeader > len(data) || binary.BigEndian.Uint32(data[off:]) != walMagic {
		return f, false
	}
	h := data[off : off+walHeader]
	length := int(binary.BigEndian.Uint32(h[4:]))
	endsLen := int(binary.BigEndian.Uint32(h[12:]))
	if length <= 0 || endsLen > walMaxEnds || endsLen >= length || length > len(data)-off-walHeader {
		return f, false
	}
	body := data[off+walHeader : off+walHeader+length]
	crc := crc32.Update(0, castagnoli, h[0:8])
	crc = crc32.Update(crc, castagnoli, h[12:])
	crc = crc32.Update(crc, castagnoli, body)
	if crc != binary.BigEndian.Uint32(h[8:]) {
		return f, false
	}
	f.seq = binary.BigEndian.Uint64(h[16:])
	f.batch = binary.BigEndian.Uint64(h[24:])
	f.ends = string(body[:endsLen])
	f.value = body[endsLen:]
	f.size = (walHeader + length + walAlign - 1) &^ (walAlign - 1)
	return f, f.seq != 0
}

// CorruptWALError: the write-ahead file holds a frame that does not check, followed by records
// that were synced after it, so acknowledged records are damaged. Open refuses the file rather
// than lose them silently.
type CorruptWALError struct {
	Path   string
	Offset int
	Seq    uint64 // the sequence number the damaged frame should have had
	Reason string
}

func (e *CorruptWALError) Error() string {
	return fmt.Sprintf("the audit write-ahead file %s is damaged at byte %d (record %d): %s; "+
		"the records after it were acknowledged, so it is not discarded. Stop here: copy the state directory for inspection; "+
		"to start anyway without the records from %d on, move %s out of the state directory (the gateway then starts a new one)",
		e.Path, e.Offset, e.Seq, e.Reason, e.Seq, WALFileName)
}

// walScan is what readWAL found in a file.
type walScan struct {
	entries []walEntry // the records after the chain tail, in order
	end     int        // the byte offset after the last frame of the run
	// torn is set when the run ended at a frame that does not check, or at one followed by
	// frames of the same batch: a crash while the batch was being written (nothing from there
	// on was acknowledged), or damage to the last batch (acknowledged records are lost). The
	// two cannot be told apart; findGap reports it as a possible gap.
	torn     bool
	tornSeq  uint64
	tornAt   int
	lastSeen uint64 // the last sequence number of the run, 0 when empty
}

// readWAL reads the frames of data (the whole file) that follow the chain tail: each must
// continue the chain (sequence number and prev link), verified against its hash.
func readWAL(path string, data []byte, tail chainTail) (walScan, error) {
	var sc walScan
	off := 0
	prevHash := tail.hash
	for {
		f, ok := parseFrame(data, off)
		if !ok || (sc.lastSeen != 0 && f.seq != sc.lastSeen+1) {
			break
		}
		if f.seq > tail.seq {
			if f.seq != tail.seq+1+uint64(len(sc.entries)) {
				return sc, &CorruptWALError{Path: path, Offset: off, Seq: f.seq, Reason: fmt.Sprintf(
					"its records start at %d but state.db ends at record %d: the file belongs to another state.db (an older copy of it was restored?)", f.seq, tail.seq)}
			}
			claimed, actual, ok := storedHash(f.value)
			var r struct {
				Seq  uint64 `json:"seq"`
				Prev string `json:"prev"`
			}
			if !ok || claimed != actual || json.Unmarshal(f.value, &r) != nil || r.Seq != f.seq || r.Prev != prevHash {
				return sc, &CorruptWALError{Path: path, Offset: off, Seq: f.seq, Reason: "the record does not continue the chain of state.db: the file belongs to another state.db, or was changed"}
			}
			prevHash = claimed
			f.value = append([]byte(nil), f.value...)
			sc.entries = append(sc.entries, f.walEntry)
		}
		sc.lastSeen = f.seq
		off += f.size
	}
	sc.end = off
	expect := max(sc.lastSeen, tail.seq) + 1
	// Is there a frame past the end of the run that was synced after the one that should be
	// there? A frame of the unfinished batch (batch ≤ expect) may have reached the disk before
	// an earlier frame of the same batch; a frame of a later batch cannot, since each batch is
	// synced before the next is written.
	for o := off; o+walHeader <= len(data); o += walAlign {
		if binary.BigEndian.Uint32(data[o:]) != walMagic {
			continue
		}
		f, ok := parseFrame(data, o)
		if !ok {
			if o == off {
				sc.torn, sc.tornSeq, sc.tornAt = true, expect, off // the last frame, cut short
			}
			continue
		}
		if f.seq < expect {
			continue // left from before the file was reused
		}
		if f.batch > expect {
			return sc, &CorruptWALError{Path: path, Offset: off, Seq: expect, Reason: fmt.Sprintf(
				"the frame there does not check, but record %d, synced after it, is at byte %d", f.seq, o)}
		}
		sc.torn, sc.tornSeq, sc.tornAt = true, expect, off
	}
	return sc, nil
}

// walFile is the open write-ahead file.
type walFile struct {
	path string
	f    *os.File
	size int64
	// used is how far frames may have been written since the file was last all zeros: empty
	// zeroes that much, so that a clean stop leaves nothing of a record in the file (a record
	// retention has pruned from state.db included).
	used int64
	// direct, when the filesystem takes it, writes frames with O_DIRECT|O_DSYNC.
	direct *directWAL
}

// openWAL opens dir's write-ahead file for writing, creating it (written full of zeros) when it
// does not exist or is too small, and returns it with its whole contents.
func openWAL(dir string, size int64) (*walFile, []byte, error) {
	path := filepath.Join(dir, WALFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("open the audit write-ahead file %s: %w", path, err)
	}
	w := &walFile{path: path, f: f}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read the audit write-ahead file %s: %w", path, err)
	}
	data := make([]byte, info.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read the audit write-ahead file %s: %w", path, err)
	}
	w.size = info.Size() &^ (walAlign - 1)
	if w.size < walMinSize || (size > 0 && w.size < size) {
		if err := w.preallocate(dir, info.Size(), size); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("prepare the audit write-ahead file %s: %w", path, err)
		}
	}
	w.direct = openDirect(path)
	return w, data, nil
}

// preallocate writes zeros from have to the file's new size (size when positive, else chosen
// from the free space), and syncs the file and the directory that holds it.
func (w *walFile) preallocate(dir string, have, size int64) error {
	if size <= 0 {
		size = walMaxSize
		if free, err := freeBytes(dir); err == nil {
			size = min(size, free/walSpaceShare)
		}
		size = max(size, walMinSize)
	}
	size = max(size, walResetSpan) &^ (walResetSpan - 1)
	zeros := make([]byte, 1<<20)
	for off := have; off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := w.f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	w.size = size
	return nil
}

// write puts frames at off and syncs their data (the blocks are the file's already, so this is
// fdatasync's cheap case): with one direct synchronous write where the filesystem takes it
// (directWAL), else through the page cache and fdatasync. A direct write the filesystem
// refuses as such wrote nothing; the file is written through the page cache from then on.
func (w *walFile) write(frames []byte, off int64) error {
	if w.direct != nil {
		err := w.direct.write(frames, off, w.readAt)
		if err != errDirectRefused {
			return err
		}
		w.direct.close()
		w.direct = nil
	}
	if _, err := w.f.WriteAt(frames, off); err != nil {
		return err
	}
	return fdatasync(w.f)
}

// errDirectRefused is a direct write the filesystem refused as such (directRefused: EINVAL for
// its alignment or O_DIRECT itself, EOPNOTSUPP); nothing was written and the write may be
// made through the page cache.
var errDirectRefused = errors.New("direct write refused")

// readAt reads len(b) bytes at off; what lies past the end of the file (a file whose size is
// not a multiple of a block, made by hand or by another program) reads as zeros.
func (w *walFile) readAt(b []byte, off int64) error {
	n, err := w.f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		clear(b[n:])
		return nil
	}
	return err
}

// written is how far data holds anything but zeros.
func written(data []byte) int64 {
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] != 0 {
			return int64(i + 1)
		}
	}
	return 0
}

// empty zeroes the part of the file frames were written to and syncs it: no frame is read from
// it again, and none is left on the disk.
func (w *walFile) empty() error {
	if w.direct != nil {
		w.direct.forget()
	}
	n := max(min(w.used, w.size), min(walResetSpan, w.size))
	zeros := make([]byte, min(n, 1<<20))
	for off := int64(0); off < n; off += int64(len(zeros)) {
		if _, err := w.f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return err
		}
	}
	if err := fdatasync(w.f); err != nil {
		return err
	}
	w.used = 0
	return nil
}

// close closes the file; again, it does nothing.
func (w *walFile) close() {
	if w.direct != nil {
		w.direct.close()
		w.direct = nil
	}
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// readWALFile reads dir's write-ahead file without writing anything: nil when there is none.
func readWALFile(dir string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, WALFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// seekEntry is the index of the first entry with a sequence number of at least seq.
func seekEntry(entries []walEntry, seq uint64) int {
	return sort.Search(len(entries), func(i int) bool { return entries[i].seq >= seq })
}

// loadWAL reads the write-ahead file beside state.db before anything relies on the chain tail
// or the journal. Writable, the records it holds after state.db's last are put into state.db
// (removing the journal entries of the calls they end), the file is emptied, and meta records
// its size and that it is open; read-only, they are kept in memory for the readers, and
// nothing is written. Either way a file missing, short or ending in a frame that does not
// check is reported (findGap): logged, and kept in s.gap.
func (s *Store) loadWAL() error {
	tail, err := s.loadAuditTail()
	if err != nil {
		return err
	}
	recorded, state, err := s.walMeta()
	if err != nil {
		return err
	}
	var (
		w    *walFile
		data []byte
		path = filepath.Join(s.dir, WALFileName)
	)
	_, statErr := os.Stat(path)
	missing := errors.Is(statErr, fs.ErrNotExist)
	if s.readOnly {
		if data, err = readWALFile(s.dir); err != nil {
			return fmt.Errorf("read the audit write-ahead file %s: %w", path, err)
		}
	} else if w, data, err = openWAL(s.dir, max(s.walSize, recorded)); err != nil {
		return err
	} else {
		w.used = written(data)
	}
	sc, err := readWAL(path, data, tail)
	if err != nil {
		if w != nil {
			w.close()
		}
		return err
	}
	gap, warn := findGap(walFound{path: path, missing: missing, data: data, recordedSize: recorded, state: state, tail: tail}, sc)
	switch {
	case gap != nil:
		s.gap = gap
		s.log.Error(gap.Message, "wal", path, "found", gap.Found, "offset", gap.Offset, "after_seq", gap.AfterSeq, "at_most_bytes", gap.AtMostBytes)
	case warn != "":
		s.log.Warn(warn, "wal", path)
	}
	if s.readOnly {
		s.walLoaded = sc.entries
		return nil
	}
	for rest := sc.entries; len(rest) > 0; {
		n := min(len(rest), moveTxRecords)
		if err := s.putAudit(rest[:n]); err != nil {
			w.close()
			return fmt.Errorf("move the audit records of %s into %s: %w", path, s.path, err)
		}
		rest = rest[n:]
	}
	if len(sc.entries) > 0 {
		s.log.Info("audit records moved from the write-ahead file into the state file", "wal", path, "records", len(sc.entries),
			"from", sc.entries[0].seq, "to", sc.entries[len(sc.entries)-1].seq)
	}
	if len(data) >= walHeader && binary.BigEndian.Uint32(data) != 0 {
		if err := w.empty(); err != nil {
			w.close()
			return fmt.Errorf("empty the audit write-ahead file %s: %w", path, err)
		}
	}
	// From here on the file may hold records that are in it only, until a Close empties it.
	if err := s.putWALMeta(w.size, walStateOpen); err != nil {
		w.close()
		return fmt.Errorf("record the audit write-ahead file %s in %s: %w", path, s.path, err)
	}
	s.wal = w
	return nil
}
