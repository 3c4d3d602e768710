package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
)

// scanChunk is how many stored records one read transaction looks at. Readers work in chunks so
// that a slow consumer (an HTTP export) never holds a transaction open for long: a long read
// transaction would stall the audit writer when the file has to grow.
const scanChunk = 1024

// AuditFilter selects records for [Store.AuditScan]. Zero fields match everything.
type AuditFilter struct {
	Server    string
	Tool      string
	Kind      string
	Type      string
	Principal string
	// TraceID keeps the records of one trace (a call's record, and the lockout and approval
	// records it caused), from the trace id a tracing backend shows.
	TraceID string
	// Since keeps records whose Time is not before it.
	Since time.Time
	// AfterSeq keeps records with a greater Seq (for tailing).
	AfterSeq uint64
	// BeforeSeq, when positive, keeps records with a smaller Seq (for paging back): with Limit
	// the read starts there, so a page of older records costs what the first page does.
	BeforeSeq uint64
	// Limit, when positive, keeps only the last Limit matching records.
	Limit int
}

func (f AuditFilter) match(r *Record) bool {
	return (f.Server == "" || r.Server == f.Server) &&
		(f.Tool == "" || r.Tool == f.Tool) &&
		(f.Kind == "" || r.Kind == f.Kind) &&
		(f.Type == "" || r.Type == f.Type) &&
		(f.Principal == "" || r.Principal == f.Principal) &&
		(f.TraceID == "" || r.TraceID == f.TraceID) &&
		(f.Since.IsZero() || !r.Time.Before(f.Since))
}

// VerifyError is the first break in the audit chain found by [Store.AuditVerify].
type VerifyError struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

func (e *VerifyError) Error() string { return fmt.Sprintf("audit record %d: %s", e.Seq, e.Reason) }

