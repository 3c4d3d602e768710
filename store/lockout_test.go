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

// A halt replaces a lockout of any other kind and keeps it; every other lockout, and a halt
// over a halt, leaves the first in force. What is in force survives a reopen.
func TestApplyLockoutHaltReplacesOtherKinds(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	unknown := Lockout{Server: "arm", Tool: "arm__move", CallID: "c1", Kind: LockoutUnknown, Reason: "deadline passed", At: at}
	if prev, applied, err := s.ApplyLockout(unknown); err != nil || !applied || prev.Server != "" {
		t.Fatalf("first lockout: prev %+v, applied %v, %v", prev, applied, err)
	}
	lock := Lockout{Server: "arm", Kind: LockoutOperator, By: "alice", Reason: "in the cell", At: at.Add(time.Second)}
	if prev, applied, err := s.ApplyLockout(lock); err != nil || applied || prev != unknown {
		t.Fatalf("an operator lock over a lockout must change nothing: prev %+v, applied %v, %v", prev, applied, err)
	}
	halt := Lockout{Server: "arm", Kind: LockoutHalt, By: "bob", Reason: "smoke", At: at.Add(time.Minute)}
	prev, applied, err := s.ApplyLockout(halt)
	if err != nil || !applied || prev != unknown {
		t.Fatalf("a halt over an unknown outcome: prev %+v, applied %v, %v", prev, applied, err)
	}
	got, _ := s.Lockout("arm")
	if !got.Halted() || got.By != "bob" || got.Replaced == nil || *got.Replaced != unknown {
		t.Fatalf("in force after the halt: %+v", got)
	}
	second := Lockout{Server: "arm", Kind: LockoutHalt, By: "carol", Reason: "again", At: at.Add(time.Hour)}
	if prev, applied, err := s.ApplyLockout(second); err != nil || applied || prev.By != "bob" {
		t.Fatalf("a halt over a halt must keep the first: prev %+v, applied %v, %v", prev, applied, err)
	}
	// PutLockout follows the same rule: it is what a timed-out call uses.
	if err := s.PutLockout(Lockout{Server: "arm", Tool: "arm__home", CallID: "c2", At: at.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir, Options{})
	got, ok := s.Lockout("arm")
	if !ok || !got.Halted() || got.By != "bob" || got.Reason != "smoke" || got.Replaced == nil || got.Replaced.CallID != "c1" {
		t.Fatalf("after reopen: %+v, %v; want bob's halt, which replaced c1's lockout", got, ok)
	}
	cleared, ok, err := s.ClearLockout("arm")
	if err != nil || !ok || !cleared.Halted() || cleared.Replaced == nil {
		t.Fatalf("ClearLockout: %+v, %v, %v; want the halt with what it replaced", cleared, ok, err)
	}
}

// A halt held in memory while the disk refused it is written over the lockout it replaced once
// the disk takes writes; any other pending lockout leaves the one on disk.
func TestPendingHaltIsWrittenOverTheLockoutOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, Options{})
	for _, l := range []Lockout{
		{Server: "arm", Tool: "arm__move", CallID: "c1", Kind: LockoutUnknown},
		{Server: "base", Tool: "base__drive", CallID: "c2", Kind: LockoutUnknown},
	} {
		if err := s.PutLockout(l); err != nil {
			t.Fatal(err)
		}
	}
	// What ApplyLockout leaves behind when the write fails: in force in memory, pending.
	s.lockMu.Lock()
	s.pending["arm"] = Lockout{Server: "arm", Kind: LockoutHalt, By: "bob", Reason: "smoke"}
	s.pending["base"] = Lockout{Server: "base", Kind: LockoutOperator, By: "bob", Reason: "in the cell"}
	s.lockMu.Unlock()
	if err := s.writePendingLockouts(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, Options{})
	if l, _ := s.Lockout("arm"); !l.Halted() || l.By != "bob" {
		t.Errorf("arm on disk: %+v, want the halt", l)
	}
	if l, _ := s.Lockout("base"); l.CallID != "c2" || l.Kind != LockoutUnknown {
		t.Errorf("base on disk: %+v, want the first lockout kept", l)
	}
}
