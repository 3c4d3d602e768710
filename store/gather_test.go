package store

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leaderRounds runs twenty rounds on one processor, each a leader's AppendSync with a follower
// made ready to run just before it, the chain's audit step having announced coming calls
// (Coming) for the round; it returns the records of each sync of the rounds. On one processor
// the follower cannot run before the leader yields.
func leaderRounds(t *testing.T, coming int) (*Store, []int) {
	t.Helper()
	var mu sync.Mutex
	var batches []int
	s := openStore(t, t.TempDir(), Options{OnAuditCommit: func(n int, _ time.Duration) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	}})
	// A first record, so that the store's start is behind us.
	if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", 0)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	batches = nil
	mu.Unlock()

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var failed atomic.Int64
	for i := range gatherRounds {
		var wg sync.WaitGroup
		wg.Add(1)
		s.Audit().Coming(coming)
		// Ready to run, not running: this goroutine holds the only processor. It counts as
		// coming only when two calls were announced.
		go func() {
			defer wg.Done()
			if coming > 1 {
				defer s.Audit().Coming(-1)
			}
			if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "follower", 2*i+1)); err != nil {
				failed.Add(1)
			}
		}()
		if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "leader", 2*i+2)); err != nil {
			t.Fatal(err)
		}
		s.Audit().Coming(-1)
		wg.Wait()
	}
	if failed.Load() > 0 {
		t.Fatalf("%d followers' appends failed", failed.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	return s, append([]int(nil), batches...)
}

const gatherRounds = 20

// shared counts the syncs of more than one record.
func shared(batches []int) int {
	n := 0
	for _, b := range batches {
		if b > 1 {
			n++
		}
	}
	return n
}

// TestLeaderGathersTheCallsReadyToRun: a caller that leads a commit while another call is
// coming yields before it takes the queue (gatherYield), so a call that is ready to run and
// about to append shares its sync. Without the yield the leader writes its record alone and the
// other's takes a second sync.
func TestLeaderGathersTheCallsReadyToRun(t *testing.T) {
	s, batches := leaderRounds(t, 2)
	// Every round should be one sync of two records; a sync of its own for a follower now and
	// then (a timer or the collector running in the yield's place) is not what this is about.
	if shared(batches) < gatherRounds*3/4 {
		t.Errorf("syncs of the %d rounds: %v; want (nearly) every round's two records in one sync", gatherRounds, batches)
	}
	if n, bad := s.AuditVerify(); bad != nil || n != 2*gatherRounds+1 {
		t.Errorf("AuditVerify = %d, %v; want %d records on an unbroken chain", n, bad, 2*gatherRounds+1)
	}
}

// A leader that no other call is coming to does not yield: the follower, ready to run but not
// said to be coming, gets a sync of its own every round.
func TestLeaderAloneDoesNotYield(t *testing.T) {
	_, batches := leaderRounds(t, 1)
	if shared(batches) > gatherRounds/4 {
		t.Errorf("syncs of the %d rounds: %v; want (nearly) every record in a sync of its own", gatherRounds, batches)
	}
}