// AuditScan calls fn with each committed record that matches f, in Seq order, until fn returns
// false. A stored record that cannot be parsed is skipped and logged; [Store.AuditVerify]
// reports it.
func (s *Store) AuditScan(f AuditFilter, fn func(Record) bool) error {
	if f.Limit > 0 {
		recs, err := s.auditLast(f)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if !fn(r) {
				return nil
			}
		}
		return nil
	}
	next := f.AfterSeq + 1
	for {
		var (
			recs []Record
			done bool
		)
		err := s.auditView(func(c *auditCursor) error {
			k, v := c.Seek(seqKey(next))
			for n := 0; k != nil && n < scanChunk; k, v = c.Next() {
				n++
				if len(k) == 8 {
					seq := binary.BigEndian.Uint64(k)
					if f.BeforeSeq > 0 && seq >= f.BeforeSeq {
						k = nil
						break
					}
					next = seq + 1
				}
				r, ok := s.decodeRecord(k, v)
				if ok && f.match(&r) {
					recs = append(recs, r)
				}
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return fmt.Errorf("read audit log in %s: %w", s.path, err)
		}
		for _, r := range recs {
			if !fn(r) {
				return nil
			}
		}
		if done {
			return nil
		}
	}
}

// auditLast collects the last f.Limit matching records by reading backwards, oldest first.
func (s *Store) auditLast(f AuditFilter) ([]Record, error) {
	var (
		out    []Record
		before = f.BeforeSeq // next chunk reads records below this seq; 0 = from the end
	)
	for len(out) < f.Limit {
		done := false
		err := s.auditView(func(c *auditCursor) error {
			var k, v []byte
			if before == 0 {
				k, v = c.Last()
			} else if k, _ = c.Seek(seqKey(before)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
			for n := 0; k != nil && n < scanChunk && len(out) < f.Limit; k, v = c.Prev() {
				n++
				if len(k) != 8 {
					continue
				}
				seq := binary.BigEndian.Uint64(k)
				if seq <= f.AfterSeq {
					k = nil
					break
				}
				before = seq
				r, ok := s.decodeRecord(k, v)
				if ok && f.match(&r) {
					out = append(out, r)
				}
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read audit log in %s: %w", s.path, err)
		}
		if done {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// AuditLast returns the last committed record; false when the log is empty or its last record
// cannot be read.
func (s *Store) AuditLast() (Record, bool) {
	var (
		r  Record
		ok bool
	)
	err := s.auditView(func(c *auditCursor) error {
		if k, v := c.Last(); k != nil {
			r, ok = s.decodeRecord(k, v)
		}
		return nil
	})
	if err != nil {
		return Record{}, false
	}
	return r, ok
}

func (s *Store) decodeRecord(k, v []byte) (Record, bool) {
	var r Record
	if len(k) != 8 {
		s.log.Warn("unexpected key in the audit log; skipped", "key", fmt.Sprintf("%x", k), "file", s.path)
		return r, false
	}
	if err := json.Unmarshal(v, &r); err != nil {
		s.log.Warn("unreadable audit record skipped; run `"+pastable.Command("audit", "verify")+"`",
			"seq", binary.BigEndian.Uint64(k), "file", s.path, "err", err)
		return r, false
	}
	return r, true
}

// AuditVerify walks the whole audit log in Seq order, recomputing every record's hash over its
// stored bytes and checking every Prev link and that no sequence number is missing. It returns
// how many records verified before the first break, and that break (nil when the chain is
// intact). A single changed byte in a stored record is reported at that record.
//
// After retention has pruned the oldest records, the walk starts at the first kept record: the
// last applied checkpoint (in meta) says which that is and what its Prev must be, and the
// checkpoint record it names must be on the chain, saying the same. So a kept record, the
// checkpoint record or the meta copy that was changed, and a record removed from the start or
// the middle, each break verification.
//
// A gap Open recorded (a [RecordAuditGap] record) does not break the chain, which continues
// across it; [Store.AuditVerifyGaps] also returns the gaps.
func (s *Store) AuditVerify() (checked uint64, bad *VerifyError) {
	checked, bad, _ = s.AuditVerifyGaps()
	return checked, bad
}

// AuditVerifyGaps is [Store.AuditVerify], and the gaps recorded on the verified part of the
// chain, in order: records acknowledged before each may have been lost (walgap.go).
func (s *Store) AuditVerifyGaps() (checked uint64, bad *VerifyError, gaps []AuditGap) {
	var (
		cp     Checkpoint
		pruned bool
	)
	if err := s.view(func(tx *bolt.Tx) (err error) {
		cp, pruned, err = readPruned(tx)
		return err
	}); err != nil {
		return 0, &VerifyError{Seq: 1, Reason: err.Error()}, nil
	}
	expect, prev := uint64(1), ""
	if pruned {
		expect, prev = cp.LastSeq+1, cp.LastHash
	}
	start := expect
	for {
		done := false
		err := s.auditView(func(c *auditCursor) error {
			if expect == start && pruned {
				if first, _ := c.First(); first != nil && bytes.Compare(first, seqKey(start)) < 0 {
					bad = &VerifyError{Seq: binary.BigEndian.Uint64(first), Reason: fmt.Sprintf(
						"record is stored although the record of pruned records (checkpoint record %d) says records up to %d were pruned: it was changed",
						cp.CheckpointSeq, cp.LastSeq)}
					return nil
				}
			}
			k, v := c.Seek(seqKey(expect))
			for n := 0; k != nil && n < scanChunk; k, v = c.Next() {
				n++
				if len(k) != 8 {
					bad = &VerifyError{Seq: expect, Reason: fmt.Sprintf("unexpected key %x in the audit log", k)}
					return nil
				}
				if seq := binary.BigEndian.Uint64(k); seq != expect {
					bad = &VerifyError{Seq: expect, Reason: fmt.Sprintf("record is missing (the next stored record is %d)", seq)}
					return nil
				}
				link := fmt.Sprintf("the hash of record %d: a record before it was changed, removed or replaced", expect-1)
				if expect == start && pruned {
					link = fmt.Sprintf("the hash of the last pruned record %d in checkpoint record %d: the checkpoint was changed, or records were removed", cp.LastSeq, cp.CheckpointSeq)
				}
				hash, reason := verifyRecord(expect, v, prev, link)
				if reason == "" && pruned && expect == cp.CheckpointSeq {
					reason = checkCheckpoint(v, cp)
				}
				if reason != "" {
					bad = &VerifyError{Seq: expect, Reason: reason}
					return nil
				}
				if g, ok := gapOf(expect, v); ok {
					gaps = append(gaps, g)
				}
				prev = hash
				expect++
				checked++
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return checked, &VerifyError{Seq: expect, Reason: "cannot read the audit log: " + err.Error()}, gaps
		}
		if bad != nil {
			return checked, bad, gaps
		}
		if done {
			if pruned && expect <= cp.CheckpointSeq {
				return checked, &VerifyError{Seq: cp.CheckpointSeq, Reason: fmt.Sprintf(
					"checkpoint record is missing: the record of pruned records says it holds the digest of records %d to %d", cp.FirstSeq, cp.LastSeq)}, gaps
			}
			return checked, nil, gaps
		}
	}
}

// checkCheckpoint checks the checkpoint record that meta names against meta's copy.
func checkCheckpoint(value []byte, meta Checkpoint) string {
	got, ok := checkpointOf(value)
	switch {
	case !ok:
		return "the record of pruned records names this record as its checkpoint, but it is not a checkpoint record: the record of pruned records was changed"
	case !got.same(meta):
		return fmt.Sprintf("checkpoint record says records %d to %d (last hash %s) were pruned, but the record of pruned records says %d to %d (last hash %s): one of them was changed",
			got.FirstSeq, got.LastSeq, got.LastHash, meta.FirstSeq, meta.LastSeq, meta.LastHash)
	}
	return ""
}

// verifyRecord checks one stored record against its position and the previous record's hash
// (link says what that hash is, for the message). It returns the record's hash, or why the
// record breaks the chain.
func verifyRecord(seq uint64, value []byte, prev, link string) (hash, reason string) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return "", "record is not valid JSON: " + err.Error()
	}
	claimed, actual, ok := storedHash(value)
	switch {
	case !ok:
		return "", "record does not end with its hash"
	case actual != claimed:
		return "", "record's contents do not match its hash: the record was changed after it was written"
	case r.Seq != seq:
		return "", fmt.Sprintf("record says it is %d but is stored as %d", r.Seq, seq)
	case r.Prev != prev:
		return "", "record's prev link does not match " + link
	}
	return claimed, ""
}

// auditCursor walks the audit bucket followed by the records that are durable in the
// write-ahead file and not yet in the bucket, as one sequence, with bbolt's cursor methods.
type auditCursor struct {
	c    *bolt.Cursor // nil when there is no bucket
	ov   []walEntry   // every entry's seq is greater than the bucket's last
	i    int          // position in ov while inOv
	inOv bool
}

// auditView runs fn in a read transaction with a cursor over every durable record. The records
// of the write-ahead file are taken before the transaction begins: one that the mover put into
// the bucket meanwhile is then in both, and is read from the bucket.
func (s *Store) auditView(fn func(c *auditCursor) error) error {
	ov := s.audit.overlay()
	return s.view(func(tx *bolt.Tx) error {
		cur := &auditCursor{}
		if b := tx.Bucket(bucketAudit); b != nil {
			cur.c = b.Cursor()
			if k, _ := cur.c.Last(); len(k) == 8 {
				ov = ov[seekEntry(ov, binary.BigEndian.Uint64(k)+1):]
			}
		}
		cur.ov = ov
		return fn(cur)
	})
}

func (c *auditCursor) entry() ([]byte, []byte) {
	c.inOv = true
	e := &c.ov[c.i]
	return seqKey(e.seq), e.value
}

func (c *auditCursor) overlayFrom(i int) ([]byte, []byte) {
	if i < 0 || i >= len(c.ov) {
		c.inOv = false
		return nil, nil
	}
	c.i = i
	return c.entry()
}

// First moves to the first record.
func (c *auditCursor) First() ([]byte, []byte) {
	if c.c != nil {
		if k, v := c.c.First(); k != nil {
			c.inOv = false
			return k, v
		}
	}
	return c.overlayFrom(0)
}

// Last moves to the last record.
func (c *auditCursor) Last() ([]byte, []byte) {
	if len(c.ov) > 0 {
		return c.overlayFrom(len(c.ov) - 1)
	}
	c.inOv = false
	if c.c == nil {
		return nil, nil
	}
	return c.c.Last()
}

// Seek moves to the first record whose key is key or after it.
func (c *auditCursor) Seek(key []byte) ([]byte, []byte) {
	if c.c != nil {
		if k, v := c.c.Seek(key); k != nil {
			c.inOv = false
			return k, v
		}
	}
	seq := uint64(0)
	if len(key) == 8 {
		seq = binary.BigEndian.Uint64(key)
	}
	return c.overlayFrom(seekEntry(c.ov, seq))
}

// Next moves to the next record.
func (c *auditCursor) Next() ([]byte, []byte) {
	if c.inOv {
		return c.overlayFrom(c.i + 1)
	}
	if c.c != nil {
		if k, v := c.c.Next(); k != nil {
			return k, v
		}
	}
	return c.overlayFrom(0)
}

// Prev moves to the previous record.
func (c *auditCursor) Prev() ([]byte, []byte) {
	if c.inOv {
		if c.i > 0 {
			return c.overlayFrom(c.i - 1)
		}
		c.inOv = false
		if c.c == nil {
			return nil, nil
		}
		return c.c.Last()
	}
	if c.c == nil {
		return nil, nil
	}
	return c.c.Prev()
}
