package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the state file inside the gateway's state_dir.
const FileName = "state.db"

// schemaVersion is the layout of the buckets this package writes. A file written by a newer
// layout is refused rather than misread.
const schemaVersion = 1

// lockTimeout bounds the wait for the state file's lock: a second process must fail fast with a
// message, not hang behind the running gateway.
const lockTimeout = 500 * time.Millisecond

// defaultAuditBatch is the longest the audit writer waits to fill a group commit when nobody is
// waiting for it.
const defaultAuditBatch = 2 * time.Millisecond

// Bucket names. Each holds one kind of state; see doc.go.
var (
	bucketMeta      = []byte("meta")
	bucketLockouts  = []byte("lockouts")
	bucketAudit     = []byte("audit")
	bucketApprovals = []byte("approvals")
	bucketPins      = []byte("pins")
	keySchema       = []byte("schema")
)

// Errors the store returns. Each is wrapped with the name of the thing it concerns.
var (
	// ErrLocked: another process (or another Store in this one) holds the state file.
	ErrLocked = errors.New("state file is in use")
	// ErrClosed: the Store has been closed.
	ErrClosed = errors.New("state store is closed")
	// ErrReadOnly: the Store was opened with Options.ReadOnly and cannot write.
	ErrReadOnly = errors.New("state store is open read-only")
	// ErrNotFound: no approval or pin has that id or name.
	ErrNotFound = errors.New("not found")
	// ErrExists: an approval with that id is already stored.
	ErrExists = errors.New("already exists")
	// ErrAlreadyDecided: the approval was already approved, denied or used.
	ErrAlreadyDecided = errors.New("already decided")
	// ErrExpired: the approval request passed its expiry before it was decided.
	ErrExpired = errors.New("expired")
	// ErrWithdrawn: the approval's call stopped waiting before it ran (its caller cancelled it or
	// went away, or the gateway stopped); nothing was run, and it can no longer be answered.
	ErrWithdrawn = errors.New("withdrawn")
	// ErrNotApproved: the approval cannot be consumed because it is not approved.
	ErrNotApproved = errors.New("not approved")
	// ErrAlreadyUsed: the approval was already consumed by the call it approved.
	ErrAlreadyUsed = errors.New("already used")
	// ErrNoPendingChange: a pin has no changed definition waiting for acceptance.
	ErrNoPendingChange = errors.New("no pending definition change")
)

// Options configure [Open].
type Options struct {
	// Logger receives warnings about the state file and audit write failures. Nil discards them.
	Logger *slog.Logger
	// ReadOnly opens an existing state file with a shared lock, for inspection by a command
	// while no gateway runs. Every write returns ErrReadOnly.
	ReadOnly bool
	// AuditBatch is the longest the audit writer goroutine waits for more records before a
	// group commit when no caller is waiting on the batch. Zero means 2ms; negative means
	// never wait.
	AuditBatch time.Duration
	// OnAuditCommit, if set, is called by the committer of each audit batch (the writer
	// goroutine, or a caller of AppendSync that committed it) after the batch is durable, with
	// the number of records in it and how long the commit took (for a latency metric). It
	// must return quickly.
	OnAuditCommit func(records int, took time.Duration)
	// OnAuditDurable, if set, is called by the audit writer once for each record that became
	// durable (doc.go, Durability), in sequence order, after the batch's sync and after the
	// callers waiting on it were released, holding no lock of the store: seq is the record's
	// sequence number, stored its bytes exactly as kept (never to be changed; they may be kept)
	// and digest its Hash. It runs on the batch's committer, one batch at a time (the writer
	// goroutine, or a caller of AppendSync whose answer waits for it), and must return
	// quickly, handing the record on (telemetry exports it as an OTLP log record). Records that a previous
	// process made durable and Open moves from the write-ahead file are not passed again.
	OnAuditDurable func(seq uint64, stored []byte, digest string)
	// Now is the clock for audit record times, lockout times and approval expiry. Nil means
	// time.Now.
	Now func() time.Time
	// CommitTimeout bounds every synchronous wait on the state file: a caller waiting for its
	// record, a lockout or a journal entry gets an error after it, whatever the disk does.
	// Zero means DefaultCommitTimeout.
	CommitTimeout time.Duration
	// MinFreeBytes is the free space the state file's filesystem must keep: below it the store
	// reports itself unavailable (Available) before a write fails. Zero means
	// DefaultMinFreeBytes; negative disables the check.
	MinFreeBytes int64
	// OnHealth, if set, is called when the store becomes unavailable (false) or available
	// again (true). It must return quickly.
	OnHealth func(available bool)
	// Retention bounds the audit log; a background pruner removes the oldest records beyond
	// it (retention.go). The zero value keeps everything. Ignored with ReadOnly.
	Retention Retention

	// walSize, when positive, is the size of a new write-ahead file (tests).
	walSize int64
}

