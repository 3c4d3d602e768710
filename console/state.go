package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/internal/printable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// The words of the header: whether physical action is possible.
const (
	WordReady    = "READY"    // every upstream is up, nothing is locked
	WordLocked   = "LOCKED"   // a lockout is in force: no physical call runs until an unlock
	WordHalted   = "HALTED"   // an operator pressed HALT: only an unlock ends it
	WordDegraded = "DEGRADED" // nothing is locked, but an upstream or the state file is not serving
)

// Bounds of what one page shows, so that it stays fast with a long audit log and many pending
// items: the rest is counted, and the audit page pages through it.
const (
	maxApprovalsShown = 100
	maxPinsShown      = 100
	recentShown       = 10
	findingsShown     = 50
	findingsWindow    = time.Hour
	maxArgsShown      = 4 << 10
)

// Header is the one word and why.
type Header struct {
	Word   string
	Reason string
	// Since is when the word became true: the lockout's time, or when the console first saw it.
	Since time.Time
}

// View is what the live part of a page shows.
type View struct {
	Header   Header
	Status   gateway.Status
	Waiting  []string
	Lockouts []LockoutView
	// Approvals are the oldest pending requests, at most maxApprovalsShown; ApprovalsMore
	// counts the others.
	Approvals     []ApprovalView
	ApprovalsMore int
	ApprovalsErr  string
	Pins          []PinView
	PinsMore      int
	PinsErr       string
	Findings      []store.Record
	Recent        []store.Record
}

// LockoutView is a lockout and what an unlock must know first.
type LockoutView struct {
	store.Lockout
	Cause string
}

// ApprovalView is a pending request, its arguments as the audit log keeps them (redacted).
type ApprovalView struct {
	store.Approval
	ArgsText string
}

// PinView is a tool definition waiting for acceptance, or withheld by the guards.
type PinView struct {
	gateway.PinStatus
	Diff []DiffLine
}

// stateCache computes the view at most once per refresh interval for every page and stream,
// and follows the audit log from where it last read instead of scanning it again.
type stateCache struct {
	c  *Console
	mu sync.Mutex

	at   time.Time
	view View

	lastWord  string
	wordSince time.Time

	primed   bool
	lastSeq  uint64
	recent   []store.Record
	findings []store.Record
}

// refreshEvery is how stale a computed view may be when another request asks.
const refreshEvery = 200 * time.Millisecond

func (s *stateCache) get() View {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.c.now()
	if !s.at.IsZero() && now.Sub(s.at) < refreshEvery {
		return s.view
	}
	s.view = s.compute(now)
	s.at = now
	return s.view
}

func (s *stateCache) compute(now time.Time) View {
	g := s.c.g
	st := g.Status()
	ready, waiting := g.Ready()
	v := View{Status: st, Waiting: waiting}
	for _, l := range st.Lockouts {
		v.Lockouts = append(v.Lockouts, LockoutView{Lockout: l.Lockout, Cause: lockoutCause(l.Lockout)})
	}
	v.Header = s.header(st, ready, waiting, now)
	if store := g.Store(); store != nil {
		s.approvals(&v, store)
		s.pins(&v)
		s.followAudit(store, now)
		v.Recent = slices.Clone(s.recent)
		v.Findings = slices.Clone(s.findings)
		slices.Reverse(v.Recent)
		slices.Reverse(v.Findings)
	}
	return v
}

// header picks the word: HALTED over LOCKED over DEGRADED over READY.
func (s *stateCache) header(st gateway.Status, ready bool, waiting []string, now time.Time) Header {
	var h Header
	// The earliest halt, else the earliest lockout: what the person must deal with first.
	var first *store.Lockout
	for i := range st.Lockouts {
		l := &st.Lockouts[i].Lockout
		switch {
		case first == nil, l.Halted() && !first.Halted(), l.Halted() == first.Halted() && l.At.Before(first.At):
			first = l
		}
	}
	switch {
	case first != nil && first.Halted():
		h = Header{Word: WordHalted, Since: first.At, Reason: fmt.Sprintf("halted by %s: %s", orUnknown(first.By), first.Reason)}
	case first != nil:
		h = Header{Word: WordLocked, Since: first.At, Reason: lockoutCause(*first)}
		if n := len(st.Lockouts); n > 1 {
			h.Reason += fmt.Sprintf(" (and %d more lockouts)", n-1)
		}
	case !ready:
		h = Header{Word: WordDegraded, Reason: strings.Join(waiting, "; ")}
	default:
		h = Header{Word: WordReady, Reason: "no lockout; every upstream is up: physical calls may run"}
	}
	if h.Word != s.lastWord {
		s.lastWord, s.wordSince = h.Word, now
	}
	if h.Since.IsZero() {
		h.Since = s.wordSince
	}
	return h
}

