package limits

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// clock is a settable time for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// limit is a checked config limit.
func limitCfg(t testing.TB, id, per, rate string, burst, concurrent int) config.Limit {
	l := config.Limit{ID: id, Per: per, Rate: rate, Burst: burst, Concurrent: concurrent, Mode: config.LimitEnforce}
	if rate != "" {
		var err error
		if l.Count, l.Window, err = config.ParseRate(rate); err != nil {
			panic(err)
		}
		if l.Burst == 0 {
			l.Burst = l.Count
		}
	}
	return l
}

func admit(l *Limiter, r *Request) (Refusal, bool, *Held) {
	h := &Held{}
	ref, refused := l.Admit(r, h)
	return ref, refused, h
}

func TestRateRefillAndRetryAfter(t *testing.T) {
	clk := newClock()
	l := New([]config.Limit{limitCfg(t, "arm-moves", config.PerPrincipal, "5/m", 0, 0)}, Options{Now: clk.now})
	r := &Request{Principal: "planner", Server: "robot", Tool: "robot__move", Physical: true}
	for i := range 5 {
		if ref, refused, _ := admit(l, r); refused {
			t.Fatalf("call %d refused: %+v", i+1, ref)
		}
	}
	ref, refused, _ := admit(l, r)
	if !refused {
		t.Fatal("the sixth call in a minute was admitted")
	}
	// 5/m refills one token every 12 s.
	if ref.Limit != "arm-moves" || ref.Window != "1m" || ref.RetryAfterSec != 12 {
		t.Errorf("refusal %+v, want arm-moves, 1m, 12 s", ref)
	}
	want := "limit arm-moves allows 5 calls per minute per principal; this call was not sent. Wait 12 s before calling again; retrying sooner is refused the same way."
	if ref.Reason != want {
		t.Errorf("reason %q\nwant   %q", ref.Reason, want)
	}
	clk.advance(7 * time.Second)
	if ref, refused, _ = admit(l, r); !refused || ref.RetryAfterSec != 5 {
		t.Errorf("after 7 s: refused %v, %+v; want a retry after 5 s", refused, ref)
	}
	clk.advance(5 * time.Second)
	if _, refused, _ = admit(l, r); refused {
		t.Error("refused 12 s after the fifth call, when a token has been refilled")
	}
	if _, refused, _ = admit(l, r); !refused {
		t.Error("a second call on one refilled token was admitted")
	}
	// A long pause refills up to the burst, no more.
	clk.advance(time.Hour)
	for i := range 5 {
		if _, refused, _ := admit(l, r); refused {
			t.Fatalf("after an hour, call %d refused", i+1)
		}
	}
	if _, refused, _ = admit(l, r); !refused {
		t.Error("the bucket held more than its burst")
	}
}

func TestBurst(t *testing.T) {
	clk := newClock()
	l := New([]config.Limit{limitCfg(t, "b", config.PerGlobal, "1/s", 3, 0)}, Options{Now: clk.now})
	r := &Request{Principal: "p"}
	for i := range 3 {
		if _, refused, _ := admit(l, r); refused {
			t.Fatalf("call %d of a burst of 3 refused", i+1)
		}
	}
	ref, refused, _ := admit(l, r)
	if !refused || ref.RetryAfterSec != 1 || ref.Window != "1s" || !strings.Contains(ref.Reason, "for all callers together") {
		t.Errorf("fourth call: refused %v, %+v", refused, ref)
	}
	if got := retryAfterSec(1e-9); got != 1 {
		t.Errorf("retryAfterSec(1 ns) = %d, want at least 1", got)
	}
	if got := retryAfterSec(2.001); got != 3 {
		t.Errorf("retryAfterSec(2 s + 1 ns) = %d, want 3", got)
	}
}

