package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Approval states.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
	ApprovalUsed     = "used"
	// ApprovalWithdrawn: the call stopped waiting before it ran (its client cancelled it or went
	// away, or the gateway stopped), so nothing can be run by answering it.
	ApprovalWithdrawn = "withdrawn"
)

// ApprovalStates are the states a request can be in, in the order a request goes through them.
var ApprovalStates = []string{ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalUsed, ApprovalWithdrawn}

// RecordApproval is the type of the audit records about an approval request itself, apart from
// its decision (an operator record): one says that the channel could not deliver the request,
// one that the call was withdrawn.
const RecordApproval = "approval"

// Approval is a request for an operator to approve one exact call (SPEC.md §9): everything a
// person needs to decide, as `approvals list`, /admin/approvals and the channels show it.
//
// It is stored as JSON with snake_case names; requests stored before carry the Go names and
// decode the same (UnmarshalJSON).
type Approval struct {
	ID string `json:"id"`
	// Digest identifies the exact call: server, upstream tool and canonical arguments, keyed
	// like an audit record's digest (DigestArgs), so it cannot be inverted to a redacted value.
	Digest string `json:"digest"`
	// Server is the tool's server, Tool its public name.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Principal and Session are who asked and in which downstream session (or agent run).
	Principal string `json:"principal,omitempty"`
	Session   string `json:"session,omitempty"`
	// Rule is the policy rule that required the approval ("guard" for a guard that escalates),
	// Reason its reason.
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Args are the arguments as the call's audit record keeps them: after the tool_call guards
	// and audit redaction. The original arguments are never stored; Digest covers them.
	Args    json.RawMessage `json:"args,omitempty"`
	Created time.Time       `json:"created,omitzero"`
	Expires time.Time       `json:"expires,omitzero"`
	// State is one of the Approval* constants. A pending request read after Expires is reported
	// as expired.
	State string `json:"state"`
	// DecidedBy, DecisionReason and Decided are the operator's answer: who, why and when; empty
	// while the request is pending or once it expired unanswered.
	DecidedBy      string    `json:"decided_by,omitempty"`
	DecisionReason string    `json:"decision_reason,omitempty"`
	Decided        time.Time `json:"decided,omitzero"`
	// Withdrawn and WithdrawReason say when and why the call stopped waiting (State withdrawn):
	// its caller cancelled it, closed its connection or its session, or the gateway stopped;
	// the reason also says what became of the call. Principal and Session say whose call it was.
	Withdrawn      time.Time `json:"withdrawn,omitzero"`
	WithdrawReason string    `json:"withdraw_reason,omitempty"`
}

// UnmarshalJSON reads a request stored with snake_case names or with the Go names of before.
func (a *Approval) UnmarshalJSON(b []byte) error {
	type approval Approval // without this method
	v := struct {
		*approval
		OldDecidedBy      string `json:"DecidedBy"`
		OldDecisionReason string `json:"DecisionReason"`
		OldWithdrawReason string `json:"WithdrawReason"`
	}{approval: (*approval)(a)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	a.DecidedBy = cmp.Or(a.DecidedBy, v.OldDecidedBy)
	a.DecisionReason = cmp.Or(a.DecisionReason, v.OldDecisionReason)
	a.WithdrawReason = cmp.Or(a.WithdrawReason, v.OldWithdrawReason)
	return nil
}

// ApprovalStore keeps approval requests. Every state change is one bbolt transaction, so only
// one answer can claim a request and an approval runs its call once.
type ApprovalStore interface {
	// PutApproval stores a new request (State defaults to pending). An existing ID is refused
	// with ErrExists: a decided request must never be reopened.
	PutApproval(a Approval) error
	GetApproval(id string) (Approval, bool, error)
	// ListApprovals returns the requests in a state ("" for all), oldest first.
	ListApprovals(state string) ([]Approval, error)
	// DecideApproval approves or denies a pending, unexpired request. Otherwise it fails with
	// ErrNotFound, ErrAlreadyDecided, ErrExpired or ErrWithdrawn, wrapped with the id and what
	// became of the request.
	DecideApproval(id, state, by, reason string, now time.Time) (Approval, error)
	// WithdrawApproval records that the call of a request stopped waiting, and why, so that it
	// can no longer be answered: a pending request, or an approved one whose call has not run
	// (the approval landed as the caller left). A request that expired, was denied, used or
	// withdrawn is left as it is, with ErrExpired, ErrAlreadyDecided or ErrWithdrawn.
	WithdrawApproval(id, reason string, now time.Time) (Approval, error)
	// ConsumeApproval moves an approved request to used and returns it, exactly once; then
	// ErrAlreadyUsed, or ErrNotApproved for any other state.
	ConsumeApproval(id string) (Approval, error)
	// DigestArgs is the keyed digest of the state file (see digest.go); a request's Digest is
	// made with it.
	DigestArgs(b []byte) string
}

var _ ApprovalStore = (*Store)(nil)

// effective reports a pending request past its expiry as expired.
func (a Approval) effective(now time.Time) Approval {
	if a.State == ApprovalPending && !a.Expires.IsZero() && !now.Before(a.Expires) {
		a.State = ApprovalExpired
	}
	return a
}

// PutApproval implements [ApprovalStore].
func (s *Store) PutApproval(a Approval) error {
	if a.ID == "" {
		return errors.New("approval without an id")
	}
	if a.State == "" {
		a.State = ApprovalPending
	}
	if a.Created.IsZero() {
		a.Created = s.now().UTC()
	}
	value, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode approval %s: %w", a.ID, err)
	}
	if err := s.Available(); err != nil {
		return fmt.Errorf("store approval %s: %w", a.ID, err)
	}
	err = s.updateWithin(s.commitTimeout, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		if b.Get([]byte(a.ID)) != nil {
			return fmt.Errorf("approval %s: %w", a.ID, ErrExists)
		}
		return b.Put([]byte(a.ID), value)
	}, nil)
	if err != nil {
		return fmt.Errorf("store approval %s in %s: %w", a.ID, s.path, err)
	}
	return nil
}