// lockoutCause says what put a lockout in force, naming the call when a call did.
func lockoutCause(l store.Lockout) string {
	switch l.Kind {
	case store.LockoutHalt:
		return fmt.Sprintf("%s halted by %s: %s", l.Server, orUnknown(l.By), l.Reason)
	case store.LockoutOperator:
		return fmt.Sprintf("%s locked by %s: %s", l.Server, orUnknown(l.By), l.Reason)
	}
	call := ""
	if l.Tool != "" {
		call = fmt.Sprintf(" after %s (call %s, by %s)", l.Tool, l.CallID, orUnknown(l.Principal))
	}
	return fmt.Sprintf("%s locked out%s: %s", l.Server, call, l.Reason)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func (s *stateCache) approvals(v *View, st *store.Store) {
	list, err := st.ListApprovals(store.ApprovalPending)
	if err != nil {
		v.ApprovalsErr = err.Error()
		return
	}
	slices.SortFunc(list, func(a, b store.Approval) int { return a.Created.Compare(b.Created) })
	if len(list) > maxApprovalsShown {
		v.ApprovalsMore = len(list) - maxApprovalsShown
		list = list[:maxApprovalsShown]
	}
	for _, a := range list {
		v.Approvals = append(v.Approvals, ApprovalView{Approval: a, ArgsText: prettyJSON(a.Args, maxArgsShown)})
	}
}

func (s *stateCache) pins(v *View) {
	list, err := s.c.g.Pins()
	if err != nil {
		v.PinsErr = err.Error()
		return
	}
	for _, p := range list {
		if p.Pending == "" && len(p.Withheld) == 0 {
			continue
		}
		if len(v.Pins) == maxPinsShown {
			v.PinsMore++
			continue
		}
		pv := PinView{PinStatus: p}
		if p.Pending != "" {
			pv.Diff = Diff(prettyJSON(p.Definition, 0), prettyJSON(p.PendingDefinition, 0))
		}
		v.Pins = append(v.Pins, pv)
	}
}

// followAudit reads the records appended since the last look: the last few for the page, and
// the guard findings and policy denials of the last hour.
func (s *stateCache) followAudit(st *store.Store, now time.Time) {
	f := store.AuditFilter{AfterSeq: s.lastSeq}
	if !s.primed {
		f.Since = now.Add(-findingsWindow)
		if err := st.AuditScan(store.AuditFilter{Limit: recentShown}, func(r store.Record) bool {
			s.recent = append(s.recent, r)
			return true
		}); err != nil {
			s.c.log.Error("console: reading the audit log", "error", err)
			return
		}
		if n := len(s.recent); n > 0 {
			s.lastSeq = s.recent[n-1].Seq
		}
		s.primed = true
	}
	err := st.AuditScan(f, func(r store.Record) bool {
		if r.Seq > s.lastSeq {
			s.recent = append(s.recent, r)
			s.lastSeq = r.Seq
		}
		if isFinding(r) {
			s.findings = append(s.findings, r)
		}
		return true
	})
	if err != nil {
		s.c.log.Error("console: reading the audit log", "error", err)
	}
	if n := len(s.recent); n > recentShown {
		s.recent = slices.Delete(s.recent, 0, n-recentShown)
	}
	cut := now.Add(-findingsWindow)
	s.findings = slices.DeleteFunc(s.findings, func(r store.Record) bool { return r.Time.Before(cut) })
	slices.SortFunc(s.findings, func(a, b store.Record) int { return int(a.Seq) - int(b.Seq) })
	s.findings = slices.CompactFunc(s.findings, func(a, b store.Record) bool { return a.Seq == b.Seq })
	if n := len(s.findings); n > findingsShown {
		s.findings = slices.Delete(s.findings, 0, n-findingsShown)
	}
}

// isFinding: a call a guard blocked or a policy denied, or one on which a guard found
// something (redacted, escalated or in log_only mode).
func isFinding(r store.Record) bool {
	if r.Kind == string(governor.KindGuardBlocked) || r.Kind == string(governor.KindPolicyDenied) {
		return true
	}
	f, ok := r.Detail["findings"].([]any)
	return ok && len(f) > 0
}

// prettyJSON indents raw for reading, cut at limit bytes (0: no limit).
func prettyJSON(raw json.RawMessage, limit int) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	// Decoded and encoded again without Go's HTML escaping, so that a "<" an upstream sent reads
	// as "<" (the page escapes it), not as \u003c.
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if d.Decode(&v) != nil || enc.Encode(v) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := printable.InvisibleEscaped(strings.TrimSuffix(b.String(), "\n"))
	if limit > 0 && len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "\n… (cut: the whole arguments are in the audit record)"
	}
	return s
}
