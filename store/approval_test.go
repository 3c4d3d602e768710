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
