package guards

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Spec is one configured guard, as written under guardrails.<stage>. The configuration loader
// fills it; Build checks it.
type Spec struct {
	// ID names the guard in findings, reasons and metrics; unique within the stage.
	ID string
	// Use picks the guard: pii.regex, secrets.scan, injection.heuristic, regex.deny,
	// size.limit, topic.deny, llm.judge.
	Use string
	// Action is block, redact or escalate; "" is the guard's default.
	Action Action
	// Mode is enforce ("" too) or log_only (findings are recorded, nothing is changed).
	Mode string
	// Servers and Tools restrict the guard to calls whose server and tool match one of the
	// globs (path.Match syntax); empty means every one.
	Servers, Tools []string
	// When, if set, is asked at every check (after the globs) whether the guard applies; the
	// loader compiles a CEL `when` into it. It gets the check's context and must be safe for
	// concurrent use.
	When func(ctx context.Context, server, tool string) bool
	// Parallel lets the guard run beside the others on large content.
	Parallel bool
	// FailMode is closed ("" too: an error counts as firing) or open (an error lets the
	// content through).
	FailMode string
	// Timeout bounds the guard's work on one document; 0 is DefaultTimeout for guards that run
	// user regular expressions (regex.deny) and no bound for the linear built-in scanners.
	Timeout time.Duration
	// Enabled false leaves the guard out (its settings are still checked).
	Enabled *bool
	// Settings are the guard's own keys: everything else in the entry, as a mapping node
	// (nil when there are none). They are decoded strictly into the guard's settings struct.
	Settings *yaml.Node
	// File and Line locate the entry, for messages.
	File string
	Line int
}

// Set is the guards of one stage, built once by Build and safe for concurrent use.
type Set struct {
	stage     Stage
	entries   []*entry
	parallel  int           // entries with parallel set
	sem       chan struct{} // bounds the goroutines parallel entries run in
	withWhere bool          // some entry has globs or a When
	last      bool          // some entry runs last (llm.judge)
}

// entry is one guard as Build resolved it.
type entry struct {
	id, use  string
	guard    Guard
	redactor Redactor
	action   Action
	logOnly  bool
	failOpen bool
	parallel bool
	last     bool // runs after the others, on what they leave (scanLast)
	timeout  time.Duration
	// polls: the guard's Scan only polls its context (pollingGuard).
	polls   bool
	servers []string
	tools   []string
	when    func(ctx context.Context, server, tool string) bool
}

// mode is the entry's mode as findings spell it.
func (e *entry) mode() string {
	if e.logOnly {
		return ModeLogOnly
	}
	return ModeEnforce
}

func (e *entry) failMode() string {
	if e.failOpen {
		return FailOpen
	}
	return FailClosed
}

// applies reports whether the entry's where globs and its When admit the call.
func (e *entry) applies(ctx context.Context, server, tool string) bool {
	return matchAny(e.servers, server) && matchAny(e.tools, tool) && (e.when == nil || e.when(ctx, server, tool))
}

