package model

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func validCall() *Call {
	return &Call{
		Messages: []Message{{Role: RoleUser, Text: "go"}},
		Controls: Controls{Model: "m"},
	}
}

// TestRequestRejectsBadCalls checks that every translator refuses a call it
// cannot express faithfully, with an error that says what is wrong.
func TestRequestRejectsBadCalls(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *Call)
		want   string
	}{
		{"no model", func(c *Call) { c.Controls.Model = "" }, "no model"},
		{"unknown role", func(c *Call) { c.Messages[0].Role = "system" }, `unknown role "system"`},
		{"empty user text", func(c *Call) { c.Messages[0].Text = "" }, "needs text"},
		{"user with tool calls", func(c *Call) {
			c.Messages[0].ToolCalls = []ToolCall{{ID: "1", Name: "t"}}
		}, "only text"},
		{"empty assistant", func(c *Call) {
			c.Messages = append(c.Messages, Message{Role: RoleAssistant})
		}, "needs text or tool calls"},
		{"tool call without id", func(c *Call) {
			c.Messages = append(c.Messages, Message{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "t"}}})
		}, "needs an id and a name"},
		{"tool call arguments not an object", func(c *Call) {
			c.Messages = append(c.Messages, Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "t", Arguments: json.RawMessage(`[1]`)}}})
		}, "not a JSON object"},
		{"tool message without results", func(c *Call) {
			c.Messages = append(c.Messages, Message{Role: RoleTool, Text: "x"})
		}, "tool results only"},
		{"tool result without call id", func(c *Call) {
			c.Messages = append(c.Messages, Message{Role: RoleTool, ToolResults: []ToolResult{{Content: "x"}}})
		}, "no call id"},
		{"tool without name", func(c *Call) { c.Tools = []Tool{{}} }, "has no name"},
		{"schema not an object", func(c *Call) {
			c.Tools = []Tool{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}
		}, "not a JSON object"},
	}
	translators := map[string]func(c *Call) ([]byte, error){
		"anthropic": func(c *Call) ([]byte, error) { return AnthropicRequest(c, Settings{}, false) },
		"openai":    func(c *Call) ([]byte, error) { return OpenAIChatRequest(c, "") },
		"responses": OpenAIResponsesRequest,
	}
	for name, build := range translators {
		if _, err := build(validCall()); err != nil {
			t.Fatalf("%s: valid call refused: %v", name, err)
		}
		if _, err := build(nil); err == nil {
			t.Errorf("%s: nil call accepted", name)
		}
		for _, tc := range cases {
			c := validCall()
			tc.change(c)
			_, err := build(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s/%s: got error %v, want one containing %q", name, tc.name, err, tc.want)
			}
		}
	}
}

func TestOpenAIChatRequestMaxTokensParam(t *testing.T) {
	c := validCall()
	c.Controls.MaxTokens = 7
	if _, err := OpenAIChatRequest(c, "max_output_tokens"); err == nil {
		t.Fatal("unknown max tokens parameter accepted")
	}
	body, err := OpenAIChatRequest(c, MaxCompletionTokensParam)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got["max_completion_tokens"] != 7.0 || got["max_tokens"] != nil {
		t.Fatalf("want only max_completion_tokens: 7, got %s", body)
	}
}

