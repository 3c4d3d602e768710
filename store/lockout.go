package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Lockout is an active lockout of a physical server (SPEC.md §11): a call on it timed out or its
// server died during the call, so what the robot did is unknown until an operator resets it.
//
// It is stored as JSON with snake_case names; lockouts stored before carry the Go names and
// decode the same (UnmarshalJSON).
type Lockout struct {
	Server    string    `json:"server"`
	Tool      string    `json:"tool,omitempty"` // public name of the tool whose call timed out
	CallID    string    `json:"call_id,omitempty"`
	Principal string    `json:"principal,omitempty"`
	Session   string    `json:"session,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at,omitzero"`
	// Kind says what put the lockout in force: LockoutUnknown (a call's outcome is unknown:
	// "" in records written before kinds existed), LockoutOperator (mcp-gateway lock) or
	// LockoutHalt (mcp-gateway halt, the emergency stop).
	Kind string `json:"kind,omitempty"`
	// By is the operator who locked or halted; "" for a lockout the gateway put in force.
	By string `json:"by,omitempty"`
	// Replaced is the lockout a halt took the place of (a halt replaces a lockout of any other
	// kind, see [Store.ApplyLockout]), so that whoever clears the halt learns what else was
	// wrong with the robot; nil otherwise.
	Replaced *Lockout `json:"replaced,omitempty"`
}

// UnmarshalJSON reads a lockout stored with snake_case names or with the Go names of before.
func (l *Lockout) UnmarshalJSON(b []byte) error {
	type lockout Lockout // without this method
	v := struct {
		*lockout
		OldCallID string `json:"CallID"`
	}{lockout: (*lockout)(l)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	l.CallID = cmp.Or(l.CallID, v.OldCallID)
	return nil
}

// Lockout kinds.
const (
	LockoutUnknown  = "unknown_outcome"
	LockoutOperator = "operator"
	LockoutHalt     = "halt"
)

// Halted reports whether the lockout is an emergency stop.
func (l Lockout) Halted() bool { return l.Kind == LockoutHalt }

// replaces reports whether l takes the place of cur, a lockout in force on the same server: only
// a halt does, and only over a lockout that is not one. Every other lockout leaves the first in
// force, whose record says what happened first.
func (l Lockout) replaces(cur Lockout) bool { return l.Halted() && !cur.Halted() }

// LockoutStore keeps lockouts durably and answers the hot path from memory.
type LockoutStore interface {
	// PutLockout puts a lockout in force and commits it to disk (fsync) before it returns. If
	// the server is already locked out, the first lockout stays and PutLockout returns nil,
	// unless l is a halt and the first is not: a halt replaces it. If the disk does not take it,
	// the lockout stays in force in memory, is written as soon as the disk allows, and the error
	// says so.
	PutLockout(l Lockout) error
	// Lockouts returns every active lockout, oldest first, from memory: no disk read, no
	// allocation when there are none. It is called on every tool call.
	Lockouts() []Lockout
	// Lockout returns the active lockout of one server, from memory.
	Lockout(server string) (Lockout, bool)
	// ClearLockout removes a server's lockout durably and returns what was cleared; false when
	// the server was not locked out.
	ClearLockout(server string) (Lockout, bool, error)
}

var _ LockoutStore = (*Store)(nil)

// lockoutView is an immutable snapshot of the active lockouts, replaced as a whole on change.
type lockoutView struct {
	byServer map[string]Lockout
	list     []Lockout // oldest first
}

func newLockoutView(m map[string]Lockout) *lockoutView {
	v := &lockoutView{byServer: m}
	for _, l := range m {
		v.list = append(v.list, l)
	}
	slices.SortFunc(v.list, func(a, b Lockout) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Server, b.Server))
	})
	return v
}

// PutLockout implements [LockoutStore]. The lockout is in force in memory before the write is
// attempted, so a disk that refuses it never lets a physical call through; when the write fails
// or does not complete within the commit timeout, PutLockout returns an error wrapping
// [ErrUnavailable], keeps the lockout in memory and writes it as soon as the disk allows.
func (s *Store) PutLockout(l Lockout) error {
	_, _, err := s.ApplyLockout(l)
	return err
}

// ApplyLockout is PutLockout that says what it did, in one step, so that two operators acting at
// once cannot both believe they put their lockout in force: prev is the lockout that was in
// force before (Server "" when none), and applied whether l is in force now. A halt over a
// lockout of another kind replaces it and keeps it as l.Replaced; any other lockout over an
// existing one, and a halt over a halt, changes nothing (applied false, err nil). The error is
// PutLockout's: the lockout is in force in memory but not yet on disk.
func (s *Store) ApplyLockout(l Lockout) (prev Lockout, applied bool, err error) {
	if l.Server == "" {
		return Lockout{}, false, errors.New("lockout without a server")
	}
	if s.readOnly {
		return Lockout{}, false, ErrReadOnly
	}
	if l.At.IsZero() {
		l.At = s.now()
	}
	l.At = l.At.UTC()
	s.lockMu.Lock()
	prev, had := s.Lockout(l.Server)
	if had && !l.replaces(prev) {
		s.lockMu.Unlock()
		return prev, false, nil
	}
	if had {
		replaced := prev
		l.Replaced = &replaced
	}
	m := maps.Clone(s.lockouts.Load().byServer)
	m[l.Server] = l
	s.lockouts.Store(newLockoutView(m))
	s.pending[l.Server] = l
	s.lockMu.Unlock()
	if err := s.Available(); err != nil {
		return prev, true, fmt.Errorf("lockout of server %s is held in memory and will be written when the state file can be: %w", l.Server, err)
	}
	if err := s.writePendingLockouts(); err != nil {
		return prev, true, fmt.Errorf("lockout of server %s is held in memory and will be written when the state file can be: %w", l.Server, err)
	}
	return prev, true, nil
}

