package model

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// ScriptedSettings is the script of the deterministic scripted model, for
// tests, demos and offline runs.
type ScriptedSettings struct {
	// Rules are checked first, in order, against the last message of the
	// call; the first that matches gives the reply.
	Rules []ScriptRule `json:"rules,omitempty" yaml:"rules,omitempty"`
	// Replies are used in order when no rule matches.
	Replies []Reply `json:"replies,omitempty" yaml:"replies,omitempty"`
	// RepeatLast says whether the last reply repeats once the replies run
	// out; nil means true. When false, the call after the last fails.
	RepeatLast *bool `json:"repeat_last,omitempty" yaml:"repeat_last,omitempty"`
	// HoldStream is the llm section's hold_stream: a reply's chunks go to the
	// chunk callback only once the reply is known not to be declined (a
	// refusal's or an error's never do). Without it they go out before the
	// reply is read, as a stream's would.
	HoldStream bool `json:"hold_stream,omitempty" yaml:"hold_stream,omitempty"`
}

// ScriptRule gives a reply when the last message matches all of its set
// matchers; a rule with none matches every message.
type ScriptRule struct {
	// Contains matches when the message text holds it, ignoring case.
	Contains string `json:"contains,omitempty" yaml:"contains,omitempty"`
	// Matches is a Go regular expression the message text must match.
	Matches string `json:"matches,omitempty" yaml:"matches,omitempty"`
	// Role is user, assistant or tool.
	Role string `json:"role,omitempty" yaml:"role,omitempty"`
	// Times is how many times the rule may answer; zero means always.
	Times int   `json:"times,omitempty" yaml:"times,omitempty"`
	Reply Reply `json:"reply" yaml:"reply"`
}

// Reply is one scripted answer.
type Reply struct {
	Text string `json:"text,omitempty" yaml:"text,omitempty"`
	// Output is structured output, sent as its JSON text. A reply has Text
	// or Output, not both.
	Output    any              `json:"output,omitempty" yaml:"output,omitempty"`
	ToolCalls []ScriptToolCall `json:"tool_calls,omitempty" yaml:"tool_calls,omitempty"`
	// Usage, when nil, is estimated: one token per four characters of the
	// call's text (instructions, messages, tool results) and of the reply.
	Usage   *Usage  `json:"usage,omitempty" yaml:"usage,omitempty"`
	CostUSD float64 `json:"cost_usd,omitempty" yaml:"cost_usd,omitempty"`
	// Model is the resolved model reported; empty means the call's model,
	// else "scripted".
	Model string `json:"model,omitempty" yaml:"model,omitempty"`
	// Chunks is how the text would be streamed: pieces whose concatenation
	// is the reply's text (Text, or Output's JSON text), delivered in order
	// to the context's chunk callback (WithChunks) and kept in
	// Result.Chunks. A refusal's chunks are the part streamed before the
	// refusal showed (see ScriptedSettings.HoldStream).
	Chunks []string `json:"chunks,omitempty" yaml:"chunks,omitempty"`
	// FinishReason is one of the canonical finish reasons; empty means
	// tool_calls when the reply calls tools, else stop. refusal makes a
	// refusal with Text as its reason (the model's refusal message);
	// content_filter makes one whose reason is "finish_reason
	// content_filter", Text (the partial answer a filter stopped) dropped,
	// as Chat Completions reads it.
	FinishReason string `json:"finish_reason,omitempty" yaml:"finish_reason,omitempty"`
	// Fail makes the call return an error instead of a result.
	Fail bool `json:"fail,omitempty" yaml:"fail,omitempty"`
}

// ScriptToolCall is a tool call in a Reply. An empty ID gets the next of
// call_1, call_2, … in the order the model makes calls.
type ScriptToolCall struct {
	ID        string         `json:"id,omitempty" yaml:"id,omitempty"`
	Name      string         `json:"name" yaml:"name"`
	Arguments map[string]any `json:"arguments,omitempty" yaml:"arguments,omitempty"`
}