func TestKeysAreSeparate(t *testing.T) {
	clk := newClock()
	for _, per := range []string{config.PerPrincipal, config.PerSession, config.PerServer, config.PerTool} {
		l := New([]config.Limit{limitCfg(t, "k", per, "1/h", 0, 0)}, Options{Now: clk.now})
		a := &Request{Principal: "a", Session: "s1", Server: "robot", Tool: "robot__move"}
		b := &Request{Principal: "b", Session: "s2", Server: "cam", Tool: "cam__snap"}
		if _, refused, _ := admit(l, a); refused {
			t.Fatalf("per %s: first call refused", per)
		}
		if _, refused, _ := admit(l, a); !refused {
			t.Errorf("per %s: second call of the same key admitted", per)
		}
		if _, refused, _ := admit(l, b); refused {
			t.Errorf("per %s: another key was refused", per)
		}
	}
	// Per session, requests without a session (MCP 2026-07-28) count by their principal, not
	// all together.
	l := New([]config.Limit{limitCfg(t, "s", config.PerSession, "1/h", 0, 0)}, Options{Now: clk.now})
	admit(l, &Request{Principal: "a"})
	if _, refused, _ := admit(l, &Request{Principal: "b"}); refused {
		t.Error("per session, two principals' sessionless requests shared one bucket")
	}
	if _, refused, _ := admit(l, &Request{Principal: "a"}); !refused {
		t.Error("per session, a principal's second sessionless request was admitted")
	}
	// Global: one bucket for everyone.
	l = New([]config.Limit{limitCfg(t, "g", config.PerGlobal, "1/h", 0, 0)}, Options{Now: clk.now})
	admit(l, &Request{Principal: "a"})
	if _, refused, _ := admit(l, &Request{Principal: "b"}); !refused {
		t.Error("a global limit counted principals apart")
	}
}

func TestConcurrentCapAndRelease(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l := New([]config.Limit{limitCfg(t, "one", config.PerServer, "", 0, 1)}, Options{Metrics: m})
	r := &Request{Server: "cam"}
	_, refused, first := admit(l, r)
	if refused {
		t.Fatal("first call refused")
	}
	if got := testutil.ToFloat64(m.inFlight.WithLabelValues("one")); got != 1 {
		t.Errorf("in flight %v, want 1", got)
	}
	ref, refused, _ := admit(l, r)
	if !refused || ref.Window != "concurrent" || ref.RetryAfterSec != 1 || !strings.Contains(ref.Reason, "1 call in flight at a time per server") {
		t.Errorf("second concurrent call: refused %v, %+v", refused, ref)
	}
	if _, refused, _ := admit(l, &Request{Server: "robot"}); refused {
		t.Error("another server was refused")
	}
	l.Release(first)
	if _, refused, _ := admit(l, r); refused {
		t.Error("refused after the call in flight was released")
	}
	if got := testutil.ToFloat64(m.limited.WithLabelValues("one", "enforce")); got != 1 {
		t.Errorf("rate_limited_total %v, want 1", got)
	}
}

func TestRefusalTakesNothing(t *testing.T) {
	clk := newClock()
	l := New([]config.Limit{
		limitCfg(t, "wide", config.PerPrincipal, "10/m", 0, 0),
		limitCfg(t, "cap", config.PerPrincipal, "", 0, 1),
	}, Options{Now: clk.now})
	r := &Request{Principal: "p"}
	_, _, h := admit(l, r)
	for range 3 {
		if _, refused, _ := admit(l, r); !refused {
			t.Fatal("cap admitted a second call in flight")
		}
	}
	l.Release(h)
	// Only the first call took a token of "wide": 9 left.
	for i := range 9 {
		_, refused, h := admit(l, r)
		if refused {
			t.Fatalf("call %d refused: the refused calls took tokens", i+1)
		}
		l.Release(h)
	}
	if _, refused, _ := admit(l, r); !refused {
		t.Error("wide admitted an eleventh call")
	}
}

func TestPhysicalOnlyAndMatch(t *testing.T) {
	clk := newClock()
	c := limitCfg(t, "arm", config.PerPrincipal, "1/h", 0, 0)
	c.PhysicalOnly = true
	c.Match = config.LimitMatch{Principals: []string{"planner*"}, Roles: []string{"agent"}, Tools: []string{"robot__*"}}
	l := New([]config.Limit{c}, Options{Now: clk.now})
	move := &Request{Principal: "planner-1", Roles: []string{"agent"}, Server: "robot", Tool: "robot__move", Physical: true}
	admit(l, move)
	if _, refused, _ := admit(l, move); !refused {
		t.Error("second physical call admitted")
	}
	for name, r := range map[string]*Request{
		"a read":            {Principal: "planner-1", Roles: []string{"agent"}, Server: "robot", Tool: "robot__move", Physical: false},
		"another principal": {Principal: "viewer", Roles: []string{"agent"}, Server: "robot", Tool: "robot__move", Physical: true},
		"another role":      {Principal: "planner-1", Roles: []string{"operator"}, Server: "robot", Tool: "robot__move", Physical: true},
		"another tool":      {Principal: "planner-1", Roles: []string{"agent"}, Server: "arm", Tool: "arm__move", Physical: true},
	} {
		for range 3 {
			if _, refused, _ := admit(l, r); refused {
				t.Errorf("%s was counted", name)
			}
		}
	}
}

func TestLogOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	c := limitCfg(t, "shadow", config.PerPrincipal, "2/m", 0, 0)
	c.Mode = config.LimitLogOnly
	l := New([]config.Limit{c}, Options{Metrics: m, Now: newClock().now})
	r := &Request{Principal: "p"}
	for i := range 5 {
		_, refused, h := admit(l, r)
		if refused {
			t.Fatalf("a log_only limit refused call %d", i+1)
		}
		if want := map[bool]string{true: "shadow", false: ""}[i >= 2]; h.WouldRefuse != want {
			t.Errorf("call %d: WouldRefuse %q, want %q", i+1, h.WouldRefuse, want)
		}
	}
	if got := testutil.ToFloat64(m.limited.WithLabelValues("shadow", "log_only")); got != 3 {
		t.Errorf("would-be refusals %v, want 3", got)
	}
}

func TestIdleKeysExpire(t *testing.T) {
	clk := newClock()
	l := New([]config.Limit{limitCfg(t, "k", config.PerSession, "60/m", 0, 2)}, Options{Now: clk.now})
	var inFlight *Held
	for i := range 5000 {
		_, _, h := admit(l, &Request{Session: "s" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)})
		if i == 0 {
			inFlight = h
		} else {
			l.Release(h)
		}
	}
	if n := l.Keys("k"); n < 1000 {
		t.Fatalf("%d keys, want them kept while their buckets refill", n)
	}
	clk.advance(time.Second / 2)
	l.Sweep()
	if n := l.Keys("k"); n < 1000 {
		t.Fatalf("%d keys after half a second, want them kept: their buckets are not full yet", n)
	}
	clk.advance(2 * time.Second)
	l.Sweep()
	if n := l.Keys("k"); n != 1 {
		t.Errorf("%d keys after their buckets refilled, want only the one with a call in flight", n)
	}
	l.Release(inFlight)
	l.Sweep()
	if n := l.Keys("k"); n != 0 {
		t.Errorf("%d keys, want 0", n)
	}
	// The amortized sweep alone also bounds a shard: keys idle by the time it grows.
	for i := range 100_000 {
		_, _, h := admit(l, &Request{Session: strings.Repeat("y", 1+i%7) + string(rune('A'+i%50)) + time.Duration(i).String()})
		l.Release(h)
		clk.advance(time.Millisecond)
	}
	if n := l.Keys("k"); n > nShards*2*minSweep {
		t.Errorf("%d keys held, want at most %d", n, nShards*2*minSweep)
	}
}

func TestReloadKeepsCounters(t *testing.T) {
	clk := newClock()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cfg := []config.Limit{
		limitCfg(t, "kept", config.PerPrincipal, "1/h", 0, 0),
		limitCfg(t, "changed", config.PerPrincipal, "1/h", 0, 0),
		limitCfg(t, "gone", config.PerPrincipal, "1/h", 0, 0),
	}
	l := New(cfg, Options{Now: clk.now, Metrics: m})
	r := &Request{Principal: "p"}
	admit(l, r)
	admit(l, r) // refused by kept, counted
	next := []config.Limit{cfg[0], limitCfg(t, "changed", config.PerPrincipal, "2/h", 0, 0)}
	next[0].Match.Tools = []string{"*"} // the match may change and keep the counters
	l2 := New(next, Options{Previous: l, Now: clk.now, Metrics: m})
	ref, refused, _ := admit(l2, r)
	if !refused || ref.Limit != "kept" {
		t.Errorf("after reload: refused %v by %q, want kept to remember the call", refused, ref.Limit)
	}
	l3 := New([]config.Limit{next[1]}, Options{Previous: l2, Now: clk.now, Metrics: m})
	if _, refused, _ := admit(l3, r); refused {
		t.Error("changed limit kept the counters of its old rate")
	}
	if _, refused, _ := admit(l3, r); refused {
		t.Error("2/h refused the second call")
	}
	if _, refused, _ := admit(l3, r); !refused {
		t.Error("2/h admitted a third call")
	}
	// kept and gone are no longer configured: their series are gone.
	if n := testutil.CollectAndCount(m.limited, "mcp_gateway_rate_limited_total"); n != 1 {
		t.Errorf("%d rate_limited series, want 1 (changed)", n)
	}
}
