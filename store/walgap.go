package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// RecordAuditGap is the type of the record a writable Open appends when the write-ahead file
// was found missing, shorter than it was made, or ending in a frame that does not check, after
// a gateway that did not stop cleanly: records acknowledged before may be lost, and the record
// says what was found ([WALGap]). Its Kind is one of the WALGap.Found values; its Reason is
// the message Open logged.
const RecordAuditGap = "audit_gap"

// Meta keys of the write-ahead file.
var (
	// keyWALSize is the size the file was made (preallocated) with, in decimal.
	keyWALSize = []byte("wal_size")
	// keyWALState is walStateOpen from a writable Open's replay until a Close that emptied the
	// file, then walStateClosed. Absent: the store was last opened by a gateway that did not
	// keep it, so whether it stopped cleanly is not known.
	keyWALState = []byte("wal_state")
)

const (
	walStateOpen   = "open"
	walStateClosed = "closed"
)

// What Open found wrong with the write-ahead file (WALGap.Found, and the gap record's Kind).
const (
	WALMissing   = "wal_missing"
	WALShort     = "wal_short"
	WALTornFrame = "wal_torn_frame"
)

// WALGap is what Open found in the write-ahead file that means records acknowledged before it
// may be lost: the file is missing or shorter than the size it was made with while the
// gateway did not stop cleanly, or it ends in a frame that does not check. The last cannot be
// told apart from a crash in the middle of writing that frame, which loses nothing
// acknowledged, so a torn final frame is always reported.
type WALGap struct {
	Path  string `json:"wal"`
	Found string `json:"found"` // WALMissing, WALShort or WALTornFrame
	// Size is the file's size, RecordedSize the size it was made with (0: not recorded).
	Size         int64 `json:"size"`
	RecordedSize int64 `json:"recorded_size,omitempty"`
	// Offset is where the frame that does not check starts (WALTornFrame, or WALShort when the
	// file also ends in one; -1 otherwise). HeaderSeq is the sequence number its header
	// holds, when the header is there (0 otherwise): it may be damaged too.
	Offset    int64  `json:"offset"`
	HeaderSeq uint64 `json:"header_seq,omitempty"`
	// AfterSeq is the last record found, in state.db or the file: records acknowledged from
	// AfterSeq+1 on may be lost, and the numbers from there on are given to new records.
	AfterSeq uint64 `json:"after_seq"`
	// AtMostBytes bounds the lost records: the bytes of the file after what was read.
	AtMostBytes int64 `json:"at_most_bytes"`
	// Message says what was found, what it means and what to do; Open logs it.
	Message string `json:"message"`
}

// walMeta reads the write-ahead file's size and state from meta.
func (s *Store) walMeta() (size int64, state string, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if v := meta.Get(keyWALSize); v != nil {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("the size of the audit write-ahead file %q in meta is not a number", v)
			}
			size = n
		}
		state = string(meta.Get(keyWALState))
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("read state file %s: %w", s.path, err)
	}
	return size, state, nil
}

// putWALMeta records the write-ahead file's size (when positive) and state.
func (s *Store) putWALMeta(size int64, state string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if size > 0 {
			if err := meta.Put(keyWALSize, []byte(strconv.FormatInt(size, 10))); err != nil {
				return err
			}
		}
		return meta.Put(keyWALState, []byte(state))
	})
}

// walFound is what loadWAL saw of the file, for findGap.
type walFound struct {
	path         string
	missing      bool
	data         []byte
	recordedSize int64
	state        string
	tail         chainTail // state.db's last record
}

