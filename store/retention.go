package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
)

// Retention bounds the audit log (audit.retention). The zero value keeps everything.
type Retention struct {
	// MaxAge prunes records whose Time is older than this; 0 keeps records of any age.
	MaxAge time.Duration
	// MaxBytes prunes the oldest records while the audit records' stored bytes (keys plus
	// values) exceed it; 0 keeps any amount. The file is larger by bbolt's page overhead and
	// by the other buckets.
	MaxBytes int64
}

func (r Retention) enabled() bool { return r.MaxAge > 0 || r.MaxBytes > 0 }

const (
	// pruneBatch and pruneBatchBytes bound one batch, so that each delete transaction is short
	// and the writer is not held up.
	pruneBatch      = 1024
	pruneBatchBytes = 4 << 20
	// pruneGap is the least time between two rounds while records keep arriving.
	pruneGap = 100 * time.Millisecond
	// pruneTick is how often an idle store looks for records that aged out.
	pruneTick = time.Minute
	// checkpointBytes is about what one checkpoint record takes; a batch frees this much more
	// than the excess so that the checkpoint does not push the log over the bound again.
	checkpointBytes = 1024
)

// pruner removes the oldest audit records beyond the retention bounds in the background. It is
// owned by the Store: started by Open, stopped by Close before the audit writer closes.
//
// A round counts the bytes of records appended since the last round, then, while a bound is
// exceeded, prunes one batch: it checks the batch's records against their hashes and links
// (the pruner never removes a record that does not verify: that would hide the damage), appends
// a checkpoint record through the audit writer, and then deletes the batch and records the
// checkpoint in meta in one short transaction. A crash between the two leaves a checkpoint that
// was never applied, which verification ignores; the next round prunes the batch again.
type pruner struct {
	s      *Store
	ret    Retention
	poke   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the pruner goroutine (or a test calling round directly).
	loaded  bool       // state has been read from meta
	bytes   int64      // stored bytes of the audit records counted so far
	counted uint64     // the last Seq counted
	state   Checkpoint // the last applied checkpoint; zero before the first prune
	halted  error      // set when a record does not verify: pruning stops until restart
}

// damagedError is a record the pruner would prune that does not verify.
type damagedError struct{ msg string }

func (e *damagedError) Error() string { return e.msg }

func damaged(format string, args ...any) error { return &damagedError{fmt.Sprintf(format, args...)} }

