package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The Messages settings' values (AnthropicSettings) and what they send.
const (
	// ThinkingAdaptive (the default) sends thinking {"type": "adaptive"}: the model decides
	// when and how much to think, between tool calls too.
	ThinkingAdaptive = "adaptive"
	// ThinkingNone omits the thinking parameter.
	ThinkingNone = "none"
	// FallbacksDefault (the default) sends "fallbacks": "default" with the
	// FallbackBeta header: a request the model declines is re-run server-side on the
	// fallback model Anthropic recommends for its refusal category.
	FallbacksDefault = "default"
	// FallbacksNone sends neither (for gateways that reject beta parameters).
	FallbacksNone = "none"
	// FallbackBeta is the anthropic-beta header value server-side fallbacks need.
	FallbackBeta = "server-side-fallback-2026-07-01"
	// DefaultAnthropicStreamMaxTokens is the output limit of a streamed Messages
	// request when neither the call nor stream_max_tokens sets one.
	DefaultAnthropicStreamMaxTokens = 64000
)

// anthropicEfforts are the values of output_config.effort.
var anthropicEfforts = []string{"low", "medium", "high", "xhigh", "max"}

// BlockOpaque is a provider's output block the canonical model has no kind for: on the
// Messages wire a fallback boundary (where one model's output gives way to the fallback's)
// or a block type this translator does not know. Data holds the block exactly as the
// provider sent it, so that the provider's translator replays it in place; Text,
// ToolCalls and Reasoning skip it and the other translators drop it.
const BlockOpaque BlockKind = "opaque"

// The Messages request body, limited to what the translator sends.
type (
	anthropicRequest struct {
		Model        string                 `json:"model"`
		MaxTokens    int                    `json:"max_tokens"`
		System       string                 `json:"system,omitempty"`
		Messages     []anthropicMessage     `json:"messages"`
		Tools        []anthropicTool        `json:"tools,omitempty"`
		Temperature  *float64               `json:"temperature,omitempty"`
		Thinking     *anthropicThinking     `json:"thinking,omitempty"`
		OutputConfig *anthropicOutputConfig `json:"output_config,omitempty"`
		Fallbacks    string                 `json:"fallbacks,omitempty"`
		Stream       bool                   `json:"stream,omitempty"`
	}
	anthropicThinking struct {
		Type string `json:"type"`
	}
	anthropicOutputConfig struct {
		Effort string                 `json:"effort,omitempty"`
		Format *anthropicOutputFormat `json:"format,omitempty"`
	}
	anthropicOutputFormat struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	anthropicMessage struct {
		Role string `json:"role"`
		// Content holds each block's JSON: replayed blocks must go back exactly as they
		// came, empty fields included (a thinking block's "thinking" may be "").
		Content []json.RawMessage `json:"content"`
	}
	anthropicTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

// The content blocks the translator writes, one type each so that no field is dropped.
type (
	anthropicText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	anthropicThinkingBlock struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	anthropicRedacted struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	anthropicToolUse struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	anthropicToolResult struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
		Content   string `json:"content"`
		IsError   bool   `json:"is_error,omitempty"`
	}
)

// messagesWire is the Messages API (anthropic), configured by the Messages settings.
type messagesWire struct {
	maxTokens       int
	streamMaxTokens int
	s               AnthropicSettings
}

