package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
)

// Record types. The others: [RecordApproval] (approval.go), [RecordCheckpoint] (checkpoint.go)
// and [RecordAuditGap] (walgap.go), a possible loss of acknowledged records that Open found in
// the write-ahead file.
const (
	RecordCall     = "call"
	RecordOperator = "operator"
	RecordLockout  = "lockout"
)

// Record is one audit log entry: a governed call, an operator action or a lockout (SPEC.md §13).
//
// It is stored as its JSON encoding (field order as declared, Hash last). Hash is the hex
// SHA-256 of that encoding with Hash set to "", and Prev is the previous record's Hash, so a
// change to any stored byte breaks the chain at that record.
//
// The JSON names are snake_case and a field without a value is left out. Records stored before
// the fields had JSON names carry the Go names ("CallID", "Hash"); they are kept as they were
// written, since their hash covers those bytes, and decode the same (UnmarshalJSON).
type Record struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"` // RecordCall, RecordOperator, RecordLockout, RecordApproval, RecordCheckpoint or RecordAuditGap
	Principal string    `json:"principal,omitempty"`
	Session   string    `json:"session,omitempty"`
	Server    string    `json:"server,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	CallID    string    `json:"call_id,omitempty"`
	// TraceID and SpanID are the hex W3C ids of the call's span when telemetry is on (the
	// gateway's server span of the call, the parent of its step spans), so that a record leads
	// to its trace in a tracing backend and a trace to its record. Records written without
	// telemetry, and those written before the fields existed, have neither.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
	// Model is the evidence of the model request that asked for the call (the built-in agent's
	// calls). Other calls' records, and those written before the field existed, have none.
	Model *ModelEvidence `json:"model,omitempty"`
	// Args are the call's arguments after redaction; ArgsDigest is the hex SHA-256 of the
	// original arguments. Both are computed by the caller: the store never sees raw arguments.
	// Args are stored compact; arguments that are not valid JSON are left out.
	Args       json.RawMessage `json:"args,omitempty"`
	ArgsDigest string          `json:"args_digest,omitempty"`
	Decision   string          `json:"decision,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	Outcome    string          `json:"outcome,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	DurationMS float64         `json:"duration_ms,omitempty"`
	// Action names an operator action: unlock, approve, deny, pins_accept, reload, ...
	Action string         `json:"action,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
	Prev   string         `json:"prev,omitempty"`
	Hash   string         `json:"hash"`

	// EndsCall, when set, is the call id of a physical call's journal entry (BeginPhysical):
	// it is removed in the transaction that writes this record, so that at every moment the
	// call has either its journal entry or its record on disk. Not stored.
	EndsCall string `json:"-"`
}

// UnmarshalJSON reads a record in either stored form: snake_case, or the Go field names of
// records written before. A one-word Go name ("Seq") matches its snake_case name anyway, since
// encoding/json matches names without regard to case; the others are read here.
func (r *Record) UnmarshalJSON(b []byte) error {
	type record Record // without this method
	v := struct {
		*record
		OldCallID     string  `json:"CallID"`
		OldArgsDigest string  `json:"ArgsDigest"`
		OldRunID      string  `json:"RunID"`
		OldDurationMS float64 `json:"DurationMS"`
	}{record: (*record)(r)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.CallID = cmp.Or(r.CallID, v.OldCallID)
	r.ArgsDigest = cmp.Or(r.ArgsDigest, v.OldArgsDigest)
	r.RunID = cmp.Or(r.RunID, v.OldRunID)
	r.DurationMS = cmp.Or(r.DurationMS, v.OldDurationMS)
	return nil
}

// AuditLog appends records to the hash-chained audit log, one group commit at a time.
type AuditLog interface {
	// Append queues r and returns without waiting for disk or for room in the queue. It
	// returns false when r was not queued (the queue is full because the disk is not taking
	// writes, or the log is closed); the caller must then say so. A zero r.Time becomes the
	// time it was queued (not when it is committed, which after a disk failure may be much
	// later). The committer assigns Seq, Prev and Hash. r is encoded before Append returns,
	// but r.Args are kept as they are when already compact: the caller must not change their
	// bytes after handing them over.
	Append(r Record) bool
	// AppendSync queues r and waits until the batch holding it is durable, returning the
	// record as stored; when nobody is committing, the caller commits the batch itself. The
	// wait is bounded by ctx and by the store's commit timeout, whichever ends first; a record
	// that was queued is still written later, and the error wraps ErrUnavailable or is ctx's.
	// (A caller that commits waits for its own write and sync, which no timer can cut short:
	// on a disk that hangs, that one caller waits for the disk; the store turns unavailable
	// after 2 s, and while it is, callers leave the commits to the writer goroutine.)
	AppendSync(ctx context.Context, r Record) (Record, error)
	// Flush waits until every record appended before it is committed, bounded like AppendSync.
	Flush(ctx context.Context) error
	// Coming tells the log that a call in flight will append its record (+1), or is done
	// with the log (-1). A caller that leads a commit waits for others to join its batch only
	// while another call is coming (gatherYield): alone, the wait would only cost it time.
	Coming(delta int)
}

var _ AuditLog = (*auditLog)(nil)

// Audit returns the store's audit log.
func (s *Store) Audit() AuditLog { return s.audit }

const (
	// auditQueue is the capacity of the queue: a few full batches, so producers rarely block
	// while a commit is being synced.
	auditQueue = 4096
	// auditMaxBatch caps the records in one transaction, keeping each commit short.
	auditMaxBatch = 512
	// auditRetryMax caps the backoff between attempts to commit a batch that failed.
	auditRetryMax = time.Second
	// auditQueueBytes bounds the memory of queued records: while the disk refuses writes, a
	// flood of large refused calls must not grow the gateway without bound.
	auditQueueBytes = 64 << 20
)

// auditItem is one queued request: a record to write, or (flush) a marker that is released
// when everything queued before it is committed. done is nil for a plain Append.
type auditItem struct {
	rec   Record
	enc   encoded // rec's encoding but for its place on the chain; none for a flush
	flush bool
	done  chan auditResult
	size  int64 // what the record holds in memory, roughly; counted in auditLog.queued
}

// recordSize is roughly what a queued record holds in memory.
func recordSize(r *Record, enc *encoded) int64 {
	return int64(len(r.Args) + len(enc.head) + len(enc.rest) + 512)
}

// auditResult is what a waiter learns: where its record went on the chain, or why not.
type auditResult struct {
	seq        uint64
	prev, hash string
	err        error
}

// chainTail is the last committed record: where the next record's Seq and Prev come from.
type chainTail struct {
	seq  uint64
	hash string
}

// Who commits the queue's records: one committer at a time, the leader, takes records from the
// front of the queue, so they reach the chain in the order they were queued.
const (
	leadNone   = iota
	leadCaller // a caller of AppendSync or Flush, with the batch it took
	leadWriter // the writer goroutine
)

// auditLog is the queue of records and the writer goroutine. A caller that waits for its
// record and finds nobody committing commits the queue itself (lead), without a hand-off to
// another goroutine; the writer goroutine commits what callers do not wait for (Append), what
// is queued while a caller commits, and batches the disk refused.
type auditLog struct {
	s    *Store
	wait time.Duration

	// qmu guards the queue, who commits from it and closed.
	qmu    sync.Mutex
	q      []auditItem
	spare  []auditItem // an empty queue buffer to swap in when a batch takes the whole queue
	leader int
	closed bool
	// room is closed when the queue has room again; nil while nobody waits for it.
	room chan struct{}
	// wake tells the writer goroutine to look at the queue: records wait and nobody commits,
	// a caller handed the queue over, or the log is closing.
	wake chan struct{}

	quit chan struct{} // closed by close: stop retrying a failing commit
	done chan struct{} // closed by the writer when it exits
	lost error         // records given up at close; read after done

	// retrying is set while a batch the disk refused waits to be written again.
	retrying atomic.Bool
	// queued is the memory held by records queued and not yet committed; Append refuses
	// records beyond auditQueueBytes, so a failing disk holds a bounded amount.
	queued atomic.Int64
	// coming counts the calls in flight that will append their record (Coming).
	coming atomic.Int64

	// The leader's: tail, the chain's last record; wal, the write-ahead file (nil when
	// read-only); pos, where the next frame goes; frames, the buffer they are encoded in.
	tail   chainTail
	wal    *walFile
	pos    int64
	frames []byte
	// walMu guards pending: the records synced to the write-ahead file and not yet in
	// state.db, in order (read-only: the records the file holds). It is only appended to and
	// cut from the front, never changed in place, so a reader may keep the slice it got.
	walMu   sync.Mutex
	pending []walEntry
	// moveMu orders the moves into state.db (the mover's, the leader's when the file is full,
	// the last one at close).
	moveMu    sync.Mutex
	movePoke  chan struct{} // many records wait: move them now
	moveWait  chan struct{} // records wait: move them within moveEvery
	moverQuit chan struct{}
	moverDone chan struct{}
	// failMove, when set (tests), fails every move into state.db with its error.
	failMove atomic.Pointer[error]
	// emptied is set by close once every record of the file is in state.db and the file is
	// emptied.
	emptied bool
}

func newAuditLog(s *Store, tail chainTail, wait time.Duration, wal *walFile, pending []walEntry) *auditLog {
	a := &auditLog{
		s:         s,
		wait:      wait,
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		done:      make(chan struct{}),
		tail:      tail,
		wal:       wal,
		pending:   pending,
		movePoke:  make(chan struct{}, 1),
		moveWait:  make(chan struct{}, 1),
		moverQuit: make(chan struct{}),
		moverDone: make(chan struct{}),
	}
	if s.readOnly {
		a.closed = true
		close(a.done)
		close(a.moverDone)
		return a
	}
	go a.run()
	go a.mover()
	if len(pending) > 0 {
		a.moveWait <- struct{}{}
	}
	return a
}

// item prepares r for the queue, in the caller's goroutine: its time, its bounds, its
// encoding.
func (a *auditLog) item(r Record) (auditItem, error) {
	if r.Time.IsZero() {
		r.Time = a.s.now().UTC()
	}
	enc, err := a.encode(&r)
	if err != nil {
		return auditItem{}, err
	}
	return auditItem{rec: r, enc: enc, size: recordSize(&r, &enc)}, nil
}

// poke wakes the writer goroutine unless a wake is already pending.
func (a *auditLog) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Append implements [AuditLog].
func (a *auditLog) Append(r Record) bool {
	it, err := a.item(r)
	if err != nil {
		a.s.log.Error("audit record not queued: it cannot be encoded",
			"type", r.Type, "server", r.Server, "tool", r.Tool, "call_id", r.CallID, "action", r.Action, "err", err)
		return false
	}
	a.qmu.Lock()
	var refused string
	switch {
	case a.closed:
		refused = "audit record appended to a closed or read-only state store; it is not written"
	case a.queued.Load()+it.size > auditQueueBytes:
		refused = "audit record not queued: the records waiting for the disk already hold their memory bound"
	case len(a.q) >= auditQueue:
		refused = "audit record not queued: the queue is full because the state file is not taking writes"
	default:
		a.q = append(a.q, it)
		a.queued.Add(it.size)
		if a.leader == leadNone {
			a.poke()
		}
	}
	a.qmu.Unlock()
	if refused != "" {
		a.s.log.Error(refused, "type", r.Type, "server", r.Server, "tool", r.Tool, "call_id", r.CallID, "action", r.Action)
		return false
	}
	return true
}

// AppendSync implements [AuditLog].
func (a *auditLog) AppendSync(ctx context.Context, r Record) (Record, error) {
	it, err := a.item(r)
	if err != nil {
		return Record{}, err
	}
	it.done = make(chan auditResult, 1)
	res, err := a.enqueueWait(ctx, it)
	if err != nil {
		return Record{}, err
	}
	rec := it.rec
	rec.Seq, rec.Prev, rec.Hash = res.seq, res.prev, res.hash
	return rec, nil
}

// bounded is ctx limited to the store's commit timeout.
func (a *auditLog) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, a.s.commitTimeout, errCommitTimeout)
}

// waitError is the error of a wait that ended before its transaction committed: the store's
// state if it is unavailable, the commit timeout, or the caller's own cancellation.
func (a *auditLog) waitError(ctx context.Context) error {
	if err := a.s.Available(); err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.Is(cause, errCommitTimeout) {
		return fmt.Errorf("%w: %w", ErrUnavailable, cause)
	}
	return ctx.Err()
}

// Coming implements [AuditLog].
func (a *auditLog) Coming(delta int) { a.coming.Add(int64(delta)) }

// Flush implements [AuditLog].
func (a *auditLog) Flush(ctx context.Context) error {
	if a.s.readOnly {
		return nil
	}
	_, err := a.enqueueWait(ctx, auditItem{flush: true, done: make(chan auditResult, 1)})
	return err
}

// enqueueWait queues it and waits for its result. When nobody commits and the store takes
// writes, the caller commits the queue itself, its own record with it.
func (a *auditLog) enqueueWait(ctx context.Context, it auditItem) (auditResult, error) {
	// The bound is made only for a wait: a caller that commits its own record has its result
	// when it is done.
	var cancel context.CancelFunc = func() {}
	bounded := false
	bound := func() {
		if !bounded {
			ctx, cancel = a.bounded(ctx)
			bounded = true
		}
	}
	defer func() { cancel() }()
	for {
		a.qmu.Lock()
		if a.closed {
			a.qmu.Unlock()
			if a.s.readOnly {
				return auditResult{}, ErrReadOnly
			}
			return auditResult{}, ErrClosed
		}
		if len(a.q) < auditQueue {
			break
		}
		if a.room == nil {
			a.room = make(chan struct{})
		}
		room := a.room
		a.qmu.Unlock()
		bound()
		select {
		case <-room:
		case <-ctx.Done():
			return auditResult{}, a.waitError(ctx)
		}
	}
	a.q = append(a.q, it)
	a.queued.Add(it.size)
	switch {
	case a.leader == leadNone && a.s.health.fault.Load() == nil:
		a.leader = leadCaller
		// Before it takes the batch, the leader lets the goroutines that are ready to run go
		// first, when another call is coming (gatherYield).
		if a.coming.Load() > 1 {
			a.qmu.Unlock()
			runtime.Gosched()
			a.qmu.Lock()
		}
		batch := a.take()
		a.qmu.Unlock()
		a.lead(batch)
	case a.leader == leadNone:
		// The disk is failing: the writer goroutine commits, so that this wait stays bounded.
		a.poke()
		a.qmu.Unlock()
	default:
		a.qmu.Unlock()
	}
	select {
	case res := <-it.done:
		return res, res.err
	default:
	}
	bound()
	select {
	case res := <-it.done:
		return res, res.err
	case <-ctx.Done():
		return auditResult{}, a.waitError(ctx)
	}
}

// gatherYield: a caller that finds nobody committing leads, and yields once before it takes
// the queue (runtime.Gosched) when another call is coming (Coming). Under load, the goroutines
// ready to run include calls a few microseconds from their own audit record (their upstream
// answered; the result guards run); they queue behind the leader while it yields and share its
// sync instead of each waiting for a sync of its own. Measured (BenchmarkHotPathParallel, 8
// callers, state on disk, three rounds alternated): records per sync 1.98 → 2.19, process CPU
// per call −7.6%, calls/s +8%. With no other call coming the leader does not yield: the yield
// then gathers nothing and is not free, since the runtime wakes an idle processor's thread for
// the yielded goroutine, which may then go on on that other thread; it cost a call alone about
// 8 µs (BenchmarkChain, p50 36 → 45 µs, before it was made conditional). The records' order on
// the chain is still the order they were queued in.

// take removes the next batch from the front of the queue. Called with qmu held.
func (a *auditLog) take() []auditItem {
	if room := a.room; room != nil {
		close(room)
		a.room = nil
	}
	if len(a.q) <= auditMaxBatch {
		batch := a.q
		a.q, a.spare = a.spare[:0], nil
		return batch
	}
	batch := a.q[:auditMaxBatch:auditMaxBatch]
	a.q = a.q[auditMaxBatch:]
	return batch
}

// recycle keeps a committed batch's buffer for the queue to reuse.
func (a *auditLog) recycle(batch []auditItem) {
	if cap(batch) > 4*auditMaxBatch {
		return
	}
	clear(batch)
	a.qmu.Lock()
	if a.spare == nil {
		a.spare = batch[:0]
	}
	a.qmu.Unlock()
}

// lead commits a batch a caller took from the queue, in one attempt, and hands the queue on:
// to nobody when it is empty, else to the writer goroutine, which also retries the batch when
// the attempt failed (the batch goes back to the front of the queue; its waiters keep
// waiting, each bounded by its own timeout).
func (a *auditLog) lead(batch []auditItem) {
	err := a.attempt(batch)
	if err != nil && !a.retrying.Swap(true) {
		a.logRefused(len(batch), err)
	}
	a.qmu.Lock()
	if err != nil {
		a.q = append(batch, a.q...)
	}
	if len(a.q) > 0 || a.closed {
		a.leader = leadWriter
		a.poke()
	} else {
		a.leader = leadNone
	}
	a.qmu.Unlock()
	if err == nil {
		a.recycle(batch)
	}
}

func (a *auditLog) logRefused(records int, err error) {
	a.s.log.Error("audit log write failed; calls are refused and the records kept in memory until it succeeds", "file", a.s.path, "records", records, "err", err)
}

// close stops accepting records, lets the writer commit everything queued, and waits for it.
func (a *auditLog) close() error {
	a.qmu.Lock()
	if a.closed {
		a.qmu.Unlock()
		<-a.done
		return nil
	}
	a.closed = true
	close(a.quit)
	if a.room != nil {
		close(a.room)
		a.room = nil
	}
	a.poke()
	a.qmu.Unlock()
	<-a.done
	close(a.moverQuit)
	<-a.moverDone
	return errors.Join(a.lost, a.closeWAL())
}

// run is the writer goroutine: woken, it commits what is queued for as long as no caller
// does, and exits once the log is closed and everything queued is written.
func (a *auditLog) run() {
	defer close(a.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for range a.wake {
		if a.serve(timer) {
			return
		}
	}
}

// serve commits batches from the queue until it is empty or a caller leads; true when the
// log is closed and nothing is left. If nobody waits on what is queued and it is not a full
// batch, it first waits up to a.wait for more, so that a stream of Appends shares one sync;
// meanwhile it does not lead, so a caller that waits commits everything at once.
func (a *auditLog) serve(timer *time.Timer) bool {
	waited := false
	for {
		a.qmu.Lock()
		if a.leader == leadCaller {
			a.qmu.Unlock()
			return false // it hands the queue over when it is done
		}
		if len(a.q) == 0 {
			a.leader = leadNone
			closed := a.closed
			a.qmu.Unlock()
			return closed
		}
		if !waited && a.wait > 0 && !a.closed && len(a.q) < auditMaxBatch && !anyWaiter(a.q) {
			a.leader = leadNone
			a.qmu.Unlock()
			timer.Reset(a.wait)
			select {
			case <-timer.C:
			case <-a.quit:
				timer.Stop()
			}
			waited = true
			continue
		}
		a.leader = leadWriter
		batch := a.take()
		a.qmu.Unlock()
		if a.commit(batch) {
			a.recycle(batch)
		}
		waited = false
	}
}

// anyWaiter reports whether a caller waits on one of the items.
func anyWaiter(items []auditItem) bool {
	for i := range items {
		if items[i].done != nil {
			return true
		}
	}
	return false
}

// commit writes a batch, retrying with backoff while the disk refuses it: records are not
// dropped while the store is open. Once the store is closing, a failing batch is given up,
// its waiters get the error, and Close reports how many records were lost. It reports whether
// the batch's buffer may be reused.
func (a *auditLog) commit(batch []auditItem) bool {
	defer a.retrying.Store(false)
	return a.commitPart(batch)
}

// commitPart commits batch, or, when the disk refuses it whole, its halves in order: a disk with
// room for some records takes them, so a large batch never blocks the log for good. A single
// record the disk refuses is retried with backoff.
func (a *auditLog) commitPart(batch []auditItem) bool {
	backoff := 10 * time.Millisecond
	for {
		err := a.attempt(batch)
		if err == nil {
			return true
		}
		if !a.retrying.Swap(true) {
			a.logRefused(len(batch), err)
		}
		if len(batch) > 1 {
			half := len(batch) / 2
			a.commitPart(batch[:half])
			a.commitPart(batch[half:])
			return false
		}
		select {
		case <-a.quit:
			n := 0
			for _, it := range batch {
				if !it.flush {
					n++
				}
				if it.done != nil {
					it.done <- auditResult{err: err}
				}
			}
			a.queued.Add(-sizeOf(batch))
			a.lost = errors.Join(a.lost, fmt.Errorf("audit log %s: %d records could not be written: %w", a.s.path, n, err))
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, auditRetryMax)
		}
	}
}

func sizeOf(batch []auditItem) int64 {
	var n int64
	for i := range batch {
		n += batch[i].size
	}
	return n
}

// attempt writes batch once. When it is durable, its waiters are released, its records handed
// to Options.OnAuditDurable, and their memory no longer counted as queued.
func (a *auditLog) attempt(batch []auditItem) error {
	start := time.Now()
	a.s.health.commitStart.Store(start.UnixNano())
	entries, err := a.write(batch)
	a.s.health.commitStart.Store(0)
	a.s.noteWrite(err)
	if err != nil {
		return err
	}
	if a.s.onCommit != nil && len(entries) > 0 {
		a.s.onCommit(len(entries), time.Since(start))
	}
	for i := range batch {
		if it := &batch[i]; it.done != nil {
			it.done <- auditResult{seq: it.rec.Seq, prev: it.rec.Prev, hash: it.rec.Hash}
		}
	}
	a.durable(batch, entries)
	a.queued.Add(-sizeOf(batch))
	return nil
}

// durable passes each record of a batch just made durable to Options.OnAuditDurable, in order;
// entries are the batch's records as stored (write's result).
func (a *auditLog) durable(batch []auditItem, entries []walEntry) {
	if a.s.onDurable == nil {
		return
	}
	j := 0
	for i := range batch {
		if batch[i].flush {
			continue
		}
		a.s.onDurable(entries[j].seq, entries[j].value, batch[i].rec.Hash)
		j++
	}
}

// write seals each record onto the chain and makes the batch durable: appended to the
// write-ahead file with one sync, or, for a batch larger than the whole file, in one state.db
// transaction after everything the file holds. The chain tail moves only once the batch is
// durable. It returns the batch's records as stored.
func (a *auditLog) write(batch []auditItem) ([]walEntry, error) {
	tail := a.tail
	entries := make([]walEntry, 0, len(batch))
	need := int64(0)
	for i := range batch {
		if batch[i].flush {
			continue
		}
		value := seal(&batch[i], tail)
		r := &batch[i].rec
		tail = chainTail{seq: r.Seq, hash: r.Hash}
		entries = append(entries, walEntry{seq: r.Seq, value: value, ends: r.EndsCall})
		need += int64(frameSize(&entries[len(entries)-1]))
	}
	if len(entries) == 0 {
		return nil, nil
	}
	if a.wal == nil || need > a.wal.size {
		if err := a.moveAll(); err != nil {
			return nil, err
		}
		if err := a.s.putAudit(entries); err != nil {
			return nil, err
		}
		a.tail = tail
		return entries, nil
	}
	a.rewind()
	if a.pos+need > a.wal.size {
		// The file is full: move what it holds now, then start it again.
		if err := a.moveAll(); err != nil {
			return nil, fmt.Errorf("the audit write-ahead file %s is full and its records cannot be moved into the state file: %w", WALFileName, err)
		}
		a.rewind()
	}
	frames := a.frames[:0]
	for i := range entries {
		frames = appendFrame(frames, &entries[i], entries[0].seq)
	}
	if cap(frames) <= 1<<20 {
		a.frames = frames
	}
	if err := a.wal.write(frames, a.pos); err != nil {
		return nil, err
	}
	a.pos += need
	a.wal.used = max(a.wal.used, a.pos)
	a.walMu.Lock()
	a.pending = append(a.pending, entries...)
	n := len(a.pending)
	a.walMu.Unlock()
	a.tail = tail
	wake := a.moveWait
	if n >= moveRecords || a.pos > a.wal.size/2 {
		wake = a.movePoke
	}
	select {
	case wake <- struct{}{}:
	default:
	}
	return entries, nil
}

// rewind starts the write-ahead file again from its start once everything in it is in
// state.db. The frames left after the new ones are recognised on replay: their sequence
// numbers do not follow.
func (a *auditLog) rewind() {
	a.walMu.Lock()
	if len(a.pending) == 0 {
		a.pos = 0
	}
	a.walMu.Unlock()
}

// Moving records from the write-ahead file into state.db.
const (
	// moveEvery is how often the mover moves what the file holds.
	moveEvery = 50 * time.Millisecond
	// moveRecords records in the file wake the mover before moveEvery.
	moveRecords = 1024
	// moveTxRecords caps the records in one move transaction.
	moveTxRecords = 4096
)

// mover moves the records synced to the write-ahead file into state.db in the background,
// moveEvery after the first of them was synced, or at once when many wait, retrying with
// backoff while state.db refuses them: meanwhile the file goes on taking records until it is
// full. While nothing waits it sleeps: an idle gateway does not wake for it.
func (a *auditLog) mover() {
	defer close(a.moverDone)
	backoff := time.Duration(0)
	failing := false
	for {
		if !failing && !a.awaitMove() {
			return
		}
		if backoff > 0 {
			select {
			case <-a.moverQuit:
				return
			case <-time.After(backoff):
			}
		}
		err := a.movePass()
		if err != nil {
			if !failing {
				a.s.log.Error("audit records cannot be moved from the write-ahead file into the state file; the write-ahead file keeps taking them until it is full",
					"file", a.s.path, "wal", a.wal.path, "err", err)
			}
			failing = true
			backoff = min(max(2*backoff, 10*time.Millisecond), auditRetryMax)
			continue
		}
		if failing {
			a.s.log.Warn("audit records are moved into the state file again", "file", a.s.path)
		}
		failing, backoff = false, 0
	}
}

// awaitMove waits until records wait to be moved and moveEvery has passed since, or many wait;
// false when the log is closing.
func (a *auditLog) awaitMove() bool {
	select {
	case <-a.moverQuit:
		return false
	case <-a.movePoke:
		return true
	case <-a.moveWait:
	}
	t := time.NewTimer(moveEvery)
	defer t.Stop()
	select {
	case <-a.moverQuit:
		return false
	case <-a.movePoke:
	case <-t.C:
	}
	return true
}

// movePass moves the records the file holds now; those synced meanwhile wait for the next.
func (a *auditLog) movePass() error {
	a.moveMu.Lock()
	defer a.moveMu.Unlock()
	a.walMu.Lock()
	n := len(a.pending)
	a.walMu.Unlock()
	for n > 0 {
		moved, err := a.moveSome(n)
		if err != nil {
			return err
		}
		n -= moved
	}
	return nil
}

// moveAll moves every record the file holds; the leader calls it, so none is added meanwhile.
func (a *auditLog) moveAll() error {
	a.moveMu.Lock()
	defer a.moveMu.Unlock()
	for {
		moved, err := a.moveSome(moveTxRecords)
		if err != nil || moved == 0 {
			return err
		}
	}
}

// moveSome moves up to limit of the oldest records the file holds in one transaction. Called
// with moveMu held.
func (a *auditLog) moveSome(limit int) (int, error) {
	a.walMu.Lock()
	batch := a.pending[:min(len(a.pending), limit, moveTxRecords)]
	a.walMu.Unlock()
	if len(batch) == 0 {
		return 0, nil
	}
	if errp := a.failMove.Load(); errp != nil {
		return 0, *errp
	}
	if err := a.s.putAudit(batch); err != nil {
		return 0, err
	}
	a.walMu.Lock()
	a.pending = a.pending[len(batch):]
	a.walMu.Unlock()
	if a.s.pruner != nil {
		a.s.pruner.wake()
	}
	return len(batch), nil
}

// closeWAL moves what the file still holds into state.db and empties the file. Records that
// cannot be moved stay in it, synced, and are moved at the next Open.
func (a *auditLog) closeWAL() error {
	if a.wal == nil {
		return nil
	}
	defer a.wal.close()
	if err := a.moveAll(); err != nil {
		a.walMu.Lock()
		n := len(a.pending)
		a.walMu.Unlock()
		return fmt.Errorf("%d audit records stay in %s, which is synced: the state file %s did not take them (%w); the next start moves them", n, a.wal.path, a.s.path, err)
	}
	if err := a.wal.empty(); err != nil {
		return fmt.Errorf("empty the audit write-ahead file %s (its records are in the state file, and the next start recognises them): %w", a.wal.path, err)
	}
	a.emptied = true
	return nil
}

// overlay is the records that are durable but not (or, read-only, not known to be) in
// state.db's audit bucket, in order. The caller must not change it.
func (a *auditLog) overlay() []walEntry {
	a.walMu.Lock()
	defer a.walMu.Unlock()
	return a.pending
}

// putAudit puts entries into the audit bucket in one transaction, removing the journal entry
// of each physical call whose record it is.
func (s *Store) putAudit(entries []walEntry) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		// Keys only ever grow, so full pages waste no space and split less.
		b.FillPercent = 1.0
		for i := range entries {
			if err := b.Put(seqKey(entries[i].seq), entries[i].value); err != nil {
				return err
			}
		}
		for i := range entries {
			if entries[i].ends != "" {
				if err := deleteJournal(tx, entries[i].ends); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// encoded is a record's stored form but for its place on the chain: the bytes json.Marshal
// writes for the record with Seq 0, Prev "" and Hash "" are `{"seq":0`, head, args, rest and
// `,"hash":""}`. The caller's goroutine encodes it (encode); the leader only puts the record
// on the chain (seal): its Seq in front, its Prev and Hash at the end.
type encoded struct{ head, args, rest []byte }

// argsMark stands for the arguments while the record is encoded: a one-byte value the
// encoder's own compaction costs nothing on. `,"args":0` can occur nowhere before the
// arguments field (the fields before it are strings, in which a quote is escaped, and the
// time), so its first occurrence is that field.
const (
	argsMark  = `0`
	argsField = `,"args":`
	seqStart  = `{"seq":0`
	hashEnd   = `,"hash":""}`
	prevField = `,"prev":"`
)

