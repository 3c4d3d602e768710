package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func userCall(text string) *Call {
	return &Call{Messages: []Message{{Role: RoleUser, Text: text}}, Controls: Controls{Model: "m"}}
}

func toolCall(content string) *Call {
	return &Call{Messages: []Message{
		{Role: RoleUser, Text: "go"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: RoleTool, ToolResults: []ToolResult{{CallID: "call_1", Content: content}}},
	}, Controls: Controls{Model: "m"}}
}

// TestScripted plays each script through a sequence of calls and checks
// the text, tool calls and finish reason of every answer, or its error.
func TestScripted(t *testing.T) {
	no := false
	type step struct {
		call  *Call
		want  string // "text|tool calls|finish", or "error: …"
		model string // resolved model, when checked
	}
	cases := []struct {
		name   string
		script ScriptedSettings
		steps  []step
	}{
		{
			name: "rules before replies, contains ignores case, role tool matches results",
			script: ScriptedSettings{
				Rules: []ScriptRule{
					{Contains: "REFUND", Reply: Reply{ToolCalls: []ScriptToolCall{{Name: "refund", Arguments: map[string]any{"amount": 5}}}}},
					{Role: "tool", Reply: Reply{Text: "Refund done."}},
				},
				Replies: []Reply{{Output: map[string]any{"vendor": "ACME", "total": 12.5}}},
			},
			steps: []step{
				{call: userCall("I want a refund"), want: `|refund:call_1:{"amount":5}|tool_calls`},
				{call: toolCall(`{"success":true}`), want: "Refund done.||stop"},
				{call: userCall("invoice?"), want: `{"total":12.5,"vendor":"ACME"}||stop`},
				{call: userCall("again"), want: `{"total":12.5,"vendor":"ACME"}||stop`},
			},
		},
		{
			name: "matches on tool result content, times limits a rule",
			script: ScriptedSettings{
				Rules: []ScriptRule{
					{Matches: `"success":\s*false`, Times: 1, Reply: Reply{Text: "retrying"}},
				},
				Replies: []Reply{{Text: "done"}},
			},
			steps: []step{
				{call: toolCall(`{"success": false}`), want: "retrying||stop"},
				{call: toolCall(`{"success": false}`), want: "done||stop"},
			},
		},
		{
			name:   "role must match",
			script: ScriptedSettings{Rules: []ScriptRule{{Role: "assistant", Reply: Reply{Text: "no"}}}, Replies: []Reply{{Text: "yes"}}},
			steps:  []step{{call: userCall("hi"), want: "yes||stop"}},
		},
		{
			name: "replies in order then exhausted when repeat_last is false",
			script: ScriptedSettings{Replies: []Reply{
				{ToolCalls: []ScriptToolCall{{Name: "a"}, {ID: "mine", Name: "b"}}},
				{ToolCalls: []ScriptToolCall{{Name: "c"}}},
			}, RepeatLast: &no},
			steps: []step{
				{call: userCall("x"), want: "|a:call_1:{} b:mine:{}|tool_calls"},
				{call: userCall("x"), want: "|c:call_2:{}|tool_calls"},
				{call: userCall("x"), want: "error: script exhausted: all 2 replies used"},
			},
		},
		{
			name:   "fail raises an error naming the reply",
			script: ScriptedSettings{Replies: []Reply{{Text: "ok"}, {Fail: true}}},
			steps: []step{
				{call: userCall("x"), want: "ok||stop"},
				{call: userCall("x"), want: "error: reply 2 fails, as scripted"},
			},
		},
		{
			name:   "finish reasons: length, refusal drops the text into the reason",
			script: ScriptedSettings{Replies: []Reply{{Text: "cut", FinishReason: "length"}, {Text: "I can't help with that.", FinishReason: "refusal"}}},
			steps: []step{
				{call: userCall("x"), want: "cut||length"},
				{call: userCall("x"), want: "||refusal refused: I can't help with that."},
			},
		},
		{
			name:   "model: the reply's, else the call's, else scripted",
			script: ScriptedSettings{Replies: []Reply{{Text: "a", Model: "gpt-x"}, {Text: "b"}}},
			steps: []step{
				{call: userCall("x"), want: "a||stop", model: "gpt-x"},
				{call: userCall("x"), want: "b||stop", model: "m"},
				{call: &Call{Messages: []Message{{Role: RoleUser, Text: "x"}}}, want: "b||stop", model: "scripted"},
			},
		},
		{
			name:   "only rules, none matching",
			script: ScriptedSettings{Rules: []ScriptRule{{Contains: "zzz", Reply: Reply{Text: "z"}}}},
			steps:  []step{{call: userCall("x"), want: "error: no rule matched the last message and the script has no replies"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewScripted(tc.script)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				res, err := m.Generate(context.Background(), s.call)
				got := ""
				if err != nil {
					got = "error: " + err.Error()
					if !strings.HasPrefix(s.want, "error: ") || !strings.Contains(got, strings.TrimPrefix(s.want, "error: ")) {
						t.Errorf("step %d: got %q, want %q", i+1, got, s.want)
					}
					continue
				}
				got = summary(res)
				if got != s.want {
					t.Errorf("step %d: got %q, want %q", i+1, got, s.want)
				}
				if s.model != "" && res.Evidence.Model != s.model {
					t.Errorf("step %d: model %q, want %q", i+1, res.Evidence.Model, s.model)
				}
			}
		})
	}
}