// Scripted is the deterministic scripted Model. It is safe for concurrent
// use; concurrent calls take replies in the order they take the lock.
type Scripted struct {
	rules      []scriptRule
	replies    []Reply
	repeatLast bool
	hold       bool

	mu        sync.Mutex
	next      int // index of the next reply
	calls     int // Generate calls answered, for request ids
	toolCalls int // tool-call ids given out
}

type scriptRule struct {
	ScriptRule
	contains string
	matches  *regexp.Regexp
	used     int
}

// NewScripted checks the script and returns its model. Every problem is reported, as
// SettingErrors whose keys are the settings' paths in the llm section ("rules[2].matches",
// "replies[0].chunks"; indexes from 0), so check can point at their lines.
func NewScripted(s ScriptedSettings) (*Scripted, error) {
	if len(s.Rules) == 0 && len(s.Replies) == 0 {
		return nil, SettingErrors{{Key: "replies", Msg: "the scripted provider has no rules and no replies: give it replies (used in order) or rules (matched against the last message)"}}
	}
	m := &Scripted{replies: s.Replies, repeatLast: s.RepeatLast == nil || *s.RepeatLast, hold: s.HoldStream}
	var errs SettingErrors
	for i, r := range s.Rules {
		key := fmt.Sprintf("rules[%d]", i)
		sr := scriptRule{ScriptRule: r, contains: strings.ToLower(r.Contains)}
		switch Role(r.Role) {
		case "", RoleUser, RoleAssistant, RoleTool:
		default:
			errs = append(errs, &SettingError{Key: key + ".role", Msg: fmt.Sprintf("%q is not a role: want user, assistant or tool", r.Role)})
		}
		if r.Times < 0 {
			errs = append(errs, &SettingError{Key: key + ".times", Msg: fmt.Sprintf("%d is negative: want how many times the rule may answer, or 0 for always", r.Times)})
		}
		if r.Matches != "" {
			re, err := regexp.Compile(r.Matches)
			if err != nil {
				errs = append(errs, &SettingError{Key: key + ".matches", Msg: fmt.Sprintf("not a Go regular expression: %v", err)})
			}
			sr.matches = re
		}
		if r.Reply.empty() {
			errs = append(errs, &SettingError{Key: key + ".reply", Msg: "is missing or empty, so the rule would answer nothing: give the reply's text, output or tool_calls (or fail: true, or a finish_reason)"})
		}
		errs = append(errs, r.Reply.check(key+".reply")...)
		m.rules = append(m.rules, sr)
	}
	for i, r := range s.Replies {
		errs = append(errs, r.check(fmt.Sprintf("replies[%d]", i))...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return m, nil
}

// empty reports whether the reply says nothing at all: no text, output, tool call, failure or
// finish reason (a rule written without its reply).
func (r Reply) empty() bool {
	return r.Text == "" && r.Output == nil && len(r.ToolCalls) == 0 && !r.Fail && r.FinishReason == "" && len(r.Chunks) == 0
}

// check reports what in the reply cannot become a Result; key is the reply's path.
func (r Reply) check(key string) SettingErrors {
	var errs SettingErrors
	add := func(field, format string, args ...any) {
		errs = append(errs, &SettingError{Key: key + field, Msg: fmt.Sprintf(format, args...)})
	}
	if r.Text != "" && r.Output != nil {
		add("", "has both text and output: a reply has one (output is sent as its JSON text)")
	}
	if r.Output != nil {
		if _, err := json.Marshal(r.Output); err != nil {
			add(".output", "%v", err)
		}
	}
	for i, tc := range r.ToolCalls {
		if tc.Name == "" {
			add(fmt.Sprintf(".tool_calls[%d].name", i), "tool call %d has no name", i+1)
		}
		if _, err := json.Marshal(tc.Arguments); err != nil {
			add(fmt.Sprintf(".tool_calls[%d].arguments", i), "%v", err)
		}
	}
	switch FinishReason(r.FinishReason) {
	case "", FinishStop, FinishToolCalls, FinishLength, FinishRefusal, FinishContentFilter, FinishError:
	default:
		add(".finish_reason", "%q: want stop, tool_calls, length, refusal, content_filter or error", r.FinishReason)
	}
	switch c := r.CostUSD; {
	case c < 0:
		add(".cost_usd", "must not be negative, got %g", c)
	case math.IsNaN(c) || math.IsInf(c, 1):
		add(".cost_usd", "must be a finite number of USD, got %g", c)
	}
	if u := r.Usage; u != nil {
		for _, f := range []struct {
			key string
			v   float64
		}{{"input_tokens", float64(u.InputTokens)}, {"output_tokens", float64(u.OutputTokens)}, {"cache_read_tokens", float64(u.CacheReadTokens)},
			{"cache_write_tokens", float64(u.CacheWriteTokens)}, {"cost_usd", u.CostUSD}} {
			switch {
			case f.v < 0:
				add(".usage."+f.key, "must not be negative, got %g", f.v)
			case math.IsNaN(f.v) || math.IsInf(f.v, 1):
				add(".usage."+f.key, "must be a finite number, got %g", f.v)
			}
		}
	}
	if len(r.Chunks) > 0 {
		text, err := r.text()
		if joined := strings.Join(r.Chunks, ""); err == nil && joined != text {
			add(".chunks", "the chunks join to %s, not to the reply's text %s: they are how that text would be streamed, so they must join to exactly it",
				quoteShort(joined), quoteShort(text))
		}
	}
	return errs
}

// text is the reply's text: Text, or Output as its JSON text.
func (r Reply) text() (string, error) {
	if r.Output == nil {
		return r.Text, nil
	}
	out, err := json.Marshal(r.Output)
	if err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	return string(out), nil
}

// quoteShort quotes s for an error, cut to a readable length.
func quoteShort(s string) string {
	const limit = 60
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Generate answers with the first rule matching the last message, else the
// next reply. The reply's chunks go to the context's chunk callback, in
// order, before Generate returns (under hold_stream only when the reply is
// not a refusal or an error); the result carries the context's invocation
// id.
func (m *Scripted) Generate(ctx context.Context, c *Call) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	if c == nil {
		return nil, fmt.Errorf("scripted model: no call")
	}
	res, chunks, err := m.answer(c)
	if err != nil {
		return nil, err
	}
	res.Evidence.InvocationID = InvocationID(ctx)
	declined := res.Refusal || res.FinishReason == FinishError
	if fn := chunksOf(ctx); fn != nil && !(m.hold && declined) {
		for _, chunk := range chunks {
			fn(chunk)
		}
	}
	if !declined && len(chunks) > 0 {
		res.Chunks = chunks
	}
	return res, nil
}

// answer picks the reply for c under the lock and builds its result; chunks are the reply's
// non-empty chunks, delivered by the caller outside the lock.
func (m *Scripted) answer(c *Call) (*Result, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	reply, which, err := m.pick(c)
	if err != nil {
		return nil, nil, err
	}
	if reply.Fail {
		return nil, nil, fmt.Errorf("scripted model: %s fails, as scripted", which)
	}
	res, err := buildResult(c, reply, fmt.Sprintf("scripted-%d", m.calls), m.nextCallID)
	if err != nil {
		return nil, nil, err
	}
	var chunks []string
	for _, chunk := range reply.Chunks {
		if chunk != "" {
			chunks = append(chunks, chunk)
		}
	}
	return res, chunks, nil
}

// pick chooses the reply for c and says which it was, for errors.
func (m *Scripted) pick(c *Call) (Reply, string, error) {
	var last Message
	if n := len(c.Messages); n > 0 {
		last = c.Messages[n-1]
	}
	text := messageText(last)
	for i := range m.rules {
		r := &m.rules[i]
		if r.Times > 0 && r.used >= r.Times {
			continue
		}
		if r.Role != "" && Role(r.Role) != last.Role {
			continue
		}
		if r.contains != "" && !strings.Contains(strings.ToLower(text), r.contains) {
			continue
		}
		if r.matches != nil && !r.matches.MatchString(text) {
			continue
		}
		r.used++
		return r.Reply, fmt.Sprintf("rule %d", i+1), nil
	}
	if len(m.replies) == 0 {
		return Reply{}, "", fmt.Errorf("scripted model: no rule matched the last message and the script has no replies")
	}
	if m.next >= len(m.replies) {
		if !m.repeatLast {
			return Reply{}, "", fmt.Errorf("scripted model: script exhausted: all %d replies used and repeat_last is false", len(m.replies))
		}
		return m.replies[len(m.replies)-1], fmt.Sprintf("reply %d", len(m.replies)), nil
	}
	m.next++
	return m.replies[m.next-1], fmt.Sprintf("reply %d", m.next), nil
}

func (m *Scripted) nextCallID() string {
	m.toolCalls++
	return fmt.Sprintf("call_%d", m.toolCalls)
}

// messageText is what rules match: a message's text, or for a tool
// message its results' content, one per line.
func messageText(msg Message) string {
	if msg.Role != RoleTool {
		return msg.Text
	}
	parts := make([]string, 0, len(msg.ToolResults))
	for _, r := range msg.ToolResults {
		parts = append(parts, r.Content)
	}
	return strings.Join(parts, "\n")
}

// buildResult turns a checked reply into the Result for c. newID gives ids
// to tool calls that have none.
func buildResult(c *Call, r Reply, requestID string, newID func() string) (*Result, error) {
	res := &Result{Blocks: []Block{}, Evidence: Evidence{RequestID: requestID, Model: r.Model}}
	if res.Evidence.Model == "" && c != nil {
		res.Evidence.Model = c.Controls.Model
	}
	if res.Evidence.Model == "" {
		res.Evidence.Model = "scripted"
	}
	text, err := r.text()
	if err != nil {
		return nil, err
	}
	if text != "" {
		res.Blocks = append(res.Blocks, Block{Kind: BlockText, Text: text})
	}
	outChars := utf8.RuneCountInString(text)
	for _, tc := range r.ToolCalls {
		args, err := json.Marshal(tc.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tool call %s: arguments: %w", tc.Name, err)
		}
		if tc.Arguments == nil {
			args = []byte(`{}`)
		}
		id := tc.ID
		if id == "" {
			id = newID()
		}
		res.Blocks = append(res.Blocks, Block{Kind: BlockToolCall, ToolCall: &ToolCall{ID: id, Name: tc.Name, Arguments: args}})
		outChars += utf8.RuneCountInString(tc.Name) + len(args)
	}
	if r.Usage != nil {
		res.Usage = *r.Usage
	} else {
		res.Usage = Usage{InputTokens: tokens(callChars(c)), OutputTokens: tokens(outChars)}
	}
	if r.CostUSD != 0 {
		res.Usage.CostUSD = r.CostUSD
	}
	if res.Usage.CostUSD != 0 && res.Usage.CostSource == "" {
		res.Usage.CostSource = "scripted"
	}
	switch reason := FinishReason(r.FinishReason); reason {
	case "":
		res.FinishReason = FinishStop
		if len(r.ToolCalls) > 0 {
			res.FinishReason = FinishToolCalls
		}
	case FinishRefusal:
		why := text
		if why == "" {
			why = "scripted " + string(reason)
		}
		res.refuse(reason, why)
	case FinishContentFilter:
		// As in Chat Completions: the text is the partial answer a filter stopped, dropped
		// with it, never the reason.
		res.refuse(reason, contentFilterReason)
	case FinishError:
		res.FinishReason = FinishError
		res.Error = text
	default:
		res.FinishReason = reason
	}
	return res, nil
}

// callChars counts the characters of everything the call sends.
func callChars(c *Call) int {
	if c == nil {
		return 0
	}
	n := 0
	for _, s := range c.Instructions {
		n += utf8.RuneCountInString(s)
	}
	for _, m := range c.Messages {
		n += utf8.RuneCountInString(m.Text)
		for _, tc := range m.ToolCalls {
			n += utf8.RuneCountInString(tc.Name) + len(tc.Arguments)
		}
		for _, r := range m.ToolResults {
			n += utf8.RuneCountInString(r.Content)
		}
	}
	return n
}

// tokens estimates one token per four characters, rounding up.
func tokens(chars int) int { return (chars + 3) / 4 }