// encode bounds r (its texts cut, its arguments compacted, see [CompactJSON]) and encodes it
// but for its place on the chain. Arguments that are not valid JSON are left out (ArgsDigest
// still identifies them), a duration JSON cannot encode becomes 0, and a Detail that cannot be
// encoded is replaced by the reason, so that a record is never lost to its own content.
func (a *auditLog) encode(r *Record) (encoded, error) {
	boundRecord(r)
	if math.IsNaN(r.DurationMS) || math.IsInf(r.DurationMS, 0) {
		r.DurationMS = 0
	}
	if len(r.Args) > 0 {
		r.Args, _ = CompactJSON(r.Args)
	}
	r.Seq, r.Prev, r.Hash = 0, "", ""
	if body, at, ok := appendBody(make([]byte, 0, bodySize(r)), r); ok {
		if at < 0 {
			return encoded{head: body}, nil
		}
		return encoded{head: body[:at:at], args: r.Args, rest: body[at:]}, nil
	}
	args := r.Args
	if len(args) > 0 {
		r.Args = json.RawMessage(argsMark)
	}
	canon, err := json.Marshal(r)
	if err != nil && r.Detail != nil {
		a.s.log.Warn("audit record detail cannot be encoded; storing the reason instead", "type", r.Type, "call_id", r.CallID, "err", err)
		r.Detail = map[string]any{"detail_error": err.Error()}
		canon, err = json.Marshal(r)
	}
	r.Args = args
	if err != nil {
		return encoded{}, fmt.Errorf("encode audit record: %w", err)
	}
	if !bytes.HasPrefix(canon, []byte(seqStart)) || !bytes.HasSuffix(canon, []byte(hashEnd)) {
		return encoded{}, fmt.Errorf("encode audit record: unexpected encoding %.40q", canon)
	}
	body := canon[len(seqStart) : len(canon)-len(hashEnd)]
	if len(args) == 0 {
		return encoded{head: body}, nil
	}
	at := bytes.Index(body, []byte(argsField+argsMark))
	if at < 0 {
		return encoded{}, errors.New("encode audit record: the arguments field is missing")
	}
	at += len(argsField)
	return encoded{head: body[:at:at], args: args, rest: body[at+len(argsMark):]}, nil
}

