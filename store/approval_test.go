package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func pendingApproval(id string, created time.Time) Approval {
	return Approval{
		ID: id, Digest: "d-" + id, Server: "arm", Tool: "arm__move_to", Principal: "planner",
		Session: "s1", Rule: "arm-fast-moves", Reason: "speed above 1.0 m/s",
		Args:    json.RawMessage(`{"speed":1.2}`),
		Created: created, Expires: created.Add(5 * time.Minute),
	}
}

func TestConcurrentDecisionsExactlyOneWins(t *testing.T) {
	now := time.Now()
	s := openStore(t, t.TempDir(), Options{})
	for round := range 20 {
		id := fmt.Sprintf("req-%d", round)
		if err := s.PutApproval(pendingApproval(id, now)); err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			winners atomic.Int32
			winner  atomic.Value
		)
		for g := range 50 {
			state := ApprovalApproved
			if g%2 == 1 {
				state = ApprovalDenied
			}
			wg.Go(func() {
				a, err := s.DecideApproval(id, state, fmt.Sprintf("op-%d", g), "checked the cell", now)
				switch {
				case err == nil:
					winners.Add(1)
					winner.Store(a)
				case !errors.Is(err, ErrAlreadyDecided):
					t.Errorf("round %d: losing decision got %v, want ErrAlreadyDecided", round, err)
				}
			})
		}
		wg.Wait()
		if n := winners.Load(); n != 1 {
			t.Fatalf("round %d: %d decisions won, want exactly 1", round, n)
		}
		won := winner.Load().(Approval)
		stored, _, err := s.GetApproval(id)
		if err != nil || stored.State != won.State || stored.DecidedBy != won.DecidedBy {
			t.Fatalf("round %d: stored %s by %s (%v), the winner was %s by %s",
				round, stored.State, stored.DecidedBy, err, won.State, won.DecidedBy)
		}
	}
}

