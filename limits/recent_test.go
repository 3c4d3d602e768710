package limits

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration)     { c.ns.Add(int64(d)) }
func counts(c1m, c1h, p1m, p1h int64) Counts { return Counts{c1m, c1h, p1m, p1h} }

func TestRecentMinuteAndHour(t *testing.T) {
	clk := newFakeClock()
	r := NewRecent(clk.now)
	if got := r.Counts("p", "s", "robot"); got != (Rate{}) {
		t.Fatalf("empty Recent counts %+v", got)
	}
	for i := 0; i < 10; i++ {
		if got := r.Counts("p", "s", "robot").Server.Physical1m; got != int64(i) {
			t.Fatalf("call %d sees physical_1m %d, want %d", i+1, got, i)
		}
		r.Note("p", "s", "robot", true)
	}
	r.Note("p", "s", "robot", false)
	want := counts(11, 11, 10, 10)
	if got := r.Counts("p", "s", "robot"); got.Principal != want || got.Session != want || got.Server != want {
		t.Fatalf("after 11 calls: %+v, want %+v in every scope", got, want)
	}

	clk.add(59 * time.Second)
	if got := r.Counts("p", "s", "robot").Server; got != want {
		t.Fatalf("59 s later: %+v, want %+v", got, want)
	}
	r.Note("p", "", "robot", false) // at 59 s: stays for another minute
	clk.add(time.Second)
	if got := r.Counts("p", "s", "robot"); got.Server != counts(1, 12, 0, 10) || got.Session != counts(0, 11, 0, 10) {
		t.Fatalf("60 s later: %+v; want the first 11 calls gone from the minute, kept in the hour", got)
	}
	clk.add(58 * time.Second)
	if got := r.Counts("p", "s", "robot").Server; got != counts(1, 12, 0, 10) {
		t.Fatalf("118 s later: %+v", got)
	}
	clk.add(time.Second)
	if got := r.Counts("p", "s", "robot").Server; got != counts(0, 12, 0, 10) {
		t.Fatalf("119 s later: %+v, want the 59 s call gone from the minute", got)
	}

	// The hour: the first calls (minute 0) leave when minute 60 begins.
	clk.add(59*time.Minute - 119*time.Second) // 59:00
	if got := r.Counts("p", "s", "robot").Server; got != counts(0, 12, 0, 10) {
		t.Fatalf("59 min later: %+v", got)
	}
	r.Note("p", "s", "robot", true) // advances the window itself
	clk.add(time.Minute)            // 60:00
	if got := r.Counts("p", "s", "robot").Server; got != counts(0, 1, 0, 1) {
		t.Fatalf("60 min later: %+v, want only the call of minute 59", got)
	}
	r.Note("p", "s", "robot", false)
	if got := r.Counts("p", "s", "robot").Server; got != counts(1, 2, 0, 1) {
		t.Fatalf("after a note at 60 min: %+v", got)
	}
	clk.add(2 * time.Hour)
	if got := r.Counts("p", "s", "robot"); got != (Rate{}) {
		t.Fatalf("two hours later: %+v, want nothing", got)
	}
	r.Note("p", "s", "robot", true)
	if got := r.Counts("p", "s", "robot").Principal; got != counts(1, 1, 1, 1) {
		t.Fatalf("a note after two idle hours: %+v", got)
	}
}

func TestRecentKeysAreSeparate(t *testing.T) {
	clk := newFakeClock()
	r := NewRecent(clk.now)
	r.Note("alice", "s1", "robot", true)
	r.Note("alice", "s2", "camera", false)
	r.Note("bob", "s3", "robot", false)
	// A name used in two scopes is two keys.
	r.Note("robot", "robot", "x", false)

	got := r.Counts("alice", "s1", "robot")
	if got.Principal != counts(2, 2, 1, 1) || got.Session != counts(1, 1, 1, 1) || got.Server != counts(2, 2, 1, 1) {
		t.Fatalf("alice/s1/robot: %+v", got)
	}
	got = r.Counts("bob", "s2", "camera")
	if got.Principal != counts(1, 1, 0, 0) || got.Session != counts(1, 1, 0, 0) || got.Server != counts(1, 1, 0, 0) {
		t.Fatalf("bob/s2/camera: %+v", got)
	}
	got = r.Counts("robot", "robot", "robot")
	if got.Principal != counts(1, 1, 0, 0) || got.Session != counts(1, 1, 0, 0) || got.Server != counts(2, 2, 1, 1) {
		t.Fatalf("robot in every scope: %+v", got)
	}
	if got := r.Counts("carol", "", "none"); got != (Rate{}) {
		t.Fatalf("unknown names: %+v", got)
	}
	r.Note("carol", "", "none", false)
	if got := r.Counts("carol", "", "none"); got.Session != (Counts{}) || got.Principal != counts(1, 1, 0, 0) {
		t.Fatalf("a call without a session: %+v, want the empty session not counted", got)
	}
}

