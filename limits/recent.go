package limits

import (
	"hash/maphash"
	"sync"
	"time"
)

// Counts are the calls of one principal, session or server in the last minute and hour. They
// are what policies see as `rate.<scope>`.
type Counts struct {
	// Calls1m and Calls1h count every call; Physical1m and Physical1h only calls to tools of
	// physical servers.
	Calls1m, Calls1h, Physical1m, Physical1h int64
}

// Rate is what Recent knows of a call before it is noted: the counts of its principal, its
// session and its server. A scope whose name is empty (a call without a session) counts zero.
type Rate struct {
	Principal, Session, Server Counts
}

// Recent counts calls per principal, per session and per server over sliding windows of the
// last minute and the last hour, so policies can see how fast a caller goes (`rate` in CEL).
// It is safe for concurrent use.
//
// Precision: the minute is 60 one-second buckets and the hour 60 one-minute buckets, so a call
// leaves the minute count between 59 and 60 seconds after it was noted (when the second it fell
// in is 60 seconds old) and the hour count between 59 and 60 minutes after. Counts are exact
// within those bounds.
//
// Memory: each name seen in the last hour holds one window of about 1 KB; a name without a call
// for an hour expires (its counts are all zero by then), swept at most once a minute per recentShard
// when calls are noted. Counts never creates a window. Counters live in memory: they survive a
// config reload (the gateway keeps one Recent) but not a restart.
type Recent struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [numShards]recentShard
}

const (
	numShards = 32
	// idleAfter is how long a window lives without a call: by then it counts nothing.
	idleAfter = int64(time.Hour / time.Second)
	// sweepEvery is how often (in seconds) a recentShard looks for idle windows.
	sweepEvery = 60
)

type scope uint8

const (
	scopePrincipal scope = iota
	scopeSession
	scopeServer
)

type key struct {
	scope scope
	name  string
}

type recentShard struct {
	mu        sync.Mutex
	windows   map[key]*window
	lastSweep int64 // unix second of the last sweep
}

// slot is the calls of one second (minute ring) or one minute (hour ring).
type slot struct {
	calls, physical uint32
}

// window is the rings of one name. last is the unix second of the newest note; every slot
// older than a ring's span from it has been cleared, and the sums are the rings' totals.
type window struct {
	last   int64 // unix second of the newest note
	sec    [60]slot
	min    [60]slot
	sumSec slot
	sumMin slot
}

// NewRecent returns an empty Recent reading the time from now (time.Now when nil).
func NewRecent(now func() time.Time) *Recent {
	if now == nil {
		now = time.Now
	}
	r := &Recent{now: now, seed: maphash.MakeSeed()}
	for i := range r.shards {
		r.shards[i].windows = make(map[key]*window)
	}
	return r
}

// Counts returns the calls noted for principal, session and server in the last minute and
// hour, not counting the call about to be noted.
func (r *Recent) Counts(principal, session, server string) Rate {
	t := r.now().Unix()
	return Rate{
		Principal: r.counts(scopePrincipal, principal, t),
		Session:   r.counts(scopeSession, session, t),
		Server:    r.counts(scopeServer, server, t),
	}
}

// Note counts one call of principal, in session, to server; physical is set for a tool of a
// physical server. Empty names are not counted.
func (r *Recent) Note(principal, session, server string, physical bool) {
	t := r.now().Unix()
	r.note(scopePrincipal, principal, t, physical)
	r.note(scopeSession, session, t, physical)
	r.note(scopeServer, server, t, physical)
}

// Len is the number of windows held, idle ones not yet swept included.
func (r *Recent) Len() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.windows)
		s.mu.Unlock()
	}
	return n
}

func (r *Recent) recentShard(name string) *recentShard {
	return &r.shards[maphash.String(r.seed, name)%numShards]
}

func (r *Recent) counts(sc scope, name string, t int64) Counts {
	if name == "" {
		return Counts{}
	}
	s := r.recentShard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.windows[key{sc, name}]
	if w == nil {
		return Counts{}
	}
	// Read as if advanced to t, without clearing: the buckets that have aged out since the last
	// note are subtracted.
	c := Counts{Calls1m: int64(w.sumSec.calls), Physical1m: int64(w.sumSec.physical),
		Calls1h: int64(w.sumMin.calls), Physical1h: int64(w.sumMin.physical)}
	if d := t - w.last; d > 0 {
		if d >= 60 {
			c.Calls1m, c.Physical1m = 0, 0
		} else {
			for s := w.last + 1; s <= t; s++ {
				b := w.sec[mod60(s)]
				c.Calls1m -= int64(b.calls)
				c.Physical1m -= int64(b.physical)
			}
		}
		lm, tm := floorDiv(w.last, 60), floorDiv(t, 60)
		if tm-lm >= 60 {
			c.Calls1h, c.Physical1h = 0, 0
		} else {
			for m := lm + 1; m <= tm; m++ {
				b := w.min[mod60(m)]
				c.Calls1h -= int64(b.calls)
				c.Physical1h -= int64(b.physical)
			}
		}
	}
	return c
}

func (r *Recent) note(sc scope, name string, t int64, physical bool) {
	if name == "" {
		return
	}
	s := r.recentShard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{sc, name}
	w := s.windows[k]
	if w == nil {
		w = &window{last: t}
		s.windows[k] = w
	}
	w.advance(t)
	if t < w.last {
		t = w.last
	}
	p := uint32(0)
	if physical {
		p = 1
	}
	bs, bm := &w.sec[mod60(t)], &w.min[mod60(floorDiv(t, 60))]
	bs.calls++
	bs.physical += p
	bm.calls++
	bm.physical += p
	w.sumSec.calls++
	w.sumSec.physical += p
	w.sumMin.calls++
	w.sumMin.physical += p
	if t-s.lastSweep >= sweepEvery {
		s.lastSweep = t
		for k, w := range s.windows {
			if t-w.last >= idleAfter {
				delete(s.windows, k)
			}
		}
	}
}

// advance moves the window to second t, clearing the buckets that age out. A t before the last
// note (the clock stepped back) counts into the newest buckets instead.
func (w *window) advance(t int64) {
	if t <= w.last {
		return
	}
	if t-w.last >= 60 {
		w.sec, w.sumSec = [60]slot{}, slot{}
	} else {
		for s := w.last + 1; s <= t; s++ {
			w.sumSec.sub(w.sec[mod60(s)])
			w.sec[mod60(s)] = slot{}
		}
	}
	lm, tm := floorDiv(w.last, 60), floorDiv(t, 60)
	if tm-lm >= 60 {
		w.min, w.sumMin = [60]slot{}, slot{}
	} else {
		for m := lm + 1; m <= tm; m++ {
			w.sumMin.sub(w.min[mod60(m)])
			w.min[mod60(m)] = slot{}
		}
	}
	w.last = t
}

func (b *slot) sub(o slot) {
	b.calls -= o.calls
	b.physical -= o.physical
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

func mod60(a int64) int64 {
	m := a % 60
	if m < 0 {
		m += 60
	}
	return m
}
