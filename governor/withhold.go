package governor

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/guards"
)

// WithheldArgs is what the audit record keeps of arguments the tool_call guards blocked or held
// for an operator: nothing of their text. The record's findings say which guard fired, on which
// category and where (path and offsets).
const WithheldArgs = `"[withheld: the tool_call guards did not let these arguments through; see the findings]"`

// Keeping what the guards removed out of everything the gateway writes (SPEC.md §15, "Nothing
// removed is kept"): the audit record holds the arguments as the guards left them, and every
// reason a call ends with (which a model, the log and the audit read) quotes no argument value
// that an enforced guard flags.

// WithGuards is r, also applying set (the tool_call guards) to what the audit keeps and to the
// reasons calls end with.
func (r *Redactor) WithGuards(set *guards.Set) *Redactor {
	c := *r
	c.guards = set
	c.records = set.ForRecords()
	return &c
}

// kept is the arguments of c as the audit keeps them, before key redaction and cutting: as the
// tool_call guards left them when they ran (withheld when they blocked or escalated), and, for a
// call refused before the guards saw it, as they would have left them.
func (r *Redactor) kept(ctx context.Context, c *Call, original json.RawMessage) json.RawMessage {
	server := ""
	if c.Tool != nil {
		server = c.Tool.Server
	}
	var args json.RawMessage
	switch {
	case c.ArgsWithheld:
		return json.RawMessage(WithheldArgs)
	case c.ArgsScreened:
		args = c.Args
	case r.guards.Empty():
		args = original
	default:
		res, redacted := r.guards.CheckJSON(ctx, server, c.Name, original)
		switch res.Action {
		case guards.ActionBlock, guards.ActionEscalate:
			return json.RawMessage(WithheldArgs)
		}
		args = redacted
	}
	if r.records.Empty() {
		return args
	}
	// What log_only guards flag went to the tool unchanged, but is not written down.
	res, redacted := r.records.CheckJSON(ctx, server, c.Name, args)
	if res.Action == guards.ActionBlock {
		return json.RawMessage(WithheldArgs) // a guard that failed closed while redacting
	}
	return redacted
}

// ScrubText is text with the values of redacted argument keys of c and every span an enforced
// tool_call guard flags replaced: by [REDACTED] and by "[category]". A reason that quotes an
// argument (a validation message, an upstream's error) is safe to return, log and audit after it.
func (r *Redactor) ScrubText(ctx context.Context, c *Call, text string) string {
	text = Scrub(text, r.Secrets(c.Args))
	if r.guards.Empty() || text == "" {
		return text
	}
	server := ""
	if c.Tool != nil {
		server = c.Tool.Server
	}
	res, _ := r.guards.CheckText(ctx, server, c.Name, text)
	var spans []guards.Finding
	for _, f := range res.Findings {
		// log_only findings too: a reason is written down (the log, the audit record).
		if f.Start < f.End && f.End <= len(text) {
			spans = append(spans, f)
		}
	}
	if len(spans) == 0 {
		return text
	}
	slices.SortFunc(spans, func(a, b guards.Finding) int { return a.Start - b.Start })
	var b strings.Builder
	pos := 0
	for _, f := range spans {
		if f.Start < pos { // overlaps the span before: covered by its replacement
			pos = max(pos, f.End)
			continue
		}
		b.WriteString(text[pos:f.Start])
		b.WriteString("[" + f.Category + "]")
		pos = f.End
	}
	b.WriteString(text[pos:])
	return b.String()
}

// ScrubReasons is the step inside Log and Audit that passes every reason the gateway made
// through ScrubText, so that neither the caller, the log nor the audit record holds an
// argument value a guard would flag. The tool's own reasons have passed the tool_result guards.
func ScrubReasons(r *Redactor) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			out := next.Handle(ctx, c)
			if out.Kind == "" || out.Reason == "" {
				return out
			}
			scrubbed := r.ScrubText(ctx, c, out.Reason)
			if scrubbed == out.Reason {
				return out
			}
			clean := Refuse(out.Kind, scrubbed)
			clean.Unknown, clean.RPCError = out.Unknown, out.RPCError
			if clean.RPCError != nil {
				e := *clean.RPCError
				e.Message = r.ScrubText(ctx, c, e.Message)
				clean.RPCError = &e
			}
			return clean
		})
	}
}