// seal puts the record of it on the chain after tail: it sets its Seq, Prev and Hash and
// returns its stored bytes, those json.Marshal writes for the record with Hash last, where
// Hash is the SHA-256 of that encoding with Hash "".
func seal(it *auditItem, tail chainTail) []byte {
	r := &it.rec
	r.Seq = tail.seq + 1
	r.Prev = tail.hash
	e := &it.enc
	out := make([]byte, 0, len(`{"seq":`)+20+len(e.head)+len(e.args)+len(e.rest)+len(prevField)+len(r.Prev)+1+len(hashField)+hashHexLen+hashTail)
	out = append(out, `{"seq":`...)
	out = strconv.AppendUint(out, r.Seq, 10)
	out = append(out, e.head...)
	out = append(out, e.args...)
	out = append(out, e.rest...)
	if r.Prev != "" {
		if isLowerHex(r.Prev) {
			out = append(out, prevField...)
			out = append(out, r.Prev...)
			out = append(out, '"')
		} else {
			quoted, _ := json.Marshal(r.Prev)
			out = append(out, `,"prev":`...)
			out = append(out, quoted...)
		}
	}
	out = append(out, hashField...)
	sum := sha256.Sum256(append(out, `"}`...))
	out = hex.AppendEncode(out, sum[:])
	r.Hash = string(out[len(out)-hashHexLen:])
	return append(out, `"}`...)
}