// newMessagesWire checks the Messages settings of s (SettingErrors keyed by the llm
// section's names) and returns the wire. The output limit of a request that sets none is
// s.MaxTokens, else DefaultAnthropicMaxTokens; of a streamed one StreamMaxTokens, else
// DefaultAnthropicStreamMaxTokens.
func newMessagesWire(s Settings) (wireFormat, error) {
	a := s.Anthropic
	if s.Provider == "" {
		s.Provider = "anthropic"
	}
	var errs SettingErrors
	switch a.Thinking {
	case "", ThinkingAdaptive, ThinkingNone:
	default:
		errs = append(errs, &SettingError{Key: "thinking", Msg: fmt.Sprintf("%q is not a thinking mode of provider %s: want %s (the default) or %s", a.Thinking, s.Provider, ThinkingAdaptive, ThinkingNone)})
	}
	if a.Effort != "" && !slices.Contains(anthropicEfforts, a.Effort) {
		errs = append(errs, &SettingError{Key: "effort", Msg: fmt.Sprintf("%q is not an effort of provider %s: want one of %s, or leave it out for the model's default", a.Effort, s.Provider, strings.Join(anthropicEfforts, ", "))})
	}
	switch a.Fallbacks {
	case "", FallbacksDefault, FallbacksNone:
	default:
		errs = append(errs, &SettingError{Key: "fallbacks", Msg: fmt.Sprintf("%q is not a fallbacks mode of provider %s: want %s (server-side refusal fallbacks, the default) or %s", a.Fallbacks, s.Provider, FallbacksDefault, FallbacksNone)})
	}
	if a.Sampling && a.Thinking != ThinkingNone {
		errs = append(errs, &SettingError{Key: "sampling", Msg: fmt.Sprintf("provider %s refuses temperature while thinking is on (thinking defaults to %s): set thinking: %s too, for an older model that takes sampling parameters", s.Provider, ThinkingAdaptive, ThinkingNone)})
	}
	if a.StreamMaxTokens < 0 {
		errs = append(errs, &SettingError{Key: "stream_max_tokens", Msg: fmt.Sprintf("%d is negative: give a positive output limit, or leave it out for %d", a.StreamMaxTokens, DefaultAnthropicStreamMaxTokens)})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	w := &messagesWire{maxTokens: s.MaxTokens, streamMaxTokens: a.StreamMaxTokens, s: a}
	if w.maxTokens <= 0 {
		w.maxTokens = DefaultAnthropicMaxTokens
	}
	if w.streamMaxTokens == 0 {
		w.streamMaxTokens = DefaultAnthropicStreamMaxTokens
	}
	return w, nil
}

func (w *messagesWire) result(body []byte, h http.Header) (*Result, error) {
	return AnthropicResult(body, h)
}

func (w *messagesWire) stream() streamDecoder { return &messagesStream{} }

// header sends the server-side fallback beta unless fallbacks are off.
func (w *messagesWire) header() http.Header {
	if w.s.Fallbacks == FallbacksNone {
		return nil
	}
	return http.Header{"Anthropic-Beta": {FallbackBeta}}
}

// AnthropicRequest builds the Messages API request body the anthropic provider sends for c
// with settings s, whose Messages settings it checks as New does (it reads s.Provider,
// s.MaxTokens and s.Anthropic); stream asks for a streamed answer.
//
// The instructions become the system prompt. Tool messages become user messages of
// tool_result blocks (is_error set for failures); a following user message joins the same
// user turn, because the API wants every result of a turn in the one user message after
// the tool calls. An assistant message with Blocks (Result.AssistantMessage) is sent as
// those blocks, unchanged and in order: thinking with its signature, redacted_thinking with
// its data, text, tool_use and opaque blocks (a fallback boundary, a declined model's output
// before it) as the API sent them, so that reasoning carries over a tool loop; one without
// Blocks sends its text, then its tool calls. A declined model's tool_use blocks sent back
// were never run: the user turn after them answers each with a failed tool_result saying so
// (notRunResult), ahead of the results of the calls that ran. max_tokens is always sent: the call's MaxTokens, else s.MaxTokens or
// DefaultAnthropicMaxTokens, or for a streamed request StreamMaxTokens or
// DefaultAnthropicStreamMaxTokens. thinking, output_config (effort, the output schema as
// the structured output format), fallbacks and temperature follow the settings (see
// AnthropicSettings); an output schema without structured_outputs is asked for in the
// system prompt.
func AnthropicRequest(c *Call, s Settings, stream bool) ([]byte, error) {
	w, err := newMessagesWire(s)
	if err != nil {
		return nil, err
	}
	return w.request(c, stream)
}

func (w *messagesWire) request(c *Call, stream bool) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	req := anthropicRequest{
		Model:     c.Controls.Model,
		MaxTokens: c.Controls.MaxTokens,
		System:    joinInstructions(c.Instructions),
		Messages:  []anthropicMessage{},
		Stream:    stream,
	}
	if req.MaxTokens <= 0 {
		req.MaxTokens = w.maxTokens
		if stream {
			req.MaxTokens = w.streamMaxTokens
		}
	}
	if w.s.Sampling {
		req.Temperature = c.Controls.Temperature
	}
	if w.s.Thinking != ThinkingNone {
		req.Thinking = &anthropicThinking{Type: ThinkingAdaptive}
	}
	if w.s.Fallbacks != FallbacksNone {
		req.Fallbacks = FallbacksDefault
	}
	if w.s.Effort != "" {
		req.OutputConfig = &anthropicOutputConfig{Effort: w.s.Effort}
	}
	if len(c.Controls.OutputSchema) > 0 {
		if !isObject(c.Controls.OutputSchema) {
			return nil, fmt.Errorf("anthropic request: the output schema is not a JSON object")
		}
		if w.s.StructuredOutputs {
			if req.OutputConfig == nil {
				req.OutputConfig = &anthropicOutputConfig{}
			}
			req.OutputConfig.Format = &anthropicOutputFormat{Type: "json_schema", Schema: c.Controls.OutputSchema}
		} else {
			req.System = joinInstructions(append(c.Instructions[:len(c.Instructions):len(c.Instructions)], schemaInstruction(c.Controls.OutputSchema)))
		}
	}
	var unrun []string
	for _, m := range c.Messages {
		role, blocks, calls, err := anthropicBlocks(m)
		if err != nil {
			return nil, fmt.Errorf("anthropic request: %w", err)
		}
		if role == "user" && len(unrun) > 0 {
			blocks = append(notRun(unrun), blocks...)
		}
		unrun = calls
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
			continue
		}
		req.Messages = append(req.Messages, anthropicMessage{Role: role, Content: blocks})
	}
	for _, t := range c.Tools {
		req.Tools = append(req.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.inputSchema()})
	}
	return marshalVerbatim(req)
}