// summary writes a result as "text|name:id:args …|finish", with the
// refusal reason appended when refused.
func summary(r *Result) string {
	var calls []string
	for _, tc := range r.ToolCalls() {
		calls = append(calls, tc.Name+":"+tc.ID+":"+string(tc.Arguments))
	}
	s := r.Text() + "|" + strings.Join(calls, " ") + "|" + string(r.FinishReason)
	if r.Refusal {
		s += " refused: " + r.RefusalReason
	}
	return s
}

func TestScriptedUsage(t *testing.T) {
	m, err := NewScripted(ScriptedSettings{Replies: []Reply{
		{Text: "12345678"},
		{Text: "x", Usage: &Usage{InputTokens: 7, OutputTokens: 3}, CostUSD: 0.25},
	}})
	if err != nil {
		t.Fatal(err)
	}
	call := &Call{Instructions: []string{"abcd"}, Messages: []Message{{Role: RoleUser, Text: "héllo"}}}
	res, _ := m.Generate(context.Background(), call)
	// 4 + 5 characters in (rounded up to 3 tokens), 8 out.
	if res.Usage != (Usage{InputTokens: 3, OutputTokens: 2}) {
		t.Errorf("estimated usage %+v", res.Usage)
	}
	res, _ = m.Generate(context.Background(), call)
	if res.Usage != (Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.25, CostSource: "scripted"}) {
		t.Errorf("scripted usage %+v", res.Usage)
	}
}

