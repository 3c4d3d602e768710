package guards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// CheckJSON runs the guards that apply to server and tool on every non-empty string leaf of
// doc (keys are never scanned). It returns the result and the document to pass on: doc itself
// when nothing was redacted, otherwise a copy in which only the redacted strings are
// re-encoded. When the result blocks, doc comes back unchanged. A document that is not JSON
// counts as an error of every guard that applies, so fail_mode decides.
func (s *Set) CheckJSON(ctx context.Context, server, tool string, doc json.RawMessage) (Result, json.RawMessage) {
	if s.Empty() {
		return Result{}, doc
	}
	r := getRun(len(s.entries))
	defer putRun(r)
	if !s.selectEntries(ctx, r, server, tool) {
		return Result{}, doc
	}
	if err := r.w.walk(string(doc)); err != nil {
		for i := range r.out {
			if r.out[i].active {
				r.out[i].ran, r.out[i].err = true, err
			}
		}
		return s.result(r), doc
	}
	if len(r.w.leaves) == 0 {
		return Result{}, doc
	}
	s.scan(ctx, r)
	res := s.result(r)
	changes := s.scanLast(ctx, r, &res, s.redact(ctx, r, &res))
	if len(changes) == 0 {
		return res, doc
	}
	out := make([]byte, 0, len(doc)+64)
	pos := 0
	for _, c := range changes {
		lf := r.w.leaves[c.leaf]
		out = append(out, doc[pos:lf.start]...)
		out = wirejson.AppendString(out, c.text, false)
		pos = lf.end
	}
	return res, append(out, doc[pos:]...)
}

// CheckText runs the guards that apply to server and tool on text as one leaf (path "") and
// returns the result and the text to pass on: text itself unless something was redacted.
// Empty text is not scanned.
func (s *Set) CheckText(ctx context.Context, server, tool, text string) (Result, string) {
	if s.Empty() || text == "" {
		return Result{}, text
	}
	r := getRun(len(s.entries))
	defer putRun(r)
	if !s.selectEntries(ctx, r, server, tool) {
		return Result{}, text
	}
	r.w.single(text)
	s.scan(ctx, r)
	res := s.result(r)
	if changes := s.scanLast(ctx, r, &res, s.redact(ctx, r, &res)); len(changes) > 0 {
		return res, changes[0].text
	}
	return res, text
}

// Text is one string for CheckTexts and the path a finding in it names. The path is the
// caller's: it should say where the string sits without quoting anything a guard could flag.
type Text struct {
	Path string
	Text string
}

// CheckTexts runs the guards that apply to server and tool on each text as one leaf, as
// CheckJSON does on the leaves of a document: findings name each text's Path. It returns the
// result and the texts to pass on, index for index: texts' own strings unless something was
// redacted (never when the result blocks). Empty texts are not scanned.
func (s *Set) CheckTexts(ctx context.Context, server, tool string, texts []Text) (Result, []string) {
	out := make([]string, len(texts))
	for i, t := range texts {
		out[i] = t.Text
	}
	if s.Empty() || len(texts) == 0 {
		return Result{}, out
	}
	r := getRun(len(s.entries))
	defer putRun(r)
	if !s.selectEntries(ctx, r, server, tool) {
		return Result{}, out
	}
	r.w.texts(texts)
	if len(r.w.leaves) == 0 {
		return Result{}, out
	}
	s.scan(ctx, r)
	res := s.result(r)
	for _, c := range s.scanLast(ctx, r, &res, s.redact(ctx, r, &res)) {
		out[r.w.leaves[c.leaf].start] = c.text
	}
	return res, out
}

// selectEntries marks the entries whose where admits the call (asking each When once) and
// reports whether there is any.
func (s *Set) selectEntries(ctx context.Context, r *run, server, tool string) bool {
	some := false
	for i, e := range s.entries {
		if !s.withWhere || e.applies(ctx, server, tool) {
			r.out[i].active, some = true, true
		}
	}
	return some
}

// run is the scratch state of one check, pooled so that a check that finds nothing allocates
// (almost) nothing.
type run struct {
	w   walker
	out []outcome
}

// outcome is what one guard did on one document.
type outcome struct {
	active bool // the guard applies to this call
	ran    bool
	hits   []hit
	err    error
}

type hit struct {
	leaf int
	span Span
}

var runs = sync.Pool{New: func() any { return new(run) }}

func getRun(n int) *run {
	r := runs.Get().(*run)
	if cap(r.out) < n {
		r.out = make([]outcome, n)
	}
	r.out = r.out[:n]
	for i := range r.out {
		r.out[i] = outcome{hits: r.out[i].hits[:0]}
	}
	return r
}

// putRun returns r to the pool, dropping what would pin a large document in memory.
func putRun(r *run) {
	r.w.reset()
	// A 1 MB result has some 30,000 leaves: keeping room for them saves megabytes of
	// allocation per check. Many hits are rare, so their room is not kept.
	const keepLeaves, keepHits = 1 << 16, 1 << 10
	if cap(r.w.leaves) > keepLeaves {
		r.w.leaves = nil
	}
	if cap(r.w.segs) > keepLeaves {
		r.w.segs = nil
	}
	for i := range r.out {
		if cap(r.out[i].hits) > keepHits {
			r.out[i].hits = nil
		}
		r.out[i].err = nil
	}
	runs.Put(r)
}

// parallelMinBytes is the text below which parallel guards run one after the other anyway: a
// goroutine costs more than scanning a small document.
const parallelMinBytes = 32 << 10