// schemaInstruction asks for an answer meeting schema, for when the schema is not sent as
// the API's structured output format.
func schemaInstruction(schema json.RawMessage) string {
	return "Answer with a single JSON value that conforms to this JSON Schema, and nothing else:\n" + string(compact(schema))
}

// anthropicBlocks returns the wire role and content blocks of one message, and for a
// replayed answer the ids of the tool_use blocks it sends back that the loop did not run
// (a declined model's, before a fallback block).
func anthropicBlocks(m Message) (string, []json.RawMessage, []string, error) {
	var blocks []any
	switch m.Role {
	case RoleTool:
		for _, r := range m.ToolResults {
			blocks = append(blocks, anthropicToolResult{Type: "tool_result", ToolUseID: r.CallID, Content: r.Content, IsError: r.IsError})
		}
		return marshalBlocks("user", blocks)
	case RoleAssistant:
		if replayed, unrun := replayBlocks(m.Blocks); len(replayed) > 0 {
			return "assistant", replayed, unrun, nil
		}
		if m.Text != "" {
			blocks = append(blocks, anthropicText{Type: "text", Text: m.Text})
		}
		for _, tc := range m.ToolCalls {
			blocks = append(blocks, toolUse(tc))
		}
		return marshalBlocks("assistant", blocks)
	default:
		return marshalBlocks("user", []any{anthropicText{Type: "text", Text: m.Text}})
	}
}

// notRunResult is the tool result sent for a tool_use block the loop did not run.
const notRunResult = "not run: the model that asked for this call declined the request, and a fallback model answered in its place"