// findGap decides whether what Open found may have lost acknowledged records, and says so.
// With warn set, something was wrong but nothing acknowledged can have been lost (the store
// was closed cleanly); it is worth a warning, not a gap record.
func findGap(w walFound, sc walScan) (gap *WALGap, warn string) {
	size := int64(len(w.data))
	short := !w.missing && w.recordedSize > 0 && size < w.recordedSize
	if w.missing && w.state == "" {
		return nil, "" // a new state directory, or one an older mcp-gateway kept without the file
	}
	if !w.missing && !short && !sc.torn {
		return nil, ""
	}
	g := &WALGap{Path: w.path, Size: size, RecordedSize: w.recordedSize, Offset: -1, AfterSeq: w.tail.seq}
	if n := len(sc.entries); n > 0 {
		g.AfterSeq = sc.entries[n-1].seq
	}
	var what string
	switch {
	case w.missing:
		g.Found, g.Size = WALMissing, 0
		what = fmt.Sprintf("the audit write-ahead file %s is missing", w.path)
	case short:
		g.Found = WALShort
		what = fmt.Sprintf("the audit write-ahead file %s is %d bytes, shorter than the %d bytes it was made with (a crash does not shorten it: it is written full of zeros when it is made, and written in place after that)",
			w.path, size, w.recordedSize)
	default:
		g.Found = WALTornFrame
		what = fmt.Sprintf("the audit write-ahead file %s ends in a frame that does not check", w.path)
	}
	if sc.torn {
		g.Offset = int64(sc.tornAt)
		if sc.tornAt+walHeader <= len(w.data) {
			g.HeaderSeq = binary.BigEndian.Uint64(w.data[sc.tornAt+16:])
		}
		if g.Found != WALTornFrame {
			what += ", and ends in a frame that does not check"
		}
		what += fmt.Sprintf(" at byte %d", sc.tornAt)
		switch {
		case g.HeaderSeq == sc.tornSeq:
			what += fmt.Sprintf(" (record %d)", sc.tornSeq)
		case g.HeaderSeq != 0:
			what += fmt.Sprintf(" (it should be record %d; its header says %d)", sc.tornSeq, g.HeaderSeq)
		default:
			what += fmt.Sprintf(" (it should be record %d)", sc.tornSeq)
		}
	}
	extent := max(w.recordedSize, size)
	switch {
	case w.missing:
		g.AtMostBytes = w.recordedSize
	case sc.torn:
		g.AtMostBytes = extent - int64(sc.tornAt)
	default:
		g.AtMostBytes = extent - int64(sc.end)
	}
	if w.state == walStateClosed {
		// Close moved every record into state.db and emptied the file before it said so.
		return nil, what + "; the gateway stopped cleanly last, so every acknowledged record is in state.db and none is lost. Check the disk that holds it"
	}
	lost := fmt.Sprintf("records acknowledged since the last move into state.db are lost: those after record %d, at most %d bytes of records", g.AfterSeq, g.AtMostBytes)
	const prelude = "The gateway did not stop cleanly, so the file may have held acknowledged records that were not yet moved into state.db: "
	var why string
	switch {
	case g.Found == WALTornFrame:
		why = "This is either a crash in the middle of writing that frame, and then that batch was never acknowledged and nothing acknowledged is lost; or damage to the file, and then " + lost + "."
	case w.missing:
		why = prelude + "the file was removed or replaced, and any " + lost + "."
	default:
		why = prelude + "the file was damaged or truncated, and any " + lost + "."
	}
	g.Message = what + ". " + why + fmt.Sprintf(" New records take the sequence numbers from %d on, the audit_gap record first. Check the disk (kernel log, SMART) and keep a copy of the state directory as it is now.", g.AfterSeq+1)
	return g, ""
}

// WALGap is what Open found wrong with the write-ahead file that may have lost acknowledged
// records, or nil. A writable Open has logged it at ERROR and appended a [RecordAuditGap]
// record; a read-only Open only reports it here, for the command to print.
func (s *Store) WALGap() *WALGap { return s.gap }

// auditGap appends the record of the gap Open found, before anything else is recorded.
func (s *Store) auditGap() {
	g := s.gap
	if g == nil || s.readOnly {
		return
	}
	detail := map[string]any{
		"wal": g.Path, "size": g.Size, "after_seq": g.AfterSeq, "at_most_bytes": g.AtMostBytes,
	}
	if g.RecordedSize > 0 {
		detail["recorded_size"] = g.RecordedSize
	}
	if g.Offset >= 0 {
		detail["offset"] = g.Offset
	}
	if g.HeaderSeq != 0 {
		detail["header_seq"] = g.HeaderSeq
	}
	rec := Record{Type: RecordAuditGap, Kind: g.Found, Reason: g.Message, Detail: detail}
	if _, err := s.audit.AppendSync(context.Background(), rec); err != nil {
		s.log.Error("the audit record of a gap in the audit write-ahead file was not written", "wal", g.Path, "error", err)
	}
}

// AuditGap is a gap recorded on the audit chain: a [RecordAuditGap] record.
type AuditGap struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// gapMarker is in the stored bytes of every gap record (and few others).
var gapMarker = []byte(`"type":"` + RecordAuditGap + `"`)

// gapOf is the gap a verified stored record records, if it is a gap record.
func gapOf(seq uint64, value []byte) (AuditGap, bool) {
	if !bytes.Contains(value, gapMarker) {
		return AuditGap{}, false
	}
	var r Record
	if json.Unmarshal(value, &r) != nil || r.Type != RecordAuditGap {
		return AuditGap{}, false
	}
	return AuditGap{Seq: seq, Kind: r.Kind, Reason: r.Reason}, true
}