// TestNewScriptedRejects checks that every problem of a script is reported at once, each a
// setting error keyed by its path in the llm section, so check can point at its line.
func TestNewScriptedRejects(t *testing.T) {
	cases := []struct {
		s    ScriptedSettings
		want []string // "key: start of the message"
	}{
		{ScriptedSettings{}, []string{"replies: the scripted provider has no rules and no replies"}},
		{ScriptedSettings{Rules: []ScriptRule{{Matches: "(", Reply: Reply{Text: "r"}}}}, []string{"rules[0].matches: not a Go regular expression"}},
		{ScriptedSettings{Rules: []ScriptRule{{Role: "system", Reply: Reply{Text: "r"}}}}, []string{`rules[0].role: "system" is not a role`}},
		{ScriptedSettings{Rules: []ScriptRule{{Times: -1, Reply: Reply{Text: "r"}}}}, []string{"rules[0].times: -1 is negative"}},
		// A rule written without its reply would answer nothing.
		{ScriptedSettings{Rules: []ScriptRule{{Contains: "x"}}}, []string{"rules[0].reply: is missing or empty"}},
		{ScriptedSettings{Replies: []Reply{{Text: "a", CostUSD: math.NaN()}}}, []string{"replies[0].cost_usd: must be a finite number"}},
		{ScriptedSettings{Replies: []Reply{{Text: "a", Output: 1}}}, []string{"replies[0]: has both text and output"}},
		{ScriptedSettings{Replies: []Reply{{ToolCalls: []ScriptToolCall{{}}}}}, []string{"replies[0].tool_calls[0].name: tool call 1 has no name"}},
		{ScriptedSettings{Replies: []Reply{{FinishReason: "done"}}}, []string{`replies[0].finish_reason: "done"`}},
		{ScriptedSettings{Replies: []Reply{{Output: make(chan int)}}}, []string{"replies[0].output: json: unsupported type"}},
		{ScriptedSettings{Replies: []Reply{{Text: "abc", Chunks: []string{"a", "c"}}}}, []string{`replies[0].chunks: the chunks join to "ac", not to the reply's text "abc"`}},
		{ScriptedSettings{Replies: []Reply{{Output: map[string]any{"a": 1}, Chunks: []string{`{"a":`, `2}`}}}}, []string{`replies[0].chunks: the chunks join to "{\"a\":2}", not to the reply's text "{\"a\":1}"`}},
		{ScriptedSettings{
			Rules:   []ScriptRule{{Matches: "(", Reply: Reply{Text: "x", Chunks: []string{"y"}}}, {Role: "bot", Reply: Reply{Fail: true}}},
			Replies: []Reply{{Text: "ok"}, {FinishReason: "later"}},
		}, []string{"rules[0].matches: ", `rules[0].reply.chunks: the chunks join to "y"`, "rules[1].role: ", "replies[1].finish_reason: "}},
	}
	for _, tc := range cases {
		_, err := NewScripted(tc.s)
		var errs SettingErrors
		if !errors.As(err, &errs) || len(errs) != len(tc.want) {
			t.Errorf("NewScripted(%+v): got %v, want %d setting errors %q", tc.s, err, len(tc.want), tc.want)
			continue
		}
		for i, w := range tc.want {
			if got := errs[i].Error(); !strings.HasPrefix(got, w) {
				t.Errorf("error %d: %q, want it to start with %q", i, got, w)
			}
		}
	}
}

// TestScriptedChunks checks that a reply's chunks reach the chunk callback in order and make
// Result.Chunks; that a refusal's chunks go out as a stream's would, but never under
// hold_stream, and are not kept; and that the result carries the context's invocation id.
func TestScriptedChunks(t *testing.T) {
	replies := []Reply{
		{Text: "The cup is in the drawer.", Chunks: []string{"The cup ", "", "is in ", "the drawer."}},
		{Text: "I can't do that.", Chunks: []string{"I can't ", "do that."}, FinishReason: "refusal"},
		{Text: "no chunks"},
	}
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold_stream=%v", hold), func(t *testing.T) {
			m, err := NewScripted(ScriptedSettings{Replies: replies, HoldStream: hold})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			ctx := WithChunks(WithInvocationID(context.Background(), "run-1-step1-req1"), func(c string) { got = append(got, c) })
			res, err := m.Generate(ctx, userCall("x"))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"The cup ", "is in ", "the drawer."}
			if strings.Join(got, "|") != strings.Join(want, "|") || strings.Join(res.Chunks, "|") != strings.Join(want, "|") {
				t.Errorf("delivered %q, result's chunks %q; want %q", got, res.Chunks, want)
			}
			if res.Evidence.InvocationID != "run-1-step1-req1" {
				t.Errorf("invocation id %q", res.Evidence.InvocationID)
			}

			got = nil
			res, err = m.Generate(ctx, userCall("x"))
			if err != nil || !res.Refusal {
				t.Fatalf("want a refusal, got %+v, %v", res, err)
			}
			if res.Chunks != nil || len(res.Blocks) != 0 {
				t.Errorf("the refusal kept output: %+v", res)
			}
			if hold && got != nil {
				t.Errorf("under hold_stream the refusal's chunks went out: %q", got)
			}
			if !hold && strings.Join(got, "") != "I can't do that." {
				t.Errorf("without hold_stream the refusal's chunks went out as %q, want them as streamed", got)
			}

			got = nil
			res, err = m.Generate(ctx, userCall("x"))
			if err != nil || got != nil || res.Chunks != nil {
				t.Errorf("a reply without chunks: delivered %q, result %+v, %v", got, res, err)
			}
		})
	}
}

