package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// AuditExport calls fn with the stored bytes of each committed record that matches f (its Limit
// is ignored), in Seq order, until fn returns an error, which AuditExport returns. The bytes are
// the record exactly as stored: one JSON object with every field, whose Hash can be recomputed
// from the line itself, so an archive made from them can be checked against the chain and
// against a checkpoint's digest after the records are pruned. A record that cannot be parsed is
// exported as it is when f matches everything, and skipped otherwise.
func (s *Store) AuditExport(f AuditFilter, fn func(raw []byte) error) error {
	next := f.AfterSeq + 1
	all := f == (AuditFilter{AfterSeq: f.AfterSeq, Limit: f.Limit})
	for {
		var (
			lines [][]byte
			done  bool
		)
		err := s.auditView(func(c *auditCursor) error {
			k, v := c.Seek(seqKey(next))
			for n := 0; k != nil && n < scanChunk; k, v = c.Next() {
				n++
				if len(k) == 8 {
					next = binary.BigEndian.Uint64(k) + 1
				}
				r, ok := s.decodeRecord(k, v)
				if (ok && f.match(&r)) || (!ok && all) {
					lines = append(lines, bytes.Clone(v))
				}
			}
			done = k == nil
			return nil
		})
		if err != nil {
			return fmt.Errorf("read audit log in %s: %w", s.path, err)
		}
		for _, l := range lines {
			if err := fn(l); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}