func TestConsumeApprovalOnce(t *testing.T) {
	now := time.Now()
	s := openStore(t, t.TempDir(), Options{})
	if err := s.PutApproval(pendingApproval("a1", now)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeApproval("a1"); !errors.Is(err, ErrNotApproved) {
		t.Errorf("consuming a pending request: %v, want ErrNotApproved", err)
	}
	if _, err := s.DecideApproval("a1", ApprovalApproved, "operator", "robot checked", now); err != nil {
		t.Fatal(err)
	}
	a, err := s.ConsumeApproval("a1")
	if err != nil || a.State != ApprovalUsed || a.Digest != "d-a1" {
		t.Fatalf("ConsumeApproval = %+v, %v", a, err)
	}
	var wg sync.WaitGroup
	var used atomic.Int32
	for range 20 {
		wg.Go(func() {
			if _, err := s.ConsumeApproval("a1"); err == nil {
				used.Add(1)
			} else if !errors.Is(err, ErrAlreadyUsed) {
				t.Errorf("second ConsumeApproval: %v, want ErrAlreadyUsed", err)
			}
		})
	}
	wg.Wait()
	if used.Load() != 0 {
		t.Errorf("an approval was consumed %d more times", used.Load())
	}
	if _, err := s.DecideApproval("a1", ApprovalDenied, "other", "", now); !errors.Is(err, ErrAlreadyDecided) {
		t.Errorf("deciding a used request: %v, want ErrAlreadyDecided", err)
	}

	if err := s.PutApproval(pendingApproval("d1", now)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecideApproval("d1", ApprovalDenied, "operator", "unsafe", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeApproval("d1"); !errors.Is(err, ErrNotApproved) {
		t.Errorf("consuming a denied request: %v, want ErrNotApproved", err)
	}
	if _, err := s.ConsumeApproval("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("consuming a missing request: %v, want ErrNotFound", err)
	}
}

func TestExpiredApprovalRefused(t *testing.T) {
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := created.Add(10 * time.Minute)
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time { return clock }})
	if err := s.PutApproval(pendingApproval("old", created)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutApproval(pendingApproval("new", clock)); err != nil {
		t.Fatal(err)
	}

	_, err := s.DecideApproval("old", ApprovalApproved, "operator", "", clock)
	if !errors.Is(err, ErrExpired) {
		t.Errorf("deciding an expired request: %v, want ErrExpired", err)
	}
	if a, _, _ := s.GetApproval("old"); a.State != ApprovalExpired {
		t.Errorf("expired request reads as %q", a.State)
	}
	for state, want := range map[string][]string{
		ApprovalPending: {"new"}, ApprovalExpired: {"old"}, "": {"old", "new"},
	} {
		list, err := s.ListApprovals(state)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range list {
			ids = append(ids, a.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("ListApprovals(%q) = %v, want %v", state, ids, want)
		}
	}
	if _, err := s.DecideApproval("missing", ApprovalApproved, "operator", "", clock); !errors.Is(err, ErrNotFound) {
		t.Errorf("deciding a missing request: %v, want ErrNotFound", err)
	}
	if _, err := s.DecideApproval("new", ApprovalUsed, "operator", "", clock); err == nil {
		t.Error("DecideApproval accepted the state \"used\"")
	}
	if err := s.PutApproval(pendingApproval("new", clock)); !errors.Is(err, ErrExists) {
		t.Errorf("storing a request id twice: %v, want ErrExists", err)
	}
}

// A request comes back with every field it was stored with; the answer's fields appear once it
// is answered.
func TestApprovalKeepsEveryField(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := openStore(t, t.TempDir(), Options{})
	want := pendingApproval("req-fields", now)
	if err := s.PutApproval(want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.GetApproval(want.ID)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	want.State = ApprovalPending
	if string(got.Args) != string(want.Args) || got.ID != want.ID || got.Digest != want.Digest || got.Server != want.Server ||
		got.Tool != want.Tool || got.Principal != want.Principal || got.Session != want.Session || got.Rule != want.Rule ||
		got.Reason != want.Reason || !got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) || got.State != want.State {
		t.Fatalf("stored %+v, got %+v", want, got)
	}
	shown, _ := json.Marshal(got)
	for _, key := range []string{`"decided_by"`, `"decision_reason"`, `"decided"`} {
		if strings.Contains(string(shown), key) {
			t.Errorf("a pending request shows %s: %s", key, shown)
		}
	}
	if _, err := s.DecideApproval(want.ID, ApprovalDenied, "alice", "someone is in the cell", now); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.GetApproval(want.ID)
	shown, _ = json.Marshal(got)
	if got.DecidedBy != "alice" || got.DecisionReason != "someone is in the cell" || !got.Decided.Equal(now) ||
		!strings.Contains(string(shown), `"decided":"`) {
		t.Errorf("answered request = %s", shown)
	}
}

// A withdrawn request is out of the pending list and cannot be answered or used; an approval
// that landed as its caller left is withdrawn too, before it runs.
func TestWithdrawnApprovalCannotBeAnswered(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		if err := s.PutApproval(pendingApproval(id, now)); err != nil {
			t.Fatal(err)
		}
	}
	at := now.Add(3 * time.Second)
	got, err := s.WithdrawApproval("w1", "the caller cancelled it; nothing was run", at)
	if err != nil || got.State != ApprovalWithdrawn || !got.Withdrawn.Equal(at) || got.WithdrawReason != "the caller cancelled it; nothing was run" {
		t.Fatalf("WithdrawApproval = %+v, %v", got, err)
	}
	for _, state := range []string{ApprovalApproved, ApprovalDenied} {
		_, err := s.DecideApproval("w1", state, "alice", "late", at.Add(time.Second))
		if !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("%s on a withdrawn request: %v, want ErrWithdrawn", state, err)
		}
		for _, want := range []string{"w1", "withdrawn at 2025-03-01T12:00:03Z: the caller cancelled it; nothing was run"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s on a withdrawn request: %q does not say %q", state, err, want)
			}
		}
	}
	if _, err := s.ConsumeApproval("w1"); !errors.Is(err, ErrNotApproved) {
		t.Errorf("consuming a withdrawn request: %v, want ErrNotApproved", err)
	}
	if _, err := s.WithdrawApproval("w1", "again", at); !errors.Is(err, ErrWithdrawn) {
		t.Errorf("withdrawing twice: %v, want ErrWithdrawn", err)
	}

	// Approved but not run yet: withdrawn, and the approval cannot be used any more.
	if _, err := s.DecideApproval("w2", ApprovalApproved, "alice", "ok", now); err != nil {
		t.Fatal(err)
	}
	if got, err := s.WithdrawApproval("w2", "the caller's session ended", at); err != nil || got.DecidedBy != "alice" {
		t.Fatalf("withdrawing an approved request: %+v, %v", got, err)
	}
	if _, err := s.ConsumeApproval("w2"); !errors.Is(err, ErrNotApproved) {
		t.Errorf("consuming a withdrawn approval: %v, want ErrNotApproved", err)
	}

	// Used, denied and expired requests keep what became of them.
	if _, err := s.DecideApproval("w3", ApprovalApproved, "alice", "ok", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeApproval("w3"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WithdrawApproval("w3", "late", at); !errors.Is(err, ErrAlreadyDecided) {
		t.Errorf("withdrawing a used request: %v, want ErrAlreadyDecided", err)
	}
	if _, err := s.WithdrawApproval("w4", "late", now.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Errorf("withdrawing an expired request: %v, want ErrExpired", err)
	}
	if _, err := s.WithdrawApproval("missing", "late", at); !errors.Is(err, ErrNotFound) {
		t.Errorf("withdrawing a missing request: %v, want ErrNotFound", err)
	}

	pending, _ := s.ListApprovals(ApprovalPending)
	withdrawn, _ := s.ListApprovals(ApprovalWithdrawn)
	if len(pending) != 1 || pending[0].ID != "w4" || len(withdrawn) != 2 || withdrawn[0].ID != "w1" || withdrawn[1].ID != "w2" {
		t.Errorf("pending %v, withdrawn %v", pending, withdrawn)
	}
	shown, _ := json.Marshal(withdrawn[0])
	if !strings.Contains(string(shown), `"withdrawn":"2025-03-01T12:00:03Z"`) || !strings.Contains(string(shown), `"withdraw_reason":"the caller cancelled it; nothing was run"`) {
		t.Errorf("a withdrawn request shows %s", shown)
	}
}

// However an approval and a withdrawal race, the withdrawal wins and leaves nothing to run.
func TestWithdrawalRacingApprovalLeavesNothingToRun(t *testing.T) {
	now := time.Now()
	s := openStore(t, t.TempDir(), Options{})
	for round := range 20 {
		id := fmt.Sprintf("race-%d", round)
		if err := s.PutApproval(pendingApproval(id, now)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.DecideApproval(id, ApprovalApproved, "alice", "ok", now); err != nil && !errors.Is(err, ErrWithdrawn) {
				t.Errorf("round %d: approve: %v", round, err)
			}
		})
		wg.Go(func() {
			if _, err := s.WithdrawApproval(id, "the caller cancelled it", now); err != nil {
				t.Errorf("round %d: withdraw: %v", round, err)
			}
		})
		wg.Wait()
		if _, err := s.ConsumeApproval(id); err == nil {
			t.Fatalf("round %d: a withdrawn call's approval was used", round)
		}
	}
}