// isLowerHex reports whether s is lowercase hex digits only: a hash, which JSON encodes as it
// is.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// The stored form of a record ends with hashField, the 64 hex digits of its hash and `"}`;
// records written before the JSON names were snake_case end with oldHashField instead.
const (
	hashField    = `,"hash":"`
	oldHashField = `,"Hash":"`
	hashHexLen   = 2 * sha256.Size
	hashTail     = len(`"}`)
)

// sealJSON turns the encoding of a record with an empty Hash (ending `,"hash":""}`) into the
// stored form, setting r.Hash to the SHA-256 of that encoding.
func sealJSON(canon []byte, r *Record) []byte {
	sum := sha256.Sum256(canon)
	r.Hash = hex.EncodeToString(sum[:])
	out := make([]byte, 0, len(canon)+hashHexLen)
	out = append(out, canon[:len(canon)-hashTail]...)
	out = append(out, r.Hash...)
	return append(out, `"}`...)
}

// storedHash splits a stored record into the hash it claims and the hash of its contents
// (recomputed over the value with the claimed hash blanked). ok is false when the value does not
// end in a hash field, in either form.
func storedHash(value []byte) (claimed, actual string, ok bool) {
	n := len(value)
	end := n - hashTail
	start := end - hashHexLen
	if start-len(hashField) < 0 || string(value[end:]) != `"}` {
		return "", "", false
	}
	if field := string(value[start-len(hashField) : start]); field != hashField && field != oldHashField {
		return "", "", false
	}
	claimed = string(value[start:end])
	h := sha256.New()
	h.Write(value[:start])
	h.Write(value[end:])
	return claimed, hex.EncodeToString(h.Sum(nil)), true
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

// loadAuditTail finds the last stored record so the chain continues across restarts. A last
// record that cannot be read still anchors the chain (its seq from the key, its hash over the
// raw bytes) so new records are written; AuditVerify reports the damage.
func (s *Store) loadAuditTail() (chainTail, error) {
	var tail chainTail
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		if b == nil {
			return nil
		}
		k, v := b.Cursor().Last()
		if k == nil {
			return nil
		}
		if len(k) != 8 {
			return fmt.Errorf("audit key %x is not a sequence number", k)
		}
		tail.seq = binary.BigEndian.Uint64(k)
		claimed, actual, ok := storedHash(v)
		if !ok || claimed != actual {
			s.log.Warn("the last audit record is damaged; continuing the chain from its raw bytes; run `"+pastable.Command("audit", "verify")+"`",
				"seq", tail.seq, "file", s.path)
			sum := sha256.Sum256(v)
			tail.hash = hex.EncodeToString(sum[:])
			return nil
		}
		tail.hash = claimed
		return nil
	})
	if err != nil {
		return chainTail{}, fmt.Errorf("read audit log in %s: %w", s.path, err)
	}
	return tail, nil
}
