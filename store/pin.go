package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Pin is the accepted definition of one upstream tool (SPEC.md §5, rug-pull protection). When a
// later discovery sees a different definition, it is kept in Pending until an operator accepts
// it; until then the tool stays out of the catalog.
//
// It is stored as JSON with snake_case names; pins stored before carry the Go names and decode
// the same (UnmarshalJSON).
type Pin struct {
	Server     string          `json:"server"`
	Tool       string          `json:"tool"` // the upstream's name for the tool
	Digest     string          `json:"digest"`
	Definition json.RawMessage `json:"definition,omitempty"`
	Pinned     time.Time       `json:"pinned,omitzero"`
	// Pending is the digest of a changed definition waiting for acceptance, "" if none.
	Pending           string          `json:"pending,omitempty"`
	PendingDefinition json.RawMessage `json:"pending_definition,omitempty"`
	Changed           time.Time       `json:"changed,omitzero"`
	// Annotations are the tool's annotations as the server last listed them (JSON null when it
	// gave none), so that `mcp-gateway check` can verify allow_while_locked without starting the
	// server. They are not part of Digest: hints change no instruction a model reads. Absent in
	// pins stored before they were kept.
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// UnmarshalJSON reads a pin stored with snake_case names or with the Go names of before.
func (p *Pin) UnmarshalJSON(b []byte) error {
	type pin Pin // without this method
	v := struct {
		*pin
		OldPendingDefinition json.RawMessage `json:"PendingDefinition"`
	}{pin: (*pin)(p)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(p.PendingDefinition) == 0 {
		p.PendingDefinition = v.OldPendingDefinition
	}
	return nil
}

// PinStore keeps tool pins, one nested bucket per server.
type PinStore interface {
	GetPin(server, tool string) (Pin, bool, error)
	// PutPin stores p, replacing any pin of the same server and tool.
	PutPin(p Pin) error
	// ListPins returns the pins of one server ("" for all), ordered by server and tool.
	ListPins(server string) ([]Pin, error)
	// AcceptPin makes the pending definition the pinned one. It fails with ErrNotFound when
	// there is no pin and ErrNoPendingChange when nothing is pending.
	AcceptPin(server, tool string) (Pin, error)
}

var _ PinStore = (*Store)(nil)

// GetPin implements [PinStore].
func (s *Store) GetPin(server, tool string) (Pin, bool, error) {
	var (
		p     Pin
		found bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		b := serverPins(tx, server)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(tool))
		if v == nil {
			return nil
		}
		found = true
		return decodePin(server, tool, v, &p)
	})
	if err != nil || !found {
		return Pin{}, false, err
	}
	return p, true, nil
}

// PutPin implements [PinStore].
func (s *Store) PutPin(p Pin) error {
	if p.Server == "" || p.Tool == "" {
		return errors.New("pin without a server or a tool")
	}
	value, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode pin of %s/%s: %w", p.Server, p.Tool, err)
	}
	err = s.update(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(bucketPins).CreateBucketIfNotExists([]byte(p.Server))
		if err != nil {
			return err
		}
		return b.Put([]byte(p.Tool), value)
	})
	if err != nil {
		return fmt.Errorf("store pin of %s/%s in %s: %w", p.Server, p.Tool, s.path, err)
	}
	return nil
}

// ListPins implements [PinStore].
func (s *Store) ListPins(server string) ([]Pin, error) {
	var out []Pin
	collect := func(server string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			var p Pin
			if err := decodePin(server, string(k), v, &p); err != nil {
				return err
			}
			out = append(out, p)
			return nil
		})
	}
	err := s.view(func(tx *bolt.Tx) error {
		if server != "" {
			if b := serverPins(tx, server); b != nil {
				return collect(server, b)
			}
			return nil
		}
		all := tx.Bucket(bucketPins)
		if all == nil {
			return nil
		}
		return all.ForEachBucket(func(k []byte) error {
			return collect(string(k), all.Bucket(k))
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AcceptPin implements [PinStore].
func (s *Store) AcceptPin(server, tool string) (Pin, error) {
	return s.AcceptReviewedPin(server, tool, "")
}

// ErrPendingChanged: the definition waiting for acceptance is not the one the operator reviewed.
var ErrPendingChanged = errors.New("the pending definition changed since it was reviewed")

// AcceptReviewedPin is AcceptPin of the pending definition whose digest is reviewed, in the same
// transaction: when another change arrived after the operator looked ("" skips the check), it
// fails with ErrPendingChanged and accepts nothing.
func (s *Store) AcceptReviewedPin(server, tool, reviewed string) (Pin, error) {
	var p Pin
	err := s.update(func(tx *bolt.Tx) error {
		b := serverPins(tx, server)
		var v []byte
		if b != nil {
			v = b.Get([]byte(tool))
		}
		if v == nil {
			return fmt.Errorf("pin of %s/%s: %w", server, tool, ErrNotFound)
		}
		if err := decodePin(server, tool, v, &p); err != nil {
			return err
		}
		if p.Pending == "" {
			return fmt.Errorf("pin of %s/%s: %w", server, tool, ErrNoPendingChange)
		}
		if reviewed != "" && p.Pending != reviewed {
			return fmt.Errorf("pin of %s/%s: %w (reviewed %.12s…, pending now %.12s…): review the new definition and accept again", server, tool, ErrPendingChanged, reviewed, p.Pending)
		}
		p.Digest, p.Definition = p.Pending, p.PendingDefinition
		p.Pending, p.PendingDefinition, p.Changed = "", nil, time.Time{}
		p.Pinned = s.now().UTC()
		value, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode pin of %s/%s: %w", server, tool, err)
		}
		return b.Put([]byte(tool), value)
	})
	if err != nil {
		return Pin{}, err
	}
	return p, nil
}

func serverPins(tx *bolt.Tx, server string) *bolt.Bucket {
	all := tx.Bucket(bucketPins)
	if all == nil {
		return nil
	}
	return all.Bucket([]byte(server))
}

func decodePin(server, tool string, v []byte, p *Pin) error {
	if err := json.Unmarshal(v, p); err != nil {
		return fmt.Errorf("pin of %s/%s is unreadable: %w", server, tool, err)
	}
	return nil
}
