package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// RecordCheckpoint is the type of the record the retention pruner appends before it removes a
// batch of the oldest records: its Detail is a [Checkpoint].
const RecordCheckpoint = "checkpoint"

// keyPruned is the meta key of the last applied checkpoint: a [Checkpoint] with the Seq of the
// checkpoint record (CheckpointSeq). It is written in the transaction that deletes the batch.
var keyPruned = []byte("audit_pruned")

// Checkpoint is what a checkpoint record says about everything pruned up to it. Pruning keeps
// the chain verifiable from the first kept record: its Prev is LastHash, and the checkpoint
// record itself is on the chain after it, so neither can change without [Store.AuditVerify]
// noticing. Digest lets an archive of the pruned records (`mcp-gateway audit export`) be checked
// against the log: it is the running SHA-256 over the Hash of every record pruned, in Seq order
// ([ChainDigest]).
type Checkpoint struct {
	// FirstSeq is the first record ever pruned (1); LastSeq the last, so the first kept record
	// is LastSeq+1.
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// BatchFirst is the first record of the batch this checkpoint pruned.
	BatchFirst uint64 `json:"batch_first"`
	// Count is how many records have been pruned in all.
	Count uint64 `json:"count"`
	// LastHash is the Hash of record LastSeq: the Prev of the first kept record.
	LastHash string `json:"last_hash"`
	// Digest is ChainDigest over the Hash of records FirstSeq..LastSeq.
	Digest string `json:"digest"`
	// CheckpointSeq is the Seq of the checkpoint record; only in the meta copy.
	CheckpointSeq uint64 `json:"checkpoint_seq,omitempty"`
}

// ChainDigest extends a running digest by one record's hash: the hex SHA-256 of digest followed
// by hash. The digest of no records is "".
func ChainDigest(digest, hash string) string {
	h := sha256.New()
	h.Write([]byte(digest))
	h.Write([]byte(hash))
	return hex.EncodeToString(h.Sum(nil))
}

// detail is the checkpoint as a record's Detail.
func (c Checkpoint) detail() map[string]any {
	return map[string]any{
		"first_seq": c.FirstSeq, "last_seq": c.LastSeq, "batch_first": c.BatchFirst,
		"count": c.Count, "last_hash": c.LastHash, "digest": c.Digest,
	}
}

// same reports whether two checkpoints say the same about what was pruned.
func (c Checkpoint) same(o Checkpoint) bool {
	c.CheckpointSeq, o.CheckpointSeq = 0, 0
	return c == o
}

// checkpointOf reads the checkpoint in a stored checkpoint record; ok is false when the record
// is not one.
func checkpointOf(value []byte) (Checkpoint, bool) {
	var r struct {
		Type   string
		Detail Checkpoint
	}
	if json.Unmarshal(value, &r) != nil || r.Type != RecordCheckpoint {
		return Checkpoint{}, false
	}
	return r.Detail, true
}

// readPruned returns the last applied checkpoint from meta; ok is false when nothing has been
// pruned.
func readPruned(tx *bolt.Tx) (cp Checkpoint, ok bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return cp, false, nil
	}
	v := meta.Get(keyPruned)
	if v == nil {
		return cp, false, nil
	}
	if err := json.Unmarshal(v, &cp); err != nil {
		return cp, false, fmt.Errorf("the record of pruned audit records (meta %q) is damaged: %w", keyPruned, err)
	}
	return cp, true, nil
}

// AuditPruned returns the last applied checkpoint: what retention has removed from the audit
// log. ok is false when nothing has been pruned.
func (s *Store) AuditPruned() (cp Checkpoint, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		cp, ok, err = readPruned(tx)
		return err
	})
	return cp, ok, err
}