// notRun answers the tool_use blocks a replayed answer sends back but the loop did not run
// (a declined model's), as failed tool results: the API wants every tool_use answered in
// the user turn that follows.
func notRun(ids []string) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(ids))
	for _, id := range ids {
		raw, _ := marshalVerbatim(anthropicToolResult{Type: "tool_result", ToolUseID: id, Content: notRunResult, IsError: true})
		out = append(out, raw)
	}
	return out
}

// replayBlocks returns an answer's blocks as the API sent them: a block's JSON as received
// (Block.Raw) when it has one, else one written from its fields (a streamed answer's
// blocks, or blocks built by hand). Blocks the API would refuse back are left out: empty text, reasoning without a
// signature (another provider's, or a stream cut before its signature) and redacted
// reasoning without data, and the same in opaque form. Nil means nothing to replay, so
// the message's Text and ToolCalls are sent instead. unrun lists the ids of the opaque
// tool_use blocks sent back: calls of a model that declined, which the loop never ran.
func replayBlocks(in []Block) (out []json.RawMessage, unrun []string) {
	for _, b := range in {
		var v any
		switch b.Kind {
		case BlockText:
			if b.Text == "" {
				continue
			}
			v = anthropicText{Type: "text", Text: b.Text}
		case BlockReasoning:
			switch {
			case b.Redacted && b.Data != "":
				v = anthropicRedacted{Type: "redacted_thinking", Data: b.Data}
			case b.Signature != "":
				v = anthropicThinkingBlock{Type: "thinking", Thinking: b.Text, Signature: b.Signature}
			default:
				continue
			}
		case BlockToolCall:
			if b.ToolCall == nil {
				continue
			}
			if !b.ToolCall.ValidArguments() {
				// The API only takes an object back: send {} rather than what it sent.
				b.Raw = nil
			}
			v = toolUse(*b.ToolCall)
		case BlockOpaque:
			var head anthropicContent
			if !isObject([]byte(b.Data)) || json.Unmarshal([]byte(b.Data), &head) != nil || refusedBack(head) {
				continue
			}
			if head.Type == "tool_use" && head.ID != "" {
				unrun = append(unrun, head.ID)
			}
			out = append(out, json.RawMessage(b.Data))
			continue
		default:
			continue
		}
		if isObject(b.Raw) {
			out = append(out, b.Raw)
			continue
		}
		raw, err := marshalVerbatim(v)
		if err != nil {
			continue
		}
		out = append(out, raw)
	}
	return out, unrun
}

// refusedBack reports whether the API would refuse an opaque block sent back: a declined
// model's empty text, or its thinking without a signature.
func refusedBack(b anthropicContent) bool {
	switch b.Type {
	case "text":
		return b.Text == ""
	case "thinking":
		return b.Signature == ""
	case "redacted_thinking":
		return b.Data == ""
	}
	return false
}

// toolUse is the tool_use block of a call. The API only takes an object; a call whose
// arguments did not parse was already answered by an invalid_tool_arguments result.
func toolUse(tc ToolCall) anthropicToolUse {
	input := tc.Arguments
	if input == nil {
		input = json.RawMessage(`{}`)
	}
	return anthropicToolUse{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input}
}

func marshalBlocks(role string, blocks []any) (string, []json.RawMessage, []string, error) {
	out := make([]json.RawMessage, 0, len(blocks))
	for _, b := range blocks {
		raw, err := marshalVerbatim(b)
		if err != nil {
			return "", nil, nil, err
		}
		out = append(out, raw)
	}
	return role, out, nil, nil
}

// marshalVerbatim is json.Marshal without HTML escaping, so that text the API sent (a
// thinking block's "<" and "&", say) goes back byte for byte.
func marshalVerbatim(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// refuse marks the result declined, with why as its reason, and drops its
// output: a declined or filtered answer's partial text (blocks and streamed
// chunks) is never passed on.
func (r *Result) refuse(reason FinishReason, why string) {
	r.Refusal = true
	r.FinishReason = reason
	r.RefusalReason = why
	r.Blocks = []Block{}
	r.Chunks = nil
}
