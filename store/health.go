package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Defaults of the bounds on waiting for the state file (Options).
const (
	// DefaultCommitTimeout bounds every synchronous wait on the state file.
	DefaultCommitTimeout = 5 * time.Second
	// DefaultMinFreeBytes is the free space the state file's filesystem must keep for the store
	// to take calls.
	DefaultMinFreeBytes = 16 << 20
	// stallBound is how long one commit may take before the store counts as stalled: an fsync
	// that has not come back within it means the disk is not writing.
	stallBound = 2 * time.Second
	// probeEvery is how often the watcher checks the free space and, while a write has failed,
	// tries writing again.
	probeEvery = 250 * time.Millisecond
)

// ErrUnavailable: the state file is not taking writes (the disk is full, an I/O error, a
// read-only remount, a commit that does not come back), so nothing can be recorded.
var ErrUnavailable = errors.New("state file unavailable")

// UnavailableError says why the state file is not taking writes. It wraps [ErrUnavailable]. Its
// message leaves out the file's path, since callers and models read it; the log names the file.
type UnavailableError struct {
	// Path is the state file.
	Path string
	// Cause says what failed, in words an operator can act on.
	Cause string
	// Since is when it started.
	Since time.Time
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("the state file cannot be written since %s: %s", e.Since.UTC().Format(time.RFC3339), e.Cause)
}

func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// fault is what currently keeps the store from taking calls.
type fault struct {
	kind  faultKind
	cause string
	since time.Time
}

type faultKind int

const (
	faultWrite faultKind = iota + 1 // a write failed; a later successful write ends it
	faultSpace                      // less free space than Options.MinFreeBytes; the watcher ends it
)

// health is the store's view of whether the state file takes writes.
type health struct {
	fault atomic.Pointer[fault]
	// commitStart is when the commit in progress began (UnixNano), 0 when none is.
	commitStart atomic.Int64
}

// Available reports nil when the state file takes writes, and otherwise an *UnavailableError
// saying what failed. It reads only memory and is cheap enough for every call: the gateway asks
// it before dispatching anything, so that no call is sent that could not be recorded.
func (s *Store) Available() error {
	if s.readOnly {
		return &UnavailableError{Path: s.path, Cause: "it is open read-only", Since: s.now()}
	}
	if f := s.health.fault.Load(); f != nil {
		return &UnavailableError{Path: s.path, Cause: f.cause, Since: f.since}
	}
	if start := s.health.commitStart.Load(); start != 0 {
		if began := time.Unix(0, start); time.Since(began) > stallBound {
			return &UnavailableError{Path: s.path, Since: began,
				Cause: fmt.Sprintf("a write to the disk has not completed for %s (the disk is not responding)", time.Since(began).Round(100*time.Millisecond))}
		}
	}
	return nil
}

// noteWrite records the result of a write to the state file: a failure makes the store
// unavailable, a success ends an earlier write failure.
func (s *Store) noteWrite(err error) {
	if err == nil {
		if f := s.health.fault.Load(); f != nil && f.kind == faultWrite {
			if s.health.fault.CompareAndSwap(f, nil) {
				s.log.Warn("the state file takes writes again", "file", s.path, "after", time.Since(f.since).Round(time.Millisecond))
				s.onHealth(true)
			}
		}
		return
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrReadOnly) {
		return
	}
	s.setFault(faultWrite, s.describeWriteError(err))
}

func (s *Store) setFault(kind faultKind, cause string) {
	for {
		old := s.health.fault.Load()
		if old != nil && (old.kind == faultSpace || old.kind == kind) {
			return // already unavailable; the first cause stays the one reported
		}
		if s.health.fault.CompareAndSwap(old, &fault{kind: kind, cause: cause, since: s.now()}) {
			s.log.Error("THE STATE FILE CANNOT BE WRITTEN: calls are refused until it can", "file", s.path, "cause", cause)
			s.onHealth(false)
			return
		}
	}
}

