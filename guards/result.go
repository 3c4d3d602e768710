package guards

import (
	"fmt"
	"slices"
	"sort"
)

// Finding is one span a guard fired on, as audit records and metrics keep it: where and what
// kind, never the matched text.
type Finding struct {
	Guard    string `json:"guard"`
	Category string `json:"category"`
	Stage    string `json:"stage"`
	// Action is what the guard does when it fires (block, redact, escalate), whether or not it
	// was applied: see Mode.
	Action Action `json:"action"`
	// Mode is enforce, or log_only when the finding changed nothing.
	Mode string `json:"mode"`
	// Path is the JSON pointer of the string leaf ("/content/0/text"); "" for CheckText; for
	// CheckTexts, the path the caller gave the text ("inputSchema.properties.target.description").
	Path string `json:"path"`
	// Start and End are byte offsets in that leaf's decoded text.
	Start int `json:"start"`
	End   int `json:"end"`
}

// GuardError is a guard that failed (an error, a panic, a timeout) and what its fail_mode made
// of it. Err never quotes the content.
type GuardError struct {
	Guard    string `json:"guard"`
	Err      string `json:"error"`
	FailMode string `json:"fail_mode"`
}

// Result is what a Set made of one document.
type Result struct {
	// Action is the strongest enforced action: a finding of an enforced guard, or an enforced
	// guard that failed closed. ActionNone when nothing applies.
	Action Action `json:"action,omitempty"`
	// Blocked is Action == ActionBlock.
	Blocked bool `json:"blocked,omitempty"`
	// Reason explains Action for a guard_blocked envelope, an approval request or a log line:
	// which guard, which category, where. Never the matched text.
	Reason string `json:"reason,omitempty"`
	// Findings are every guard's findings, enforced and log_only, in guard order, then
	// document order; those of the guards that run last (llm.judge) come after the others'.
	Findings []Finding `json:"findings,omitempty"`
	// Labels are the session labels the enforced findings set (LabelPrivate, LabelUntrusted),
	// sorted.
	Labels []string `json:"labels,omitempty"`
	// Errors are the guards that failed, in guard order.
	Errors []GuardError `json:"errors,omitempty"`
}

// result merges the outcomes in guard order.
func (s *Set) result(r *run) Result {
	var res Result
	for i := range s.entries {
		s.merge(&res, r, i)
	}
	sort.Strings(res.Labels)
	res.Blocked = res.Action == ActionBlock
	return res
}

// merge adds the outcome of entry i, if it ran, to res: its error or findings, its labels, and
// its action when it is stronger than res's. The caller sorts the labels and sets Blocked.
func (s *Set) merge(res *Result, r *run, i int) {
	e, o := s.entries[i], &r.out[i]
	if !o.ran {
		return
	}
	if o.err != nil {
		res.Errors = append(res.Errors, GuardError{Guard: e.id, Err: o.err.Error(), FailMode: e.failMode()})
		if e.logOnly || e.failOpen {
			return
		}
		act := e.action
		if act == ActionRedact {
			act = ActionBlock // nothing is known that could be redacted
		}
		if act.Stronger(res.Action) {
			res.Action = act
			res.Reason = fmt.Sprintf("guard %q (%s) failed (%v) and fails closed; %s", e.id, e.use, o.err, consequence(act))
		}
		return
	}
	lastLeaf, lastPath := -1, ""
	for _, h := range o.hits {
		if h.leaf != lastLeaf {
			lastLeaf, lastPath = h.leaf, r.w.leafPath(h.leaf)
		}
		res.Findings = append(res.Findings, Finding{
			Guard: e.id, Category: h.span.Category, Stage: string(s.stage), Action: e.action,
			Mode: e.mode(), Path: lastPath, Start: h.span.Start, End: h.span.End,
		})
		if e.logOnly {
			continue
		}
		if h.span.Label != "" && !slices.Contains(res.Labels, h.span.Label) {
			res.Labels = append(res.Labels, h.span.Label)
		}
		if e.action.Stronger(res.Action) {
			res.Action = e.action
			res.Reason = fmt.Sprintf("guard %q (%s) found %s %s; %s", e.id, e.use, h.span.Category, where(lastPath), consequence(e.action))
		}
	}
}

func where(path string) string {
	if path == "" {
		return "in the text"
	}
	return "at " + path
}

func consequence(a Action) string {
	switch a {
	case ActionBlock:
		return "the content was blocked"
	case ActionEscalate:
		return "the content needs an operator's approval"
	default:
		return "it was redacted"
	}
}
