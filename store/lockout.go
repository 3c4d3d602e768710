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
type Lockout struct {
	Server    string
	Tool      string // public name of the tool whose call timed out
	CallID    string
	Principal string
	Session   string
	Reason    string
	At        time.Time
}

// LockoutStore keeps lockouts durably and answers the hot path from memory.
type LockoutStore interface {
	// PutLockout commits a lockout to disk (fsync) before it returns. If the server is already
	// locked out, the first lockout stays and PutLockout returns nil.
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

// PutLockout implements [LockoutStore].
func (s *Store) PutLockout(l Lockout) error {
	if l.Server == "" {
		return errors.New("lockout without a server")
	}
	if l.At.IsZero() {
		l.At = s.now()
	}
	l.At = l.At.UTC()
	s.lockMu.Lock()
	defer s.lockMu.Unlock()
	if _, ok := s.Lockout(l.Server); ok {
		return nil
	}
	value, err := json.Marshal(l)
	if err != nil {
		return err
	}
	err = s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLockouts)
		if b.Get([]byte(l.Server)) != nil {
			return nil
		}
		return b.Put([]byte(l.Server), value)
	})
	if err != nil {
		return fmt.Errorf("record lockout of server %s in %s: %w", l.Server, s.path, err)
	}
	m := maps.Clone(s.lockouts.Load().byServer)
	m[l.Server] = l
	s.lockouts.Store(newLockoutView(m))
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
	err := s.update(func(tx *bolt.Tx) error {
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
	})
	if err != nil {
		return Lockout{}, false, fmt.Errorf("clear lockout of server %s in %s: %w", server, s.path, err)
	}
	if found {
		m := maps.Clone(s.lockouts.Load().byServer)
		delete(m, server)
		s.lockouts.Store(newLockoutView(m))
	}
	return cleared, found, nil
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