// Store is the one owner of the gateway's bbolt state file. It implements [LockoutStore],
// [ApprovalStore] and [PinStore], and its [Store.Audit] log is the only audit writer. All methods
// are safe for concurrent use.
type Store struct {
	path     string
	dir      string
	db       *bolt.DB
	log      *slog.Logger
	now      func() time.Time
	readOnly bool
	onCommit func(records int, took time.Duration)
	// onDurable is Options.OnAuditDurable.
	onDurable func(seq uint64, stored []byte, digest string)

	// lockMu orders lockout writes so the in-memory view matches the file. pending holds the
	// lockouts in force that are not on disk yet (the disk refused them); the watcher writes
	// them as soon as it can.
	lockMu   sync.Mutex
	lockouts atomic.Pointer[lockoutView]
	pending  map[string]Lockout
	// recovered are the journal entries a dead gateway left, turned into lockouts by Open; each
	// gets an audit record once the log is running.
	recovered []Lockout

	audit *auditLog
	// wal is the audit log's write-ahead file, opened (and replayed into state.db) by init;
	// nil when read-only, where walLoaded holds the records it has after state.db's last.
	wal       *walFile
	walLoaded []walEntry
	walSize   int64 // Options.walSize
	// gap is what Open found in the write-ahead file that may have lost acknowledged records
	// (walgap.go), or nil.
	gap    *WALGap
	pruner *pruner // nil without retention
	// digestKey keys the digests of original arguments (digest.go).
	digestKey []byte
	digests   sync.Pool // of HMACs under digestKey

	commitTimeout time.Duration
	health        health
	healthHook    func(available bool)
	watchStop     chan struct{}
	watchDone     chan struct{}

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// Open opens (creating if needed) dir/state.db and takes its lock. It fails within about half
// a second with an error wrapping [ErrLocked] (a [*LockedError] naming the file and the process
// that likely holds it) when another process or Store already has the file. With ReadOnly the
// file must exist and nothing is created.
func Open(dir string, opts Options) (*Store, error) {
	s := &Store{
		path:          filepath.Join(dir, FileName),
		dir:           dir,
		log:           opts.Logger,
		now:           opts.Now,
		readOnly:      opts.ReadOnly,
		onCommit:      opts.OnAuditCommit,
		onDurable:     opts.OnAuditDurable,
		commitTimeout: opts.CommitTimeout,
		healthHook:    opts.OnHealth,
		walSize:       opts.walSize,
		pending:       make(map[string]Lockout),
		watchStop:     make(chan struct{}),
		watchDone:     make(chan struct{}),
	}
	if s.commitTimeout <= 0 {
		s.commitTimeout = DefaultCommitTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.ReadOnly {
		if _, err := os.Stat(s.path); err != nil {
			return nil, fmt.Errorf("open state file read-only: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}

	db, err := bolt.Open(s.path, 0o600, &bolt.Options{Timeout: lockTimeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, lockedError(s.path)
	}
	if err != nil {
		return nil, fmt.Errorf("open state file %s: %w", s.path, err)
	}
	s.db = db
	if !opts.ReadOnly {
		if err := writeOwner(s.path, s.now()); err != nil {
			s.log.Warn("cannot write the state file's owner record", "file", ownerPath(s.path), "err", err)
		}
	}
	if err := s.init(); err != nil {
		s.release()
		return nil, err
	}
	if err := s.loadDigestKey(); err != nil {
		s.release()
		return nil, err
	}

	tail, err := s.loadAuditTail()
	if err != nil {
		s.release()
		return nil, err
	}
	batch := opts.AuditBatch
	if batch == 0 {
		batch = defaultAuditBatch
	}
	if !opts.ReadOnly && opts.Retention.enabled() {
		s.pruner = newPruner(s, opts.Retention)
	}
	if n := len(s.walLoaded); n > 0 {
		last := s.walLoaded[n-1]
		claimed, _, _ := storedHash(last.value)
		tail = chainTail{seq: last.seq, hash: claimed}
	}
	s.audit = newAuditLog(s, tail, batch, s.wal, s.walLoaded)
	s.walLoaded = nil
	if opts.ReadOnly {
		close(s.watchDone)
	} else {
		minFree := opts.MinFreeBytes
		if minFree == 0 {
			minFree = DefaultMinFreeBytes
		}
		s.checkSpace(minFree)
		go s.watch(minFree)
	}
	if s.pruner != nil {
		s.pruner.start()
	}
	s.auditGap()
	s.auditRecovered()
	return s, nil
}

// auditRecovered writes a lockout record for each physical call a dead gateway left in its
// journal: the robot may have acted on it, and the audit log should say so, not only the
// lockouts bucket.
func (s *Store) auditRecovered() {
	for _, l := range s.recovered {
		rec := Record{
			Type: RecordLockout, Principal: l.Principal, Session: l.Session, Server: l.Server, Tool: l.Tool,
			CallID: l.CallID, Kind: "mcp_execution_status_unknown", Reason: l.Reason,
			Detail: map[string]any{"journaled_at": l.At, "via": "crash journal"},
		}
		if _, err := s.audit.AppendSync(context.Background(), rec); err != nil {
			s.log.Error("audit record of a lockout recovered from the crash journal not written", "server", l.Server, "call", l.CallID, "error", err)
		}
	}
	s.recovered = nil
}

// init creates the buckets, checks the layout version and loads the lockouts into memory.
func (s *Store) init() error {
	if !s.readOnly {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketMeta, bucketLockouts, bucketAudit, bucketApprovals, bucketPins} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			meta := tx.Bucket(bucketMeta)
			if meta.Get(keySchema) == nil {
				return meta.Put(keySchema, []byte(strconv.Itoa(schemaVersion)))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("initialize state file %s: %w", s.path, err)
		}
	}
	var version int
	err := s.db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			if v := meta.Get(keySchema); v != nil {
				n, err := strconv.Atoi(string(v))
				if err != nil {
					return fmt.Errorf("schema version %q is not a number", v)
				}
				version = n
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read state file %s: %w", s.path, err)
	}
	if version > schemaVersion {
		return fmt.Errorf("state file %s has layout version %d, newer than this mcp-gateway understands (%d); use a newer mcp-gateway", s.path, version, schemaVersion)
	}
	if err := s.loadWAL(); err != nil {
		return err
	}
	if !s.readOnly {
		if err := s.recoverInFlight(); err != nil {
			return fmt.Errorf("recover the physical calls in flight from %s: %w", s.path, err)
		}
		return s.loadLockouts()
	}
	if err := s.loadLockouts(); err != nil {
		return err
	}
	return s.viewInFlight()
}

// onHealth tells Options.OnHealth, if set.
func (s *Store) onHealth(available bool) {
	if s.healthHook != nil {
		s.healthHook(available)
	}
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Close commits every audit record appended before it, then closes the file and releases its
// lock. Calling it again returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.pruner != nil {
			s.pruner.stop()
		}
		auditErr := s.audit.close()
		if !s.readOnly {
			close(s.watchStop)
		}
		if s.audit.emptied {
			// Every acknowledged record is in state.db: a missing or short write-ahead file
			// at the next Open loses nothing.
			if err := s.putWALMeta(0, walStateClosed); err != nil {
				s.log.Warn("cannot record in the state file that it was closed cleanly; the next start treats damage to the audit write-ahead file as a possible gap",
					"file", s.path, "err", err)
			}
		}
		<-s.watchDone
		s.writePendingLockouts()
		s.lockMu.Lock()
		var unwritten error
		if len(s.pending) > 0 {
			unwritten = fmt.Errorf("%d lockouts are held in memory only: the state file %s did not take them; they are lost at this stop, so inspect the robot before unlocking anything", len(s.pending), s.path)
		}
		s.lockMu.Unlock()
		s.closed.Store(true)
		s.closeErr = errors.Join(auditErr, unwritten, s.release())
	})
	return s.closeErr
}

// release closes the bbolt file and removes the owner record this process wrote.
func (s *Store) release() error {
	if !s.readOnly {
		if err := os.Remove(ownerPath(s.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("cannot remove the state file's owner record", "file", ownerPath(s.path), "err", err)
		}
	}
	if s.wal != nil {
		s.wal.close()
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state file %s: %w", s.path, err)
	}
	return nil
}

// update runs fn in one durable bbolt transaction: when it returns nil, the change is on disk.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	if s.readOnly {
		return ErrReadOnly
	}
	if s.closed.Load() {
		return ErrClosed
	}
	err := s.db.Update(fn)
	if err == nil || isDiskError(err) {
		s.noteWrite(err) // a refusal of fn's own (not found, already decided) says nothing of the disk
	}
	return err
}

// view runs fn in a read transaction.
func (s *Store) view(fn func(tx *bolt.Tx) error) error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.db.View(fn)
}
