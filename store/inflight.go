package store

import (
	"encoding/json"
	"fmt"
	"maps"

	bolt "go.etcd.io/bbolt"
)

// bucketInFlight journals the physical calls that have been sent and not finished. A gateway
// that dies during one (SIGKILL, a crash, a power cut) cannot record the lockout the unknown
// outcome calls for; the next Open finds the entry and records the lockout then.
var bucketInFlight = []byte("inflight")

// BeginPhysical journals a physical call durably (fsync) before it is sent. Its Lockout is the
// lockout to record if the gateway dies before the entry is removed: Server, Tool, CallID,
// Principal, Session and At. The entry is removed in the transaction that writes the call's
// audit record (Record.EndsCall), or by EndPhysical. It waits at most the commit timeout; a
// journal write that completes after that is removed again, since its call was not sent.
func (s *Store) BeginPhysical(l Lockout) error {
	if l.At.IsZero() {
		l.At = s.now()
	}
	l.At = l.At.UTC()
	value, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if err := s.Available(); err != nil {
		return fmt.Errorf("journal physical call %s on %s: %w", l.CallID, l.Server, err)
	}
	err = s.updateWithin(s.commitTimeout, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketInFlight)
		if err != nil {
			return err
		}
		return b.Put([]byte(l.CallID), value)
	}, func(err error) {
		if err == nil {
			_ = s.EndPhysical(l.CallID)
		}
	})
	if err != nil {
		return fmt.Errorf("journal physical call %s on %s: %w", l.CallID, l.Server, s.unavailable(err))
	}
	return nil
}

// EndPhysical removes a call's journal entry on its own, for a call whose outcome is recorded
// elsewhere. A governed call's entry goes with its audit record instead (Record.EndsCall).
func (s *Store) EndPhysical(callID string) error {
	return s.updateWithin(s.commitTimeout, func(tx *bolt.Tx) error {
		return deleteJournal(tx, callID)
	}, nil)
}

func deleteJournal(tx *bolt.Tx, callID string) error {
	if b := tx.Bucket(bucketInFlight); b != nil {
		return b.Delete([]byte(callID))
	}
	return nil
}

// recoverInFlight turns the journal entries a dead gateway left into lockouts: each was a
// physical call whose outcome nobody saw. Called by Open before the lockouts are loaded.
func (s *Store) recoverInFlight() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInFlight)
		if b == nil {
			return nil
		}
		locks := tx.Bucket(bucketLockouts)
		var keys [][]byte
		err := b.ForEach(func(k, v []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			var l Lockout
			if err := json.Unmarshal(v, &l); err != nil || l.Server == "" {
				s.log.Error("unreadable journal entry of a physical call; its server cannot be named, so it is kept for an operator", "call", string(k), "file", s.path)
				return nil
			}
			l.Reason = fmt.Sprintf("the gateway stopped (killed or crashed) while call %s to %s was in flight, so what the robot did is unknown", l.CallID, l.Tool)
			s.recovered = append(s.recovered, l)
			if locks.Get([]byte(l.Server)) == nil {
				value, err := json.Marshal(l)
				if err != nil {
					return err
				}
				if err := locks.Put([]byte(l.Server), value); err != nil {
					return err
				}
			}
			s.log.Warn("a physical call was in flight when the gateway last stopped; its server is locked out", "server", l.Server, "tool", l.Tool, "call", l.CallID)
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			var l Lockout
			if json.Unmarshal(b.Get(k), &l) == nil && l.Server != "" {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// viewInFlight shows, in a read-only store, the lockouts the next gateway start will record for
// the journal entries a dead gateway left, so that `status` on the file tells the truth.
func (s *Store) viewInFlight() error {
	m := maps.Clone(s.lockouts.Load().byServer)
	// A call whose record is in the write-ahead file ended: the next start removes its entry.
	ended := make(map[string]bool)
	for _, e := range s.walLoaded {
		if e.ends != "" {
			ended[e.ends] = true
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketInFlight)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var l Lockout
			if ended[string(k)] || json.Unmarshal(v, &l) != nil || l.Server == "" {
				return nil
			}
			if _, ok := m[l.Server]; !ok {
				l.Reason = fmt.Sprintf("the gateway stopped (killed or crashed) while call %s to %s was in flight, so what the robot did is unknown", l.CallID, l.Tool)
				m[l.Server] = l
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read the physical calls in flight from %s: %w", s.path, err)
	}
	s.lockouts.Store(newLockoutView(m))
	return nil
}
