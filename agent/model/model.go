// Package model holds the agent's canonical model call and result, and the
// pure translators between them and each provider wire format: the Anthropic
// Messages API, OpenAI Chat Completions (also spoken by OpenRouter, DeepSeek,
// Qwen, MiMo and Ollama) and the OpenAI Responses API.
//
// A translator is a pair of functions without I/O: one builds the request
// body from a Call, the other reads a response body (and its headers) into a
// Result. Sending the body is the transport's job, so each side is tested
// against recorded provider payloads in testdata/.
package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Role says who wrote a Message.
type Role string

// The roles of a conversation. System instructions are not messages: they
// travel in Call.Instructions, because every wire format places them apart.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Call is one request to a model, independent of provider.
type Call struct {
	// Instructions are the system instructions, in order. Translators join
	// them with a blank line ("\n\n").
	Instructions []string `json:"instructions,omitempty"`
	// Messages is the conversation so far, oldest first.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call.
	Tools []Tool `json:"tools,omitempty"`
	// Controls are the provider-neutral generation settings.
	Controls Controls `json:"controls"`
}

// Message is one turn of the conversation.
//
// A user message carries Text. An assistant message carries Text, ToolCalls
// or both. A tool message carries ToolResults (at least one), answering the
// tool calls of the assistant message before it.
type Message struct {
	Role        Role         `json:"role"`
	Text        string       `json:"text,omitempty"`
	ToolCalls   []ToolCall   `json:"tool_calls,omitempty"`
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	// Blocks, on an assistant message, is the answer's output exactly as the model gave it
	// (Result.Blocks), reasoning included. Translators that can replay it do so unchanged
	// (Messages: thinking and redacted-thinking blocks with their signatures, so reasoning
	// carries over a tool loop); the others send Text and ToolCalls and drop the reasoning.
	Blocks []Block `json:"blocks,omitempty"`
}

// ToolCall is a model's request to run one tool.
type ToolCall struct {
	// ID is the provider's id for the call; the ToolResult that answers it
	// carries the same id in CallID.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is a JSON object, or nil when the model sent arguments
	// that do not parse to one. In that case Raw holds what it sent and the
	// loop answers the call with an invalid_tool_arguments failure instead
	// of running the tool.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Raw is the argument text exactly as the provider sent it, when the
	// wire format sends arguments as text; empty otherwise.
	Raw string `json:"raw,omitempty"`
}

// ValidArguments reports whether the call's arguments parsed to a JSON
// object, so the tool may run.
func (tc ToolCall) ValidArguments() bool { return tc.Arguments != nil }

// ToolResult is the outcome of one tool call, sent back to the model.
type ToolResult struct {
	// CallID is the ToolCall.ID this result answers.
	CallID string `json:"call_id"`
	// Name is the tool's name; Chat Completions does not need it, but the
	// transcript does.
	Name    string `json:"name,omitempty"`
	Content string `json:"content"`
	// IsError marks a failed call. Formats that carry the flag (Anthropic's
	// is_error) get it; the others rely on Content saying so, which the
	// gateway's result envelope does ("success": false).
	IsError bool `json:"is_error,omitempty"`
}

// Tool is a tool the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the arguments object. Empty means
	// an object with any properties.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Controls are generation settings every provider understands.
