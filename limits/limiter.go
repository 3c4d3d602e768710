// Package limits enforces the `limits:` of the config: token-bucket rate limits and caps on the
// calls in flight, per principal, session, server, public tool or for everyone together, held by
// a chain step right after the lockout check (governor.Limit) so that a refused call costs
// almost nothing and never reaches validation, policies or the upstream.
//
// Each limit keeps one bucket per key (the value of its `per`) in a map split into shards, each
// under its own mutex. A call on an existing key allocates nothing. A bucket is refilled when it
// is used, never by a timer. A key whose bucket is full again and that holds no call in flight
// is idle: dropping it changes nothing, since a new bucket starts full. Idle keys are dropped by
// a sweep of their shard, run when the shard has grown to twice its size after the last sweep
// (at least minSweep keys), so sweeping costs O(1) per new key and a shard holds at most twice
// the keys active within one refill period, plus minSweep.
//
// Memory: a key costs one map slot holding its key string (a 16-byte header; the name's bytes
// are shared with the caller's string) and a 24-byte bucket, plus the map's spare capacity, and
// the name itself: TestMillionKeysMemory measures about 125 bytes a key with 17-byte names, and
// the documented bound is bytesPerKeyBound, 200 bytes a key with a name of up to 24 bytes. One
// million distinct keys active at once stay under 200 MB; idle ones go (see above).
//
// Counters live in memory only: they survive a reload (a limit whose id, per, rate, burst and
// concurrent are unchanged keeps its buckets) but not a restart.
package limits