func TestRecentClockBack(t *testing.T) {
	clk := newFakeClock()
	r := NewRecent(clk.now)
	r.Note("p", "s", "robot", true)
	clk.add(-30 * time.Second)
	r.Note("p", "s", "robot", true)
	if got := r.Counts("p", "s", "robot").Server; got != counts(2, 2, 2, 2) {
		t.Fatalf("after the clock stepped back: %+v", got)
	}
	clk.add(90 * time.Second) // 60 s after the newest note
	if got := r.Counts("p", "s", "robot").Server; got.Calls1m != 0 {
		t.Fatalf("a minute after: %+v", got)
	}
}

func TestRecentIdleExpiry(t *testing.T) {
	clk := newFakeClock()
	r := NewRecent(clk.now)
	for i := 0; i < 1000; i++ {
		r.Note(fmt.Sprint("p", i), fmt.Sprint("s", i), "robot", false)
	}
	if n := r.Len(); n != 2001 {
		t.Fatalf("%d windows, want 2001", n)
	}
	// Counts does not create windows.
	r.Counts("nobody", "nothing", "nowhere")
	if n := r.Len(); n != 2001 {
		t.Fatalf("Counts made windows: %d", n)
	}
	clk.add(30 * time.Minute)
	r.Note("busy", "busy", "robot", false)
	clk.add(29 * time.Minute)
	r.Note("busy", "busy", "robot", false)
	if n := r.Len(); n != 2003 {
		t.Fatalf("%d windows before an hour passed, want all kept (2003)", n)
	}
	clk.add(2 * time.Minute) // 61 min: the first 2000 windows are over an hour idle
	// Sweeps run in the shards notes touch: a thousand names touch them all.
	for i := 0; i < 1000; i++ {
		r.Note(fmt.Sprint("q", i), "", "robot", false)
	}
	if n := r.Len(); n != 1003 {
		t.Fatalf("%d windows after the first ones were idle an hour, want 1003 (q0…q999, busy twice, robot)", n)
	}
	if got := r.Counts("busy", "busy", "robot"); got.Principal != counts(0, 2, 0, 0) || got.Server != counts(1000, 1002, 0, 0) {
		t.Fatalf("after the sweep: %+v", got)
	}
	if got := r.Counts("p0", "s0", ""); got != (Rate{}) {
		t.Fatalf("an expired name: %+v", got)
	}
}

func TestRecentConcurrent(t *testing.T) {
	r := NewRecent(nil)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				r.Counts(fmt.Sprint("p", g%2), fmt.Sprint("s", g), "robot")
				r.Note(fmt.Sprint("p", g%2), fmt.Sprint("s", g), "robot", i%2 == 0)
			}
		}(g)
	}
	wg.Wait()
	got := r.Counts("p0", "s0", "robot")
	// The test may straddle a minute boundary only in the hour ring's favour: the hour keeps all.
	if got.Server.Calls1h != 8000 || got.Server.Physical1h != 4000 || got.Principal.Calls1h != 4000 || got.Session.Calls1h != 1000 {
		t.Fatalf("after 8000 concurrent calls: %+v", got)
	}
}

// BenchmarkRecentCall is what the policy step does per call: read the counts, then note.
func BenchmarkRecentCall(b *testing.B) {
	r := NewRecent(nil)
	principals := make([]string, 64)
	for i := range principals {
		principals[i] = fmt.Sprint("principal-", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		p := principals[i%len(principals)]
		_ = r.Counts(p, p, "robot")
		r.Note(p, p, "robot", i%2 == 0)
		i++
	}
}

func BenchmarkRecentCallParallel(b *testing.B) {
	r := NewRecent(nil)
	b.ReportAllocs()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		p := fmt.Sprint("principal-", n.Add(1))
		for pb.Next() {
			_ = r.Counts(p, p, "robot")
			r.Note(p, p, "robot", true)
		}
	})
}

// TestRecentMemoryPerKey holds the documented bound: about 1 KB per name seen in the last hour.
func TestRecentMemoryPerKey(t *testing.T) {
	const n = 20000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("session-%08d", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := NewRecent(nil)
	for _, name := range names {
		r.Note("", name, "", false)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per key", per)
	if per > 1200 {
		t.Fatalf("%.0f bytes per key, documented as about 1 KB", per)
	}
	runtime.KeepAlive(r)
}