// hasPendingLockouts reports whether a lockout in force is not on disk yet.
func (s *Store) hasPendingLockouts() bool {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	return len(s.pending) > 0
}

// writePendingLockouts writes the lockouts held in memory only, in one transaction bounded by
// the commit timeout. A server whose lockout is already on disk keeps the one there, unless the
// pending one replaces it (a halt). It holds lockMu, so that a clear cannot interleave with the
// write.
func (s *Store) writePendingLockouts() error {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if len(s.pending) == 0 {
		return nil
	}
	values := make(map[string][]byte, len(s.pending))
	for server, l := range s.pending {
		v, err := json.Marshal(l)
		if err != nil {
			return err
		}
		values[server] = v
	}
	err := s.updateWithin(s.commitTimeout, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLockouts)
		for server, v := range values {
			if on := b.Get([]byte(server)); on != nil {
				// One that does not parse is in force as a lockout of no kind (loadLockouts), which
				// a halt replaces.
				var disk Lockout
				if json.Unmarshal(on, &disk) == nil && !s.pending[server].replaces(disk) {
					continue
				}
			}
			if err := b.Put([]byte(server), v); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("record lockouts: %w", s.unavailable(err))
	}
	clear(s.pending)
	s.log.Info("lockouts recorded in the state file", "servers", len(values), "file", s.path)
	return nil
}

// Lockouts implements [LockoutStore]. The returned slice is the caller's.
func (s *Store) Lockouts() []Lockout {
	v := s.lockouts.Load()
	if len(v.list) == 0 {
		return nil
	}
	return slices.Clone(v.list)
}

// Lockout implements [LockoutStore].
func (s *Store) Lockout(server string) (Lockout, bool) {
	l, ok := s.lockouts.Load().byServer[server]
	return l, ok
}

// ClearLockout implements [LockoutStore].
func (s *Store) ClearLockout(server string) (Lockout, bool, error) {
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	var (
		cleared Lockout
		found   bool
	)
	err := s.updateWithin(s.commitTimeout, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLockouts)
		v := b.Get([]byte(server))
		if v == nil {
			return nil
		}
		if err := json.Unmarshal(v, &cleared); err != nil {
			// An unreadable lockout is still a lockout; clearing it is what the operator asked.
			s.log.Warn("clearing an unreadable lockout", "server", server, "file", s.path, "err", err)
			cleared = Lockout{Server: server}
		}
		found = true
		return b.Delete([]byte(server))
	}, func(err error) {
		if err == nil {
			// The clear reached the disk after its caller was told it failed: memory follows
			// the file, as the operator asked.
			s.lockMu.Lock()
			s.dropLockout(server)
			s.lockMu.Unlock()
			s.log.Warn("a lockout clear that timed out has reached the state file; the server is unlocked", "server", server)
		}
	})
	if err != nil {
		return Lockout{}, false, fmt.Errorf("clear lockout of server %s in %s: %w", server, s.path, err)
	}
	if l, ok := s.pending[server]; ok {
		// Held in memory only: clearing it is what the operator asked, and nothing is on disk.
		delete(s.pending, server)
		cleared, found = l, true
	}
	if found {
		s.dropLockout(server)
	}
	return cleared, found, nil
}

// dropLockout removes a server's lockout from the in-memory view; the caller holds lockMu.
func (s *Store) dropLockout(server string) {
	delete(s.pending, server)
	m := maps.Clone(s.lockouts.Load().byServer)
	delete(m, server)
	s.lockouts.Store(newLockoutView(m))
}

// loadLockouts reads the lockouts bucket into the in-memory view. A value that does not parse
// still locks its server out: failing open on a damaged record would let the robot move.
func (s *Store) loadLockouts() error {
	m := make(map[string]Lockout)
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLockouts)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var l Lockout
			if err := json.Unmarshal(v, &l); err != nil {
				s.log.Warn("unreadable lockout record; keeping the server locked out", "server", string(k), "file", s.path, "err", err)
				l = Lockout{Reason: "the stored lockout record is unreadable: " + err.Error()}
			}
			l.Server = string(k)
			m[l.Server] = l
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read lockouts from %s: %w", s.path, err)
	}
	s.lockouts.Store(newLockoutView(m))
	return nil
}