func matchAny(globs []string, name string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// redact applies the entry's redaction to spans of text.
func (e *entry) redact(text string, spans []Span) string {
	if e.redactor != nil {
		return e.redactor.Redact(text, spans)
	}
	return Redact(text, spans, fixed(defaultReplacement))
}

// defaultReplacement replaces what a guard without its own Redactor found.
const defaultReplacement = "[REDACTED]"

// maxParallel bounds the goroutines of one Set's parallel guards, across concurrent checks.
var maxParallel = min(8, max(1, runtime.GOMAXPROCS(0)-1))

// Build checks the entries of one stage and builds them into a Set. It reports every problem
// at once, each as "FILE:LINE: guard ID: ...": a missing or duplicate id, an unknown `use`, a
// guard placed in a stage it does not support, an unknown action, mode or fail_mode, a bad
// glob, and bad settings (unknown or misspelled keys, wrong types, regular expressions that do
// not compile). Entries with enabled: false are checked but left out.
func Build(stage Stage, specs []Spec) (*Set, error) {
	if !stage.valid() {
		names := make([]string, len(allStages))
		for i, s := range allStages {
			names[i] = string(s)
		}
		return nil, &BuildError{[]Problem{{Msg: fmt.Sprintf("unknown stage %q%s", stage, suggestion(string(stage), names)), Entry: -1}}}
	}
	set := &Set{stage: stage}
	var problems []Problem
	firstLine := map[string]int{}
	for i, sp := range specs {
		about := func(key string, line int, format string, args ...any) {
			if line == 0 {
				line = sp.Line
			}
			problems = append(problems, Problem{File: sp.File, Line: line, Guard: sp.ID, Msg: fmt.Sprintf(format, args...), Entry: i, Key: key})
		}
		add := func(line int, format string, args ...any) { about("", line, format, args...) }
		if sp.ID == "" {
			about("id", 0, "needs an id")
		} else if line, dup := firstLine[sp.ID]; dup {
			about("id", 0, "id %q is used twice in %s (first at line %d)", sp.ID, stage, line)
		} else {
			firstLine[sp.ID] = sp.Line
		}
		e := &entry{id: sp.ID, use: sp.Use, parallel: sp.Parallel, timeout: sp.Timeout, when: sp.When}
		switch sp.Action {
		case ActionNone, ActionBlock, ActionRedact, ActionEscalate:
		default:
			about("action", 0, "unknown action %q%s", sp.Action, suggestion(string(sp.Action), []string{"block", "redact", "escalate"}))
		}
		switch sp.Mode {
		case "", ModeEnforce:
		case ModeLogOnly:
			e.logOnly = true
		default:
			about("mode", 0, "unknown mode %q%s", sp.Mode, suggestion(sp.Mode, []string{ModeEnforce, ModeLogOnly}))
		}
		switch sp.FailMode {
		case "", FailClosed:
		case FailOpen:
			e.failOpen = true
		default:
			about("fail_mode", 0, "unknown fail_mode %q%s", sp.FailMode, suggestion(sp.FailMode, []string{FailClosed, FailOpen}))
		}
		if sp.Timeout < 0 {
			about("timeout", 0, "timeout must not be negative")
		}
		for _, g := range sp.Servers {
			if _, err := path.Match(g, ""); err != nil {
				about("servers", 0, "bad servers glob %q: %v", g, err)
			}
		}
		for _, g := range sp.Tools {
			if _, err := path.Match(g, ""); err != nil {
				about("tools", 0, "bad tools glob %q: %v", g, err)
			}
		}
		e.servers, e.tools = slices.Clone(sp.Servers), slices.Clone(sp.Tools)

		factory, known := registry[sp.Use]
		if !known {
			if sp.Use == "" {
				about("use", 0, "needs use: one of %s", strings.Join(Uses(), ", "))
			} else {
				about("use", 0, "unknown guard %q%s", sp.Use, suggestion(sp.Use, Uses()))
			}
			continue
		}
		g, err := factory(sp.Settings)
		if err != nil {
			var se SettingErrors
			if errors.As(err, &se) {
				for _, s := range se {
					add(s.Line, "%s: %s", sp.Use, s.Msg)
				}
			} else {
				add(0, "%s: %v", sp.Use, err)
			}
			continue
		}
		if !slices.Contains(g.Stages(), stage) {
			names := make([]string, 0, len(g.Stages()))
			for _, s := range g.Stages() {
				names = append(names, string(s))
			}
			about("use", 0, "%s cannot run in stage %s; it runs in %s", sp.Use, stage, strings.Join(names, ", "))
			continue
		}
		if r, ok := g.(actionRefuser); ok {
			if msg := r.refuseAction(sp.Action); msg != "" {
				about("action", 0, "%s: %s", sp.Use, msg)
				continue
			}
		}
		if sp.Enabled != nil && !*sp.Enabled {
			continue
		}
		e.guard = g
		e.redactor, _ = g.(Redactor)
		_, e.polls = g.(pollingGuard)
		e.action = sp.Action
		if e.action == ActionNone {
			e.action = g.DefaultAction()
		}
		if b, ok := g.(Bounded); ok {
			if e.timeout == 0 {
				e.timeout = DefaultTimeout
			}
			b.SetTimeout(e.timeout)
		}
		if p, ok := g.(placer); ok {
			p.place(sp.ID, stage)
		}
		if _, e.last = g.(lastRunner); e.last {
			set.last = true
		}
		if e.parallel && !e.last {
			set.parallel++
		}
		if len(e.servers) > 0 || len(e.tools) > 0 || e.when != nil {
			set.withWhere = true
		}
		set.entries = append(set.entries, e)
	}
	if len(problems) > 0 {
		return nil, &BuildError{Problems: problems}
	}
	if set.parallel > 1 {
		set.sem = make(chan struct{}, maxParallel)
	}
	return set, nil
}

// Empty reports whether the set has no enabled guard, so a caller can skip the stage.
func (s *Set) Empty() bool { return s == nil || len(s.entries) == 0 }

// Stage is the stage the set was built for.
func (s *Set) Stage() Stage { return s.stage }

// ForRecords is the set that makes what the gateway writes down (audit records, approval
// requests, logs) hold nothing a log_only guard flags: its log_only guards that can redact,
// enforced, with action redact. A log_only guard changes nothing on its way to the tool or the
// client, but "audit records and logs never contain a matched secret" (SPEC.md §10) holds for
// it too. It is nil when the set has no such guard.
func (s *Set) ForRecords() *Set {
	if s.Empty() {
		return nil
	}
	var entries []*entry
	for _, e := range s.entries {
		if !e.logOnly || e.redactor == nil {
			continue
		}
		c := *e
		c.logOnly, c.action = false, ActionRedact
		entries = append(entries, &c)
	}
	if len(entries) == 0 {
		return nil
	}
	out := &Set{stage: s.stage, entries: entries, withWhere: s.withWhere}
	for _, e := range entries {
		if e.parallel {
			out.parallel++
		}
	}
	if out.parallel > 1 {
		out.sem = make(chan struct{}, maxParallel)
	}
	return out
}