// TestScriptedConcurrent checks that concurrent callers each get a distinct
// reply and distinct tool-call ids (run with -race).
func TestScriptedConcurrent(t *testing.T) {
	const n = 50
	var replies []Reply
	for i := range n {
		replies = append(replies, Reply{Text: fmt.Sprint(i), ToolCalls: []ScriptToolCall{{Name: "t"}}})
	}
	no := false
	m, err := NewScripted(ScriptedSettings{Replies: replies, RepeatLast: &no})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	for range n {
		wg.Go(func() {
			res, err := m.Generate(context.Background(), userCall("x"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen[res.Text()+"/"+res.ToolCalls()[0].ID] = true
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("got %d distinct answers, want %d", len(seen), n)
	}
	if _, err := m.Generate(context.Background(), userCall("x")); err == nil {
		t.Fatal("want the script exhausted")
	}
}

// TestNewScriptedProvider checks that New builds the scripted model and
// ignores the settings meant for a real provider.
func TestNewScriptedProvider(t *testing.T) {
	m, err := New(Settings{Provider: "scripted", BaseURL: "http://unused.invalid", MaxTokensParam: "ignored",
		Script: &ScriptedSettings{Replies: []Reply{{Text: "hi"}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Generate(context.Background(), userCall("x"))
	if err != nil || res.Text() != "hi" {
		t.Fatalf("got %v, %v", res, err)
	}
}

// TestScriptedHoldStreamFromSettings checks that the llm section's hold_stream reaches the
// scripted model New builds: a refusal reply's chunks never reach the chunk callback, while an
// answer's do once it is known not to be declined; without hold_stream the refusal's chunks go
// out as they are made, as a provider streaming live would show them.
func TestScriptedHoldStreamFromSettings(t *testing.T) {
	script := &ScriptedSettings{Replies: []Reply{
		{Text: "I will not do that.", Chunks: []string{"I will ", "not do that."}, FinishReason: string(FinishRefusal)},
		{Text: "Done.", Chunks: []string{"Do", "ne."}},
	}, RepeatLast: new(bool)}
	for _, hold := range []bool{true, false} {
		m, err := New(Settings{Provider: "scripted", Script: script, HoldStream: hold})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		ctx := WithChunks(context.Background(), func(c string) { got = append(got, c) })
		res, err := m.Generate(ctx, &Call{Messages: []Message{{Role: RoleUser, Text: "go"}}})
		if err != nil || !res.Refusal {
			t.Fatalf("hold %v: %+v, %v; want the refusal", hold, res, err)
		}
		if hold && len(got) != 0 {
			t.Errorf("hold_stream: the refusal's chunks %q reached the callback", got)
		}
		if !hold && strings.Join(got, "") != "I will not do that." {
			t.Errorf("without hold_stream: chunks %q, want the refusal's as made", got)
		}
		got = nil
		if res, err := m.Generate(ctx, &Call{Messages: []Message{{Role: RoleUser, Text: "go"}}}); err != nil || strings.Join(got, "") != "Done." || res.Text() != "Done." {
			t.Errorf("hold %v: answer %+v, %v, chunks %q", hold, res, err, got)
		}
	}
}

// TestScriptedRefusalReasons checks that a scripted refusal's reason is its text (the model's
// refusal message), while a content_filter reply's text, the partial answer a filter stopped,
// is dropped as Chat Completions drops it: the reason is finish_reason content_filter.
func TestScriptedRefusalReasons(t *testing.T) {
	s, err := NewScripted(ScriptedSettings{Replies: []Reply{
		{Text: "I won't do that.", FinishReason: "refusal"},
		{Text: "PARTIAL answer the filter stopped", FinishReason: "content_filter", Chunks: []string{"PARTIAL ", "answer the filter stopped"}},
		{FinishReason: "refusal"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		finish FinishReason
		reason string
	}{
		{FinishRefusal, "I won't do that."},
		{FinishContentFilter, contentFilterReason},
		{FinishRefusal, "scripted refusal"},
	} {
		res, err := s.Generate(context.Background(), validCall())
		if err != nil {
			t.Fatal(err)
		}
		if !res.Refusal || res.FinishReason != want.finish || res.RefusalReason != want.reason || len(res.Blocks) != 0 || res.Chunks != nil {
			t.Errorf("result %+v, want a %s refusal with reason %q and nothing of its text", res, want.finish, want.reason)
		}
		if strings.Contains(res.RefusalReason, "PARTIAL") {
			t.Errorf("reason %q keeps the filtered text", res.RefusalReason)
		}
	}
}