import (
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

const (
	// nShards is the number of shards of a limit counted per key.
	nShards = 16
	// minSweep is the size a shard may reach before its first sweep.
	minSweep = 1024
	// bytesPerKeyBound is the documented bound of the memory a key costs, its name (up to 24
	// bytes) included.
	bytesPerKeyBound = 200
	// epsilon absorbs the rounding of the refill: 5/m earns a whole token in 12 s.
	epsilon = 1e-9
)

// Options are a limiter's collaborators.
type Options struct {
	// Previous is the limiter being replaced by a reload: limits whose id, per, rate, burst and
	// concurrent are unchanged keep its buckets and the calls they hold in flight.
	Previous *Limiter
	// Metrics counts refusals and slots in flight; nil counts nothing.
	Metrics *Metrics
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Limiter holds every limit of one config. It is safe for concurrent use.
type Limiter struct {
	limits  []*limit
	epoch   time.Time
	now     func() time.Time
	metrics *Metrics
}

// limit is one configured limit over its state.
type limit struct {
	id, per string
	count   int
	window  time.Duration
	logOnly bool
	match   matcher
	st      *state
	met     limitMetrics
}

// state is what a limit counts; a reload that keeps the limit keeps it.
type state struct {
	perNano    float64 // tokens per nanosecond; 0 without a rate
	burst      float64
	concurrent int32 // 0: no cap
	seed       maphash.Seed
	shards     [nShards]shard
}

type shard struct {
	mu        sync.Mutex
	m         map[string]bucket
	nextSweep int
	_         [24]byte // keep shards on separate cache lines
}

// sameState reports whether a limit counted the same way before a reload.
func sameState(a *limit, c *config.Limit) bool {
	return a.per == c.Per && a.count == c.Count && a.window == c.Window &&
		a.st.burst == float64(c.Burst) && a.st.concurrent == int32(c.Concurrent)
}

// New is the limiter of the configured limits (already checked by config). With
// opts.Previous, unchanged limits keep their counters.
func New(cfg []config.Limit, opts Options) *Limiter {
	l := &Limiter{epoch: time.Now(), now: opts.Now, metrics: opts.Metrics}
	if l.now == nil {
		l.now = time.Now
	}
	old := map[string]*limit{}
	if p := opts.Previous; p != nil {
		l.epoch = p.epoch
		for _, lim := range p.limits {
			old[lim.id] = lim
		}
	}
	for i := range cfg {
		c := &cfg[i]
		mode := c.Mode
		if mode == "" {
			mode = config.LimitEnforce
		}
		lim := &limit{
			id: c.ID, per: c.Per, count: c.Count, window: c.Window, logOnly: mode == config.LimitLogOnly,
			match: matcher{principals: c.Match.Principals, roles: c.Match.Roles, servers: c.Match.Servers,
				tools: c.Match.Tools, physicalOnly: c.PhysicalOnly},
			met: opts.Metrics.forLimit(c.ID, mode),
		}
		if prev, ok := old[c.ID]; ok && sameState(prev, c) {
			lim.st = prev.st
		} else {
			lim.st = newState(c)
		}
		delete(old, c.ID)
		l.limits = append(l.limits, lim)
	}
	for id := range old {
		opts.Metrics.forget(id)
	}
	return l
}

func newState(c *config.Limit) *state {
	st := &state{burst: float64(c.Burst), concurrent: int32(c.Concurrent), seed: maphash.MakeSeed()}
	if c.Count > 0 && c.Window > 0 {
		st.perNano = float64(c.Count) / float64(c.Window)
		if st.burst < 1 {
			st.burst = float64(c.Count)
		}
	}
	for i := range st.shards {
		st.shards[i].m = map[string]bucket{}
		st.shards[i].nextSweep = minSweep
	}
	return st
}

// Empty reports whether there is no limit: the chain step is then left out.
func (l *Limiter) Empty() bool { return l == nil || len(l.limits) == 0 }

func (st *state) shard(key string) *shard {
	if key == "" {
		return &st.shards[0]
	}
	return &st.shards[maphash.String(st.seed, key)%nShards]
}

// Refusal says which limit refused a call and when to retry.
type Refusal struct {
	// Limit is the limit's id.
	Limit string
	// Window is "1s", "1m" or "1h", or "concurrent" for a cap on calls in flight.
	Window string
	// RetryAfterSec is the whole seconds to wait, at least 1.
	RetryAfterSec int
	// Reason is phrased so that a model waits instead of retrying at once.
	Reason string
}

// held is a token taken or a slot held by one call.
type held struct {
	lim   *limit
	key   string
	token bool
	slot  bool
}

// Held is what a call took of the limits; the caller keeps it (on its stack) from Admit to
// Release.
type Held struct {
	n     int
	fixed [4]held
	more  []held
	// WouldRefuse is the id of the first log_only limit that would have refused the call, "" if
	// none.
	WouldRefuse string
}

func (h *Held) add(e held) {
	if h.n < len(h.fixed) {
		h.fixed[h.n] = e
	} else {
		h.more = append(h.more, e)
	}
	h.n++
}

func (h *Held) at(i int) *held {
	if i < len(h.fixed) {
		return &h.fixed[i]
	}
	return &h.more[i-len(h.fixed)]
}

func (l *Limiter) clock() int64 { return int64(l.now().Sub(l.epoch)) }

// Admit counts a call against every limit it matches. It returns refused with the refusal of
// the first enforcing limit the call exceeds; then nothing is taken of any limit. Otherwise the
// call took a token of each matching rate and a slot of each matching concurrent cap, recorded
// in h, which Release gives back when the call ends. Log_only limits never refuse: they count
// the would-be refusal and name themselves in h.WouldRefuse.
func (l *Limiter) Admit(r *Request, h *Held) (ref Refusal, refused bool) {
	if l.Empty() {
		return Refusal{}, false
	}
	now := l.clock()
	for _, lim := range l.limits {
		if !lim.match.matches(r) {
			continue
		}
		key := keyOf(lim.per, r)
		st := lim.st
		sh := st.shard(key)
		sh.mu.Lock()
		b, found := sh.m[key]
		if !found {
			b = bucket{tokens: st.burst, last: now}
		}
		over, conc := false, false
		var wait float64 // seconds
		if st.concurrent > 0 && b.inFlight >= st.concurrent {
			over, conc = true, true
		} else if st.perNano > 0 {
			b.refill(now, st.perNano, st.burst)
			if b.tokens < 1-epsilon {
				over, wait = true, (1-b.tokens)/st.perNano/1e9
			}
		}
		if over && !lim.logOnly {
			if found {
				sh.m[key] = b
			}
			sh.mu.Unlock()
			l.undo(h)
			if lim.met.limited != nil {
				lim.met.limited.Inc()
			}
			return lim.refusal(conc, wait), true
		}
		if over {
			if lim.met.limited != nil {
				lim.met.limited.Inc()
			}
			if h.WouldRefuse == "" {
				h.WouldRefuse = lim.id
			}
		}
		e := held{lim: lim, key: key}
		if st.perNano > 0 && b.tokens >= 1-epsilon {
			b.tokens = max(b.tokens-1, 0)
			e.token = true
		}
		if st.concurrent > 0 {
			b.inFlight++
			e.slot = true
		}
		sh.m[key] = b
		if !found && len(sh.m) >= sh.nextSweep {
			sh.sweep(now, st)
		}
		sh.mu.Unlock()
		if e.slot && lim.met.inFlight != nil {
			lim.met.inFlight.Inc()
		}
		if e.token || e.slot {
			h.add(e)
		}
	}
	return Refusal{}, false
}

// Release gives back the concurrent slots the call holds. Its tokens stay taken.
func (l *Limiter) Release(h *Held) {
	for i := 0; i < h.n; i++ {
		if e := h.at(i); e.slot {
			e.lim.give(e.key, false, true)
		}
	}
	h.n, h.more = 0, nil
}

// undo gives back everything a refused call took of earlier limits.
func (l *Limiter) undo(h *Held) {
	for i := 0; i < h.n; i++ {
		e := h.at(i)
		e.lim.give(e.key, e.token, e.slot)
	}
	h.n, h.more = 0, nil
}

func (lim *limit) give(key string, token, slot bool) {
	st := lim.st
	sh := st.shard(key)
	sh.mu.Lock()
	if b, ok := sh.m[key]; ok {
		if token {
			b.tokens = min(st.burst, b.tokens+1)
		}
		if slot && b.inFlight > 0 {
			b.inFlight--
		}
		sh.m[key] = b
	}
	sh.mu.Unlock()
	if slot && lim.met.inFlight != nil {
		lim.met.inFlight.Dec()
	}
}

// sweep drops the shard's idle keys. The caller holds sh.mu.
func (sh *shard) sweep(now int64, st *state) {
	for k, b := range sh.m {
		if b.idle(now, st.perNano, st.burst) {
			delete(sh.m, k)
		}
	}
	sh.nextSweep = max(2*len(sh.m), minSweep)
}

// Keys is the number of keys the limit with this id holds, for tests and diagnostics.
func (l *Limiter) Keys(id string) int {
	n := 0
	for _, lim := range l.limits {
		if lim.id == id {
			for i := range lim.st.shards {
				sh := &lim.st.shards[i]
				sh.mu.Lock()
				n += len(sh.m)
				sh.mu.Unlock()
			}
		}
	}
	return n
}

// Sweep drops the idle keys of every limit now, rather than when a shard next grows.
func (l *Limiter) Sweep() {
	now := l.clock()
	for _, lim := range l.limits {
		for i := range lim.st.shards {
			sh := &lim.st.shards[i]
			sh.mu.Lock()
			sh.sweep(now, lim.st)
			sh.mu.Unlock()
		}
	}
}

var windowWords = map[time.Duration]string{time.Second: "second", time.Minute: "minute", time.Hour: "hour"}

// refusal is the refusal of a call this limit does not admit.
func (lim *limit) refusal(concurrent bool, wait float64) Refusal {
	per := "per " + lim.per
	if lim.per == config.PerGlobal || lim.per == "" {
		per = "for all callers together"
	}
	if concurrent {
		return Refusal{Limit: lim.id, Window: "concurrent", RetryAfterSec: 1, Reason: fmt.Sprintf(
			"limit %s allows %d %s in flight at a time %s; this call was not sent. Wait for the call in flight to finish (retry in 1 s or later); retrying at once is refused the same way.",
			lim.id, lim.st.concurrent, plural(int(lim.st.concurrent)), per)}
	}
	sec := retryAfterSec(wait)
	word := windowWords[lim.window]
	if word == "" {
		word = lim.window.String()
	}
	return Refusal{Limit: lim.id, Window: config.WindowName(lim.window), RetryAfterSec: sec, Reason: fmt.Sprintf(
		"limit %s allows %d %s per %s %s; this call was not sent. Wait %d s before calling again; retrying sooner is refused the same way.",
		lim.id, lim.count, plural(lim.count), word, per, sec)}
}

func plural(n int) string {
	if n == 1 {
		return "call"
	}
	return "calls"
}
