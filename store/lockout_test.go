package store

import (
	"strings"
	"testing"
	"time"
)

func TestLockoutsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	if got := s.Lockouts(); got != nil {
		t.Fatalf("new store has lockouts %v", got)
	}
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	first := Lockout{Server: "arm", Tool: "arm__move_to", CallID: "c1", Principal: "planner", Session: "s1", Reason: "deadline 300s passed", At: at}
	if err := s.PutLockout(first); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLockout(Lockout{Server: "gripper", Tool: "gripper__close", CallID: "c2", At: at.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	// A second lockout of a locked server keeps the first.
	if err := s.PutLockout(Lockout{Server: "arm", Tool: "arm__home", CallID: "c3", At: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Lockout("arm"); got != first {
		t.Errorf("after a second PutLockout, Lockout(arm) = %+v, want the first %+v", got, first)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{})
	got := s.Lockouts()
	if len(got) != 2 || got[0] != first || got[1].Server != "gripper" {
		t.Fatalf("after reopen Lockouts() = %+v, want arm (first) then gripper", got)
	}
	got[0].Server = "changed by caller"
	if l, _ := s.Lockout("arm"); l.Server != "arm" {
		t.Error("changing the slice Lockouts returned changed the store's copy")
	}

	cleared, ok, err := s.ClearLockout("arm")
	if err != nil || !ok || cleared != first {
		t.Fatalf("ClearLockout(arm) = %+v, %v, %v; want the first lockout", cleared, ok, err)
	}
	if _, ok, err := s.ClearLockout("arm"); ok || err != nil {
		t.Errorf("second ClearLockout(arm) = %v, %v; want false, nil", ok, err)
	}
	if _, ok := s.Lockout("arm"); ok {
		t.Error("arm still locked out after ClearLockout")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{})
	if _, ok := s.Lockout("arm"); ok {
		t.Error("cleared lockout came back after reopen")
	}
	if _, ok := s.Lockout("gripper"); !ok {
		t.Error("gripper lockout lost after reopen")
	}
}

func TestPutLockoutStampsTime(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	if err := s.PutLockout(Lockout{Server: "arm"}); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Lockout("arm"); !l.At.Equal(now) {
		t.Errorf("At = %v, want %v", l.At, now)
	}
	if err := s.PutLockout(Lockout{}); err == nil {
		t.Error("PutLockout without a server succeeded")
	}
}

func BenchmarkLockoutCheck(b *testing.B) {
	s := openStore(b, b.TempDir(), Options{})
	b.ReportAllocs()
	for b.Loop() {
		if s.Lockouts() != nil {
			b.Fatal("locked")
		}
		if _, ok := s.Lockout("arm"); ok {
			b.Fatal("locked")
		}
	}
}

// A gateway killed during a physical call leaves a journal entry; the next Open locks the server
// out, and a finished call leaves nothing behind.
func TestInFlightPhysicalCallLocksOutAfterACrash(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.BeginPhysical(Lockout{Server: "arm", Tool: "arm__pick", CallID: "c1", Principal: "agent"}); err != nil {
		t.Fatal(err)
	}
	if err := st.BeginPhysical(Lockout{Server: "base", Tool: "base__move", CallID: "c2"}); err != nil {
		t.Fatal(err)
	}
	if err := st.EndPhysical("c2"); err != nil {
		t.Fatal(err)
	}
	if _, locked := st.Lockout("arm"); locked {
		t.Fatal("a call in flight must not lock out while the gateway runs")
	}
	// The process dies here: Close stands in for the lock release a crash causes.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, locked := st.Lockout("arm")
	if !locked || l.CallID != "c1" || l.Tool != "arm__pick" || !strings.Contains(l.Reason, "gateway stopped") {
		t.Fatalf("after the restart: %+v, %v", l, locked)
	}
	if _, locked := st.Lockout("base"); locked {
		t.Fatal("a finished call must leave no lockout")
	}
}
