package store

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLeaderGathersTheCallsReadyToRun: a caller that leads a commit yields before it takes the
// queue (gatherYield), so a call that is ready to run and about to append shares its sync. On
// one processor the other caller cannot run before the leader yields: without the yield the
// leader writes its record alone and the other's takes a second sync.
func TestLeaderGathersTheCallsReadyToRun(t *testing.T) {
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
	const rounds = 20
	var failed atomic.Int64
	for i := range rounds {
		var wg sync.WaitGroup
		wg.Add(1)
		s.Audit().Coming(2) // two calls in flight, as the chain's audit step says of each
		go func() {         // ready to run, not running: this goroutine holds the only processor
			defer wg.Done()
			defer s.Audit().Coming(-1)
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
	shared := 0
	for _, n := range batches {
		if n == 2 {
			shared++
		}
	}
	// Every round should be one sync of two records; a sync of its own for a follower now and
	// then (a timer or the collector running in the yield's place) is not what this is about.
	if shared < rounds*3/4 {
		t.Errorf("syncs of the %d rounds: %v; want (nearly) every round's two records in one sync", rounds, batches)
	}
	if n, bad := s.AuditVerify(); bad != nil || n != 2*rounds+1 {
		t.Errorf("AuditVerify = %d, %v; want %d records on an unbroken chain", n, bad, 2*rounds+1)
	}
}

// A leader that no other call is coming to (Coming) does not yield: the follower, ready to run
// but not said to be coming, gets a sync of its own every round.
func TestLeaderAloneDoesNotYield(t *testing.T) {
	var mu sync.Mutex
	var batches []int
	s := openStore(t, t.TempDir(), Options{OnAuditCommit: func(n int, _ time.Duration) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	}})
	if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "move", 0)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	batches = nil
	mu.Unlock()

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds = 20
	for i := range rounds {
		var wg sync.WaitGroup
		wg.Add(1)
		s.Audit().Coming(1) // the leader's own call
		go func() {
			defer wg.Done()
			if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "follower", 2*i+1)); err != nil {
				t.Error(err)
			}
		}()
		if _, err := s.Audit().AppendSync(t.Context(), callRecord("arm", "leader", 2*i+2)); err != nil {
			t.Fatal(err)
		}
		s.Audit().Coming(-1)
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	shared := 0
	for _, n := range batches {
		if n > 1 {
			shared++
		}
	}
	if shared > rounds/4 {
		t.Errorf("syncs of the %d rounds: %v; want (nearly) every record in a sync of its own", rounds, batches)
	}
}