// describeWriteError turns a write error into what an operator should read. Callers and models
// read it too, so it names the failure, not the file's path (the log has that).
func (s *Store) describeWriteError(err error) string {
	detail := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		detail = errno.Error()
	}
	detail = strings.ReplaceAll(strings.ReplaceAll(detail, s.path, "state.db"), s.dir, "the state directory")
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "the disk is full (" + detail + ")"
	case errors.Is(err, syscall.EDQUOT):
		return "the disk quota is exhausted (" + detail + ")"
	case errors.Is(err, syscall.EROFS):
		return "the filesystem is read-only (" + detail + ")"
	case errors.Is(err, syscall.EIO):
		return "the disk reported an I/O error (" + detail + ")"
	case errors.Is(err, errCommitTimeout):
		return detail
	}
	return "a write failed: " + detail
}

// isDiskError reports whether err came from the file or the disk rather than from a
// transaction's own logic.
func isDiskError(err error) bool {
	var errno syscall.Errno
	var pathErr *os.PathError
	return errors.As(err, &errno) || errors.As(err, &pathErr) || errors.Is(err, errCommitTimeout)
}

// errCommitTimeout: a bounded write did not complete in time.
var errCommitTimeout = errors.New("a write to the state file did not complete in time (the disk is not responding)")

// updateWithin runs fn in one durable transaction and waits at most d for it. A transaction
// that does not come back in time keeps running; late is then called with its result, so the
// caller can undo what it no longer wants (a journal entry of a call it did not send).
func (s *Store) updateWithin(d time.Duration, fn func(tx *bolt.Tx) error, late func(error)) error {
	done := make(chan error, 1)
	var gaveUp atomic.Bool
	go func() {
		err := s.update(fn)
		done <- err
		if gaveUp.Load() && late != nil {
			late(err)
		}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		gaveUp.Store(true)
		select {
		case err := <-done: // it finished just now
			return err
		default:
		}
		s.noteWrite(errCommitTimeout)
		return errCommitTimeout
	}
}

// watch runs until the store closes: it checks the free space of the state file's filesystem
// and, while an earlier write failed and no audit batch is retrying, writes what is pending
// (lockouts held in memory) or a probe, so that the store becomes available again by itself
// once the disk allows.
func (s *Store) watch(minFree int64) {
	defer close(s.watchDone)
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.watchStop:
			return
		case <-t.C:
		}
		if minFree > 0 {
			s.checkSpace(minFree)
		}
		if f := s.health.fault.Load(); f != nil && f.kind == faultWrite && !s.audit.retrying.Load() {
			s.probe()
		}
		if s.hasPendingLockouts() {
			s.writePendingLockouts()
		}
	}
}

// checkSpace makes the store unavailable while the filesystem has less than minFree bytes free,
// and available again once it has.
func (s *Store) checkSpace(minFree int64) {
	free, err := freeBytes(s.dir)
	if err != nil {
		return // a filesystem that cannot say is judged by its writes
	}
	f := s.health.fault.Load()
	switch {
	case free < minFree && (f == nil || f.kind != faultSpace):
		cause := fmt.Sprintf("the disk is full: %s free, under audit.min_free_bytes (%s)", byteSize(free), byteSize(minFree))
		next := &fault{kind: faultSpace, cause: cause, since: s.now()}
		if f != nil {
			next.since = f.since
		}
		if s.health.fault.CompareAndSwap(f, next) {
			s.log.Error("THE STATE FILE'S DISK IS FULL: calls are refused until space is freed", "file", s.path, "free_bytes", free, "min_free_bytes", minFree)
			if f == nil {
				s.onHealth(false)
			}
		}
	case free >= minFree && f != nil && f.kind == faultSpace:
		if s.health.fault.CompareAndSwap(f, nil) {
			s.log.Warn("the state file's disk has free space again", "file", s.path, "free_bytes", free)
			s.onHealth(true)
		}
	}
}

// probe writes one small key, to learn whether the disk takes writes again.
func (s *Store) probe() {
	stamp := []byte(s.now().UTC().Format(time.RFC3339Nano))
	_ = s.updateWithin(DefaultCommitTimeout, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyProbe, stamp)
	}, nil)
}

var keyProbe = []byte("probe")

func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// unavailable is err as callers read it: the store's *UnavailableError when it is failing
// (which names the cause without the file's path), else err wrapped in ErrUnavailable with
// the path taken out.
func (s *Store) unavailable(err error) error {
	if avail := s.Available(); avail != nil {
		return avail
	}
	return &UnavailableError{Path: s.path, Cause: s.describeWriteError(err), Since: s.now()}
}