// TestResultRejectsMalformed checks that a response the translator cannot
// read fully is an error, never a silently partial result.
func TestResultRejectsMalformed(t *testing.T) {
	cases := []struct {
		name  string
		read  func([]byte, http.Header) (*Result, error)
		body  string
		error string
	}{
		{"anthropic not json", AnthropicResult, `<html>`, "anthropic response"},
		{"anthropic error body", AnthropicResult, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error: Overloaded"},
		{"anthropic wrong type", AnthropicResult, `{"type":"completion"}`, `type "completion"`},
		{"anthropic block without type", AnthropicResult, `{"type":"message","content":[{"text":"x"}],"stop_reason":"end_turn"}`, "content 0: a block without a type"},
		{"anthropic tool_use without id", AnthropicResult, `{"type":"message","content":[{"type":"tool_use","name":"t","input":{}}],"stop_reason":"tool_use"}`, "without id"},
		{"anthropic unknown stop", AnthropicResult, `{"type":"message","content":[],"stop_reason":"later"}`, `unknown stop_reason "later"`},
		{"chat not json", OpenAIChatResult, `nope`, "openai chat response"},
		{"chat error body", OpenAIChatResult, `{"error":{"message":"Rate limit reached"}}`, "Rate limit reached"},
		{"chat no choices", OpenAIChatResult, `{"choices":[]}`, "no choices"},
		{"chat tool call type", OpenAIChatResult, `{"choices":[{"message":{"tool_calls":[{"id":"1","type":"custom","function":{"name":"t"}}]},"finish_reason":"tool_calls"}]}`, `unsupported type "custom"`},
		{"chat tool call without name", OpenAIChatResult, `{"choices":[{"message":{"tool_calls":[{"id":"1","type":"function","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, "without id or name"},
		{"chat unknown finish", OpenAIChatResult, `{"choices":[{"message":{"content":"x"},"finish_reason":"paused"}]}`, `unknown finish_reason "paused"`},
		{"responses not json", OpenAIResponsesResult, `[]`, "openai responses response"},
		{"responses error body", OpenAIResponsesResult, `{"error":{"message":"Invalid model"}}`, "Invalid model"},
		{"responses unknown item", OpenAIResponsesResult, `{"object":"response","status":"completed","output":[{"type":"web_search_call"}]}`, `unknown item type "web_search_call"`},
		{"responses function_call without call_id", OpenAIResponsesResult, `{"object":"response","status":"completed","output":[{"type":"function_call","name":"t","arguments":"{}"}]}`, "without call_id"},
		{"responses unknown status", OpenAIResponsesResult, `{"object":"response","status":"queued","output":[]}`, `unknown status "queued"`},
		{"responses unknown incomplete", OpenAIResponsesResult, `{"object":"response","status":"incomplete","incomplete_details":{"reason":"other"},"output":[]}`, `unknown reason "other"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.read([]byte(tc.body), http.Header{})
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("got %+v, %v; want an error containing %q", res, err, tc.error)
			}
		})
	}
}

// TestResponsesContentFilter checks that an answer cut by a content filter
// is a refusal whose partial text is dropped.
func TestResponsesContentFilter(t *testing.T) {
	body := `{"object":"response","status":"incomplete","incomplete_details":{"reason":"content_filter"},
		"output":[{"type":"message","content":[{"type":"output_text","text":"partial"}]}]}`
	res, err := OpenAIResponsesResult([]byte(body), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Refusal || res.FinishReason != FinishContentFilter || len(res.Blocks) != 0 || res.Text() != "" {
		t.Fatalf("want a content_filter refusal without output, got %+v", res)
	}
}

// TestChatArguments covers the argument forms compatible servers send.
func TestChatArguments(t *testing.T) {
	cases := []struct {
		name, args string
		want       string // compact arguments, or "" for invalid
		raw        string
	}{
		{"object string", `"{\"a\": 1}"`, `{"a":1}`, `{"a": 1}`},
		{"empty string", `""`, `{}`, ``},
		{"object itself", `{"a":1}`, `{"a":1}`, ``},
		{"array string", `"[1]"`, ``, `[1]`},
		{"truncated string", `"{\"a\":"`, ``, `{"a":`},
		{"null object string", `"null"`, ``, `null`},
		{"number", `5`, ``, `5`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"t","arguments":` + tc.args + `}}]},"finish_reason":"tool_calls"}]}`
			res, err := OpenAIChatResult([]byte(body), http.Header{})
			if err != nil {
				t.Fatal(err)
			}
			calls := res.ToolCalls()
			if len(calls) != 1 {
				t.Fatalf("want one call, got %+v", res)
			}
			got := calls[0]
			if string(got.Arguments) != tc.want || got.Raw != tc.raw || got.ValidArguments() != (tc.want != "") {
				t.Fatalf("got arguments %q raw %q, want %q raw %q", got.Arguments, got.Raw, tc.want, tc.raw)
			}
		})
	}
}

func TestResultHelpers(t *testing.T) {
	res := &Result{Blocks: []Block{
		{Kind: BlockReasoning, Text: "think"},
		{Kind: BlockText, Text: "a"},
		{Kind: BlockToolCall, ToolCall: &ToolCall{ID: "1", Name: "t", Arguments: json.RawMessage(`{}`)}},
		{Kind: BlockText, Text: "b"},
	}}
	if res.Text() != "ab" {
		t.Fatalf("Text() = %q, want %q", res.Text(), "ab")
	}
	m := res.AssistantMessage()
	if m.Role != RoleAssistant || m.Text != "ab" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "1" {
		t.Fatalf("AssistantMessage() = %+v", m)
	}
}
