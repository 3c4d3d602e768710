package guards

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Redact returns text with every span replaced by replacement(span) (a nil replacement deletes
// the spans). Spans may come in any order and may overlap: overlapping spans are merged and the
// merged stretch takes the replacement of its first span. Offsets outside text are clamped, and
// every span is widened to whole UTF-8 sequences, so the result never holds a split character.
// Text comes back as it is when there is nothing to replace.
func Redact(text string, spans []Span, replacement func(Span) string) string {
	if len(spans) == 0 {
		return text
	}
	ss := make([]Span, 0, len(spans))
	for _, s := range spans {
		s.Start, s.End = clamp(s.Start, len(text)), clamp(s.End, len(text))
		if s.Start >= s.End {
			continue
		}
		s.Start, s.End = runeFloor(text, s.Start), runeCeil(text, s.End)
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return text
	}
	slices.SortStableFunc(ss, func(a, b Span) int { return cmp.Compare(a.Start, b.Start) })
	var b strings.Builder
	b.Grow(len(text))
	pos := 0
	for i := 0; i < len(ss); {
		first, end := ss[i], ss[i].End
		for i++; i < len(ss) && ss[i].Start < end; i++ {
			end = max(end, ss[i].End)
		}
		b.WriteString(text[pos:first.Start])
		if replacement != nil {
			b.WriteString(replacement(first))
		}
		pos = end
	}
	b.WriteString(text[pos:])
	return b.String()
}

func clamp(i, n int) int { return min(max(i, 0), n) }

// runeFloor moves i back to the start of the UTF-8 sequence it falls in. A valid sequence has
// at most three continuation bytes, so the walk stops after three: four in a row belong to no
// sequence, and cutting among them splits nothing.
func runeFloor(s string, i int) int {
	for k := 0; k < utf8.UTFMax-1 && i > 0 && i < len(s) && !utf8.RuneStart(s[i]); k++ {
		i--
	}
	return i
}

// runeCeil moves i forward to the end of the UTF-8 sequence it falls in.
func runeCeil(s string, i int) int {
	for k := 0; k < utf8.UTFMax-1 && i < len(s) && !utf8.RuneStart(s[i]); k++ {
		i++
	}
	return i
}

// fixed is a replacement function that always returns s.
func fixed(s string) func(Span) string { return func(Span) string { return s } }

// claim merges the spans of a lower-priority detector into claimed. Both are sorted by Start
// and free of overlaps; a new span that overlaps one already claimed is dropped, so each byte
// belongs to the first detector that found it. The result is a new slice unless spans is empty.
func claim(claimed, spans []Span) []Span {
	if len(spans) == 0 {
		return claimed
	}
	if len(claimed) == 0 {
		return slices.Clone(spans)
	}
	out := make([]Span, 0, len(claimed)+len(spans))
	i := 0
	for _, s := range spans {
		for i < len(claimed) && claimed[i].End <= s.Start {
			out = append(out, claimed[i])
			i++
		}
		if i < len(claimed) && claimed[i].Start < s.End {
			continue // overlaps a span claimed first
		}
		if len(out) > 0 && out[len(out)-1].End > s.Start {
			continue // overlaps the claimed span just passed
		}
		out = append(out, s)
	}
	return append(out, claimed[i:]...)
}

// change is the new text of one leaf.
type change struct {
	leaf int
	text string
}

// redact applies the enforced redactions unless the result blocks, leaf by leaf in document
// order. Guards redact one after the other in guard order; a guard whose leaf an earlier guard
// already changed scans the changed text again, so its spans fit what it redacts. A rescan that
// fails follows fail_mode: closed blocks, open skips that guard's redaction. The changes come
// back sorted by leaf.
func (s *Set) redact(ctx context.Context, r *run, res *Result) []change {
	if res.Action == ActionBlock {
		return nil
	}
	var redactors []int
	var leaves []int
	for i, e := range s.entries {
		if o := &r.out[i]; o.ran && o.err == nil && !e.logOnly && e.action == ActionRedact && len(o.hits) > 0 {
			redactors = append(redactors, i)
			for _, h := range o.hits {
				leaves = append(leaves, h.leaf)
			}
		}
	}
	if len(redactors) == 0 {
		return nil
	}
	slices.Sort(leaves)
	leaves = slices.Compact(leaves)
	changes := make([]change, 0, len(leaves))
	for _, li := range leaves {
		orig := r.w.leaves[li].text
		text := orig
		for _, i := range redactors {
			e, hits := s.entries[i], r.out[i].hits
			lo, _ := slices.BinarySearchFunc(hits, li, func(h hit, leaf int) int { return h.leaf - leaf })
			hi := lo
			for hi < len(hits) && hits[hi].leaf == li {
				hi++
			}
			if lo == hi {
				continue
			}
			var spans []Span
			if text == orig {
				spans = make([]Span, 0, hi-lo)
				for _, h := range hits[lo:hi] {
					spans = append(spans, h.span)
				}
			} else {
				var err error
				if spans, err = scanOne(ctx, e, text); err != nil {
					res.Errors = append(res.Errors, GuardError{Guard: e.id, Err: err.Error(), FailMode: e.failMode()})
					if e.failOpen {
						continue
					}
					res.Action, res.Blocked = ActionBlock, true
					res.Reason = fmt.Sprintf("guard %q (%s) failed (%v) while redacting and fails closed; %s", e.id, e.use, err, consequence(ActionBlock))
					return nil
				}
			}
			text = e.redact(text, spans)
		}
		if text != orig {
			changes = append(changes, change{leaf: li, text: text})
		}
	}
	return changes
}