// GetApproval implements [ApprovalStore].
func (s *Store) GetApproval(id string) (Approval, bool, error) {
	var (
		a     Approval
		found bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		return decodeApproval(id, v, &a)
	})
	if err != nil || !found {
		return Approval{}, false, err
	}
	return a.effective(s.now()), true, nil
}

// ListApprovals implements [ApprovalStore].
func (s *Store) ListApprovals(state string) ([]Approval, error) {
	now := s.now()
	var out []Approval
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var a Approval
			if err := decodeApproval(string(k), v, &a); err != nil {
				return err
			}
			if a = a.effective(now); state == "" || a.State == state {
				out = append(out, a)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Approval) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// DecideApproval implements [ApprovalStore].
func (s *Store) DecideApproval(id, state, by, reason string, now time.Time) (Approval, error) {
	if state != ApprovalApproved && state != ApprovalDenied {
		return Approval{}, fmt.Errorf("approval %s: a decision is %q or %q, not %q", id, ApprovalApproved, ApprovalDenied, state)
	}
	return s.modifyApproval(id, func(cur *Approval) error {
		switch cur.effective(now).State {
		case ApprovalPending:
		case ApprovalExpired:
			return fmt.Errorf("approval %s expired at %s: %w", id, cur.Expires.Format(time.RFC3339), ErrExpired)
		case ApprovalWithdrawn:
			return withdrawnError(cur)
		default:
			by := ""
			if cur.DecidedBy != "" {
				by = " by " + cur.DecidedBy
			}
			return fmt.Errorf("approval %s is already %s%s: %w", id, cur.State, by, ErrAlreadyDecided)
		}
		cur.State, cur.DecidedBy, cur.DecisionReason, cur.Decided = state, by, reason, now.UTC()
		return nil
	})
}

// WithdrawApproval implements [ApprovalStore].
func (s *Store) WithdrawApproval(id, reason string, now time.Time) (Approval, error) {
	return s.modifyApproval(id, func(cur *Approval) error {
		switch cur.effective(now).State {
		case ApprovalPending, ApprovalApproved:
		case ApprovalExpired:
			return fmt.Errorf("approval %s expired at %s: %w", id, cur.Expires.Format(time.RFC3339), ErrExpired)
		case ApprovalWithdrawn:
			return withdrawnError(cur)
		default:
			return fmt.Errorf("approval %s is already %s: %w", id, cur.State, ErrAlreadyDecided)
		}
		cur.State, cur.Withdrawn, cur.WithdrawReason = ApprovalWithdrawn, now.UTC(), reason
		return nil
	})
}

// withdrawnError is the answer to an operator who answers a withdrawn request.
func withdrawnError(a *Approval) error {
	return fmt.Errorf("approval %s cannot be answered: the call was %w at %s: %s",
		a.ID, ErrWithdrawn, a.Withdrawn.Format(time.RFC3339), a.WithdrawReason)
}

// ConsumeApproval implements [ApprovalStore].
func (s *Store) ConsumeApproval(id string) (Approval, error) {
	return s.modifyApproval(id, func(cur *Approval) error {
		switch cur.State {
		case ApprovalApproved:
		case ApprovalUsed:
			return fmt.Errorf("approval %s: %w", id, ErrAlreadyUsed)
		default:
			return fmt.Errorf("approval %s is %s: %w", id, cur.effective(s.now()).State, ErrNotApproved)
		}
		cur.State = ApprovalUsed
		return nil
	})
}

// modifyApproval reads, changes and writes one approval in a single transaction; that is what
// makes exactly one of many concurrent decisions win. While the state file does not take writes
// it refuses at once: a decision that cannot be recorded is not made.
func (s *Store) modifyApproval(id string, change func(*Approval) error) (Approval, error) {
	if err := s.Available(); err != nil {
		return Approval{}, fmt.Errorf("approval %s is unchanged: %w", id, err)
	}
	var changed Approval
	err := s.updateWithin(s.commitTimeout, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketApprovals)
		v := b.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("approval %s: %w", id, ErrNotFound)
		}
		var a Approval
		if err := decodeApproval(id, v, &a); err != nil {
			return err
		}
		if err := change(&a); err != nil {
			return err
		}
		value, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode approval %s: %w", id, err)
		}
		changed = a
		return b.Put([]byte(id), value)
	}, nil)
	if err != nil {
		// A write that timed out may still land; its result is not read here (the transaction
		// still owns it), and the caller is told it failed.
		return Approval{}, err
	}
	return changed, nil
}

func decodeApproval(id string, v []byte, a *Approval) error {
	if err := json.Unmarshal(v, a); err != nil {
		return fmt.Errorf("approval %s is unreadable: %w", id, err)
	}
	return nil
}