func newPruner(s *Store, ret Retention) *pruner {
	ctx, cancel := context.WithCancel(context.Background())
	return &pruner{s: s, ret: ret, poke: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// start runs the pruner until stop.
func (p *pruner) start() {
	go func() {
		defer close(p.done)
		var tick <-chan time.Time
		if p.ret.MaxAge > 0 {
			t := time.NewTicker(pruneTick)
			defer t.Stop()
			tick = t.C
		}
		for {
			if err := p.round(); err != nil && p.ctx.Err() == nil && p.halted == nil {
				p.s.log.Error("audit retention: pruning failed; will retry", "file", p.s.path, "err", err)
			}
			select {
			case <-p.ctx.Done():
				return
			case <-p.poke:
			case <-tick:
			}
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(pruneGap):
			}
		}
	}()
}

// wake asks for a round soon; it never blocks (called by the audit writer after a commit).
func (p *pruner) wake() {
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

// stop ends the pruner and waits for it. A checkpoint it was appending is still written.
func (p *pruner) stop() {
	p.cancel()
	<-p.done
}

// round prunes batches until the log is within its bounds.
func (p *pruner) round() error {
	if p.halted != nil {
		return p.halted
	}
	if !p.loaded {
		err := p.s.view(func(tx *bolt.Tx) error {
			cp, _, err := readPruned(tx)
			p.state = cp
			return err
		})
		if err != nil {
			return p.halt(err)
		}
		p.loaded = true
	}
	var total batch
	defer func() {
		if total.n > 0 {
			p.s.log.Info("audit retention pruned the oldest records", "from", total.from, "to", total.to,
				"records", total.n, "bytes", total.bytes, "first_kept", p.state.LastSeq+1, "file", p.s.path)
		}
	}()
	for p.ctx.Err() == nil {
		if err := p.count(); err != nil {
			return err
		}
		b, err := p.plan()
		if _, bad := err.(*damagedError); bad {
			return p.halt(err)
		}
		if err != nil || b.n == 0 {
			return err
		}
		if err := p.apply(b); err != nil {
			return err
		}
		if total.n == 0 {
			total.from = b.from
		}
		total.n, total.bytes, total.to = total.n+b.n, total.bytes+b.bytes, b.to
	}
	return p.ctx.Err()
}

// halt stops pruning after a record that does not verify, and says so once.
func (p *pruner) halt(err error) error {
	p.halted = err
	p.s.log.Error("audit retention stopped: a record it would prune does not verify, and pruning it would hide that; "+
		"run `"+pastable.Command("audit", "verify")+"`, export the log (`"+pastable.Command("audit", "export")+"`), and restart the gateway once it is understood",
		"file", p.s.path, "err", err)
	return err
}

// count adds the bytes of the records appended since the last count, in short read
// transactions.
func (p *pruner) count() error {
	// The pruner reads state.db's audit bucket only: first move what the write-ahead file
	// holds, so that it sees every record appended before. A move that fails leaves them for
	// the next round; what is in the bucket can still be pruned.
	_ = p.s.audit.movePass()
	for {
		n := 0
		err := p.s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketAudit).Cursor()
			for k, v := c.Seek(seqKey(p.counted + 1)); k != nil && n < scanChunk; k, v = c.Next() {
				p.bytes += int64(len(k) + len(v))
				if len(k) == 8 {
					p.counted = binary.BigEndian.Uint64(k)
				}
				n++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("count the audit records in %s: %w", p.s.path, err)
		}
		if n < scanChunk {
			return nil
		}
	}
}

// batch is the records one checkpoint prunes: seqs from..to, their stored bytes, and the
// checkpoint after them.
type batch struct {
	n, bytes int64
	from, to uint64
	next     Checkpoint
	why      string
}

// plan picks the next batch from the oldest record on: records while the stored bytes are over
// MaxBytes (down to 90% of it, so that pruning is not a per-commit event) and records older
// than MaxAge, never the last record (it anchors the chain), at most pruneBatch records and
// pruneBatchBytes bytes. Each record is checked against its hash and its link before it is
// taken.
func (p *pruner) plan() (batch, error) {
	var need int64
	if p.ret.MaxBytes > 0 && p.bytes > p.ret.MaxBytes {
		need = p.bytes - p.ret.MaxBytes*9/10 + checkpointBytes
	}
	var cutoff time.Time
	if p.ret.MaxAge > 0 {
		cutoff = p.s.now().Add(-p.ret.MaxAge)
	}
	if need == 0 && cutoff.IsZero() {
		return batch{}, nil
	}
	b := batch{next: p.state}
	err := p.s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		last, _ := c.Last()
		expect, prev := p.state.LastSeq+1, p.state.LastHash
		for k, v := c.Seek(seqKey(expect)); k != nil && b.n < pruneBatch && b.bytes < pruneBatchBytes; k, v = c.Next() {
			if string(k) == string(last) {
				break
			}
			var r struct {
				Seq  uint64
				Time time.Time
				Prev string
			}
			switch {
			case len(k) != 8 || binary.BigEndian.Uint64(k) != expect:
				return damaged("audit record %d is missing (the next stored key is %x)", expect, k)
			case json.Unmarshal(v, &r) != nil:
				return damaged("audit record %d is not valid JSON", expect)
			}
			claimed, actual, ok := storedHash(v)
			switch {
			case !ok || claimed != actual:
				return damaged("audit record %d does not match its hash", expect)
			case r.Seq != expect || r.Prev != prev:
				return damaged("audit record %d does not link to record %d", expect, expect-1)
			}
			byBytes := b.bytes < need
			byAge := !cutoff.IsZero() && r.Time.Before(cutoff)
			if !byBytes && !byAge {
				break
			}
			if b.n == 0 {
				b.from = expect
				b.why = "max_bytes"
				if !byBytes {
					b.why = "max_age"
				}
			}
			b.n++
			b.bytes += int64(len(k) + len(v))
			b.to = expect
			b.next.Digest = ChainDigest(b.next.Digest, claimed)
			prev = claimed
			expect++
		}
		b.next.LastHash = prev
		return nil
	})
	if err != nil || b.n == 0 {
		return batch{}, err
	}
	if b.next.FirstSeq == 0 {
		b.next.FirstSeq = b.from
	}
	b.next.LastSeq, b.next.BatchFirst = b.to, b.from
	b.next.Count += uint64(b.n)
	return b, nil
}

// apply appends the batch's checkpoint to the chain, then deletes the batch and records the
// checkpoint in meta in one transaction.
func (p *pruner) apply(b batch) error {
	rec, err := p.s.audit.AppendSync(p.ctx, Record{
		Type:   RecordCheckpoint,
		Action: "prune",
		Reason: fmt.Sprintf("retention (%s): records %d to %d pruned, %d in all since record %d", b.why, b.from, b.to, b.next.Count, b.next.FirstSeq),
		Detail: b.next.detail(),
	})
	if err != nil {
		return fmt.Errorf("append the checkpoint of audit records %d to %d: %w", b.from, b.to, err)
	}
	next := b.next
	next.CheckpointSeq = rec.Seq
	value, err := json.Marshal(next)
	if err != nil {
		return err
	}
	err = p.s.update(func(tx *bolt.Tx) error {
		cur, _, err := readPruned(tx)
		if err != nil {
			return err
		}
		if cur != p.state {
			return errors.New("the record of pruned audit records changed under the pruner")
		}
		bkt := tx.Bucket(bucketAudit)
		for seq := b.from; seq <= b.to; seq++ {
			if err := bkt.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyPruned, value)
	})
	if err != nil {
		return fmt.Errorf("prune audit records %d to %d from %s: %w", b.from, b.to, p.s.path, err)
	}
	p.state = next
	p.bytes -= b.bytes
	p.s.log.Debug("audit retention pruned a batch", "from", b.from, "to", b.to, "records", b.n,
		"bytes", b.bytes, "bound", b.why, "checkpoint", rec.Seq, "file", p.s.path)
	return nil
}