type Controls struct {
	// Model is the provider's model id. Translators require it: the provider
	// layer fills in the configured default.
	Model string `json:"model"`
	// MaxTokens caps the output tokens; zero leaves it to the provider
	// (or, for Anthropic, which requires one, to the translator's default).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature is sent only when set (Anthropic: only with sampling).
	Temperature *float64 `json:"temperature,omitempty"`
	// OutputSchema, when set, is the JSON Schema the answer's text must meet (structured
	// output). Chat Completions sends it as response_format; Messages as its structured
	// output format with structured_outputs, else in the system prompt.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// BlockKind says what an output Block holds.
type BlockKind string

// The kinds of output block.
const (
	BlockText      BlockKind = "text"
	BlockReasoning BlockKind = "reasoning"
	BlockToolCall  BlockKind = "tool_call"
)

// Block is one piece of a model's output, in the order the model produced it.
// Text and reasoning blocks carry Text; a tool-call block carries ToolCall.
type Block struct {
	Kind     BlockKind `json:"kind"`
	Text     string    `json:"text,omitempty"`
	ToolCall *ToolCall `json:"tool_call,omitempty"`
	// Signature is the provider's signature of a reasoning block (Messages thinking), which
	// must come back unchanged when the block is replayed.
	Signature string `json:"signature,omitempty"`
	// Redacted marks reasoning the provider encrypted (Messages redacted_thinking): Text is
	// empty and Data holds the opaque payload to replay.
	Redacted bool   `json:"redacted,omitempty"`
	Data     string `json:"data,omitempty"`
	// Raw is the provider's block as received (a Messages content block's JSON, unknown
	// fields and escapes included), replayed by the wire that produced it instead of a
	// block rebuilt from the fields; nil for a block built from a stream's events or by
	// hand. It lives only in memory, for the tool loop's next request: transcripts and
	// --record files leave it out.
	Raw json.RawMessage `json:"-"`
}

// FinishReason says why the model stopped, mapped from each provider's own
// vocabulary.
type FinishReason string

// The canonical finish reasons.
const (
	// FinishStop: the model ended its answer.
	FinishStop FinishReason = "stop"
	// FinishToolCalls: the model wants tools run before it continues.
	FinishToolCalls FinishReason = "tool_calls"
	// FinishLength: the output hit the token limit; the answer is cut short.
	FinishLength FinishReason = "length"
	// FinishRefusal: the model declined the request.
	FinishRefusal FinishReason = "refusal"
	// FinishContentFilter: a provider filter stopped or cut the output.
	FinishContentFilter FinishReason = "content_filter"
	// FinishError: the provider reported that generation failed.
	FinishError FinishReason = "error"
)

// Usage is what a request consumed.
type Usage struct {
	// InputTokens counts every input token, those read from the cache
	// included.
	InputTokens int `json:"input_tokens"`
	// OutputTokens counts generated tokens, reasoning included.
	OutputTokens int `json:"output_tokens"`
	// CacheReadTokens is the part of InputTokens served from the provider's
	// prompt cache.
	CacheReadTokens int `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens is the part of InputTokens written to the provider's
	// prompt cache (Messages cache_creation_input_tokens).
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	// CostUSD is what the request cost: reported by the provider (a cost
	// header such as x-litellm-response-cost, or a cost in the body), else
	// priced from llm.prices; zero when neither knows.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// CostSource says where CostUSD came from: "header", "provider",
	// "prices" or "scripted"; empty when the cost is unknown.
	CostSource string `json:"cost_source,omitempty"`
}

// Evidence identifies the request at the provider, for audit and support.
type Evidence struct {
	// RequestID is the provider's request id: from its response header when
	// it sends one, otherwise the id in the response body.
	RequestID string `json:"request_id,omitempty"`
	// Model is the model that actually answered, as the provider names it
	// (after a fallback, the fallback's).
	Model string `json:"model,omitempty"`
	// InvocationID is the loop's own id of the model request, unique per
	// request (the agent sets it; see WithInvocationID).
	InvocationID string `json:"invocation_id,omitempty"`
	// Warnings are what the provider or the translator noted about the
	// request (a setting the model ignored, a fallback that ran, …).
	Warnings []string `json:"warnings,omitempty"`
}

// Result is a model's answer to one Call.
type Result struct {
	// Blocks is the output in order. When Refusal is true it is empty: a
	// declined answer's partial output is never passed on.
	Blocks       []Block      `json:"blocks"`
	FinishReason FinishReason `json:"finish_reason"`
	// Refusal is true when the model declined (a refusal field or stop
	// reason) or a content filter stopped it; the loop ends the run with
	// model_refusal. Its tokens still count in Usage.
	Refusal bool `json:"refusal,omitempty"`
	// RefusalReason is the provider's explanation when Refusal is true: the
	// refusal text if the model wrote one, otherwise the signal seen.
	RefusalReason string `json:"refusal_reason,omitempty"`
	// RefusalCategory is the policy area of a refusal when the provider
	// names one (Messages stop_details.category), after any fallbacks.
	RefusalCategory string `json:"refusal_category,omitempty"`
	// Chunks is the answer's text as it was streamed (a streamed provider's
	// text deltas, a scripted reply's chunks); nil when it was not. Their
	// concatenation is Text(). Empty for a refusal, like Blocks.
	Chunks []string `json:"chunks,omitempty"`
	// Error is the provider's message when FinishReason is FinishError.
	Error    string   `json:"error,omitempty"`
	Usage    Usage    `json:"usage"`
	Evidence Evidence `json:"evidence"`
}

// Text returns the text blocks joined, without reasoning.
func (r *Result) Text() string {
	var parts []string
	for _, b := range r.Blocks {
		if b.Kind == BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "")
}

// ToolCalls returns the tool calls in the order the model made them.
func (r *Result) ToolCalls() []ToolCall {
	var calls []ToolCall
	for _, b := range r.Blocks {
		if b.Kind == BlockToolCall && b.ToolCall != nil {
			calls = append(calls, *b.ToolCall)
		}
	}
	return calls
}

// Reasoning returns the readable reasoning blocks' text joined with a blank
// line; redacted reasoning has none.
func (r *Result) Reasoning() string {
	var parts []string
	for _, b := range r.Blocks {
		if b.Kind == BlockReasoning && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// AssistantMessage returns the result as the assistant message to append to
// the conversation for the next turn, with its blocks for the translators
// that replay them (see Message.Blocks). A result with neither text nor
// tool calls (a refusal, an empty answer) gives a message the translators
// refuse: such a result ends the loop instead.
func (r *Result) AssistantMessage() Message {
	return Message{Role: RoleAssistant, Text: r.Text(), ToolCalls: r.ToolCalls(), Blocks: r.Blocks}
}

// joinInstructions joins system instructions the way every translator does.
func joinInstructions(in []string) string { return strings.Join(in, "\n\n") }

// validate checks what every translator needs from a call.
func (c *Call) validate() error {
	if c == nil {
		return fmt.Errorf("no call")
	}
	if c.Controls.Model == "" {
		return fmt.Errorf("no model named in the call's controls")
	}
	for i, m := range c.Messages {
		switch m.Role {
		case RoleUser:
			if len(m.ToolCalls) > 0 || len(m.ToolResults) > 0 {
				return fmt.Errorf("message %d: a user message carries only text", i)
			}
			if m.Text == "" {
				return fmt.Errorf("message %d: a user message needs text", i)
			}
		case RoleAssistant:
			if len(m.ToolResults) > 0 {
				return fmt.Errorf("message %d: an assistant message cannot carry tool results", i)
			}
			if m.Text == "" && len(m.ToolCalls) == 0 {
				return fmt.Errorf("message %d: an assistant message needs text or tool calls", i)
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return fmt.Errorf("message %d: tool call %d needs an id and a name", i, j)
				}
				if tc.Arguments != nil && !isObject(tc.Arguments) {
					return fmt.Errorf("message %d: tool call %q: arguments are not a JSON object (keep invalid text in Raw)", i, tc.ID)
				}
			}
		case RoleTool:
			if len(m.ToolResults) == 0 || m.Text != "" || len(m.ToolCalls) > 0 {
				return fmt.Errorf("message %d: a tool message carries tool results only", i)
			}
			for j, tr := range m.ToolResults {
				if tr.CallID == "" {
					return fmt.Errorf("message %d: tool result %d has no call id", i, j)
				}
			}
		default:
			return fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for i, t := range c.Tools {
		if t.Name == "" {
			return fmt.Errorf("tool %d has no name", i)
		}
		if len(t.InputSchema) > 0 && !isObject(t.InputSchema) {
			return fmt.Errorf("tool %q: input schema is not a JSON object", t.Name)
		}
	}
	return nil
}

// inputSchema returns the tool's schema, or the schema of any object.
func (t Tool) inputSchema() json.RawMessage {
	if len(t.InputSchema) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return t.InputSchema
}

// isObject reports whether raw is a single JSON object.
func isObject(raw []byte) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(raw, &v) == nil && v != nil
}

// parseArguments turns arguments sent as text into a ToolCall's fields:
// Arguments set when the text is a JSON object, nil otherwise; Raw always
// the text as sent. Empty text means a call without arguments.
func parseArguments(raw string) (json.RawMessage, string) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return json.RawMessage(`{}`), raw
	}
	if !isObject([]byte(trimmed)) {
		return nil, raw
	}
	return compact([]byte(trimmed)), raw
}

// argumentsText is the text form of a call's arguments for formats that
// send them as a string: the arguments when valid, else the raw text the
// model sent, so the model sees its own mistake replayed.
func argumentsText(tc ToolCall) string {
	if tc.Arguments != nil {
		return string(compact(tc.Arguments))
	}
	if tc.Raw != "" {
		return tc.Raw
	}
	return "{}"
}

// compact strips insignificant space from valid JSON, so equal arguments
// look the same whichever provider sent them.
func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return json.RawMessage(raw)
	}
	return json.RawMessage(b.Bytes())
}

// requestID returns the first of the named headers that is set, else the
// id from the response body.
func requestID(h http.Header, bodyID string, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return bodyID
}