// scan runs every applicable guard over the leaves, but those that run last (scanLast). Guards
// marked parallel run in goroutines (at most maxParallel per Set at a time; when none is free
// the guard runs inline), each writing only its own outcome, so the result does not depend on
// scheduling.
func (s *Set) scan(ctx context.Context, r *run) {
	concurrent := s.parallel > 1 && r.w.textBytes >= parallelMinBytes
	var wg *sync.WaitGroup // allocated only when a goroutine is started
	for i, e := range s.entries {
		if !r.out[i].active || e.last {
			continue
		}
		if concurrent && e.parallel {
			select {
			case s.sem <- struct{}{}:
				if wg == nil {
					wg = new(sync.WaitGroup)
				}
				i, e := i, e // only the goroutine's own copies escape to the heap
				wg.Go(func() {
					defer func() { <-s.sem }()
					r.scanEntry(ctx, i, e)
				})
				continue
			default:
			}
		}
		r.scanEntry(ctx, i, e)
	}
	if wg != nil {
		wg.Wait()
	}
}

// scanLast runs the entries that run last (llm.judge) once the others are scanned and their
// redactions worked out: on each text as those redactions leave it, so that a judge sees what
// would be passed on and never what a redacting guard took out; and not at all once the result
// blocks, since nothing is stronger than block and blocked content goes to no model. Their
// outcomes are merged into res, their findings after the others'. It returns the redactions to
// pass on: changes, or none when the result now blocks.
func (s *Set) scanLast(ctx context.Context, r *run, res *Result, changes []change) []change {
	if !s.last || res.Blocked {
		return changes
	}
	leaves := r.w.leaves
	if len(changes) > 0 {
		leaves = slices.Clone(leaves)
		for _, c := range changes {
			leaves[c.leaf].text = c.text
		}
	}
	for i, e := range s.entries {
		if !e.last || !r.out[i].active {
			continue
		}
		o := &r.out[i]
		o.hits, o.err = scanLeaves(ctx, e, leaves, o.hits)
		o.ran = true
		s.merge(res, r, i)
		if res.Action == ActionBlock {
			break
		}
	}
	sort.Strings(res.Labels)
	if res.Blocked = res.Action == ActionBlock; res.Blocked {
		return nil
	}
	return changes
}

// scanEntry runs entry i over the leaves and records its outcome.
func (r *run) scanEntry(ctx context.Context, i int, e *entry) {
	o := &r.out[i]
	o.hits, o.err = scanLeaves(ctx, e, r.w.leaves, o.hits)
	o.ran = true
}

// errPanicked replaces a guard's panic; the panic value could quote the content.
var errPanicked = errors.New("the guard panicked")

// scanLeaves runs one guard over every leaf within the entry's timeout, appending to hits. On
// an error the hits are dropped: the error decides.
func scanLeaves(ctx context.Context, e *entry, leaves []leaf, hits []hit) (_ []hit, err error) {
	ctx, cancel := e.bound(ctx)
	defer cancel()
	defer func() {
		if recover() != nil {
			err = errPanicked
		}
	}()
	for li := range leaves {
		if ctx.Err() != nil {
			return hits[:0], contextError(ctx, e.timeout)
		}
		text := leaves[li].text
		spans, err := e.guard.Scan(ctx, text)
		if err != nil {
			return hits[:0], scanError(ctx, err, e.timeout)
		}
		for _, sp := range spans {
			if 0 <= sp.Start && sp.Start < sp.End && sp.End <= len(text) {
				hits = append(hits, hit{leaf: li, span: sp})
			}
		}
	}
	return hits, nil
}

// scanOne runs one guard on one text, as scanLeaves does, for the rescans of redaction.
func scanOne(ctx context.Context, e *entry, text string) (spans []Span, err error) {
	ctx, cancel := e.bound(ctx)
	defer cancel()
	defer func() {
		if recover() != nil {
			spans, err = nil, errPanicked
		}
	}()
	if spans, err = e.guard.Scan(ctx, text); err != nil {
		err = scanError(ctx, err, e.timeout)
	}
	return spans, err
}

// bound is ctx within the entry's timeout, if it has one. A guard that only polls its context
// (pollingGuard) gets a deadline read off the clock, with no timer or goroutine of its own for
// each entry of each call; any other gets a context.WithTimeout, whose Done a guard may wait on.
func (e *entry) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	switch {
	case e.timeout <= 0:
		return ctx, func() {}
	case e.polls:
		return clockDeadline{ctx, time.Now().Add(e.timeout)}, func() {}
	default:
		return context.WithTimeout(ctx, e.timeout)
	}
}

// pollingGuard is implemented by the guards whose Scan looks at its context only through
// ctx.Err(), between steps of its work, and never waits on ctx.Done().
type pollingGuard interface{ pollsContext() }

// clockDeadline is its context with a deadline that Err reads off the clock. Its Done is its
// parent's: it is for pollingGuard guards only.
type clockDeadline struct {
	context.Context
	at time.Time
}

func (c clockDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}

func (c clockDeadline) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.at) {
		return context.DeadlineExceeded
	}
	return nil
}

func scanError(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return contextError(ctx, timeout)
	}
	return err
}

func contextError(ctx context.Context, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && timeout > 0 {
		return timedOut(timeout)
	}
	return fmt.Errorf("stopped: %v", ctx.Err())
}

func timedOut(timeout time.Duration) error { return fmt.Errorf("timed out after %v", timeout) }
