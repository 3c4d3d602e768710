package model

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Chat Completions wire types, limited to what the translator sends and
// reads. They serve every OpenAI-compatible provider.
type (
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	chatResponse struct {
		ID      string       `json:"id"`
		Model   string       `json:"model"`
		Choices []chatChoice `json:"choices"`
		Usage   chatUsage    `json:"usage"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	chatChoice struct {
		Message      chatReply `json:"message"`
		FinishReason string    `json:"finish_reason"`
	}
	// chatReply is the assistant message of a choice as the provider sent it.
	chatReply struct {
		Content          *string        `json:"content"`
		Refusal          *string        `json:"refusal"`
		ReasoningContent string         `json:"reasoning_content"`
		Reasoning        string         `json:"reasoning"`
		ToolCalls        []chatToolCall `json:"tool_calls"`
		// ProviderSpecificFields is where LiteLLM moves what is not Chat Completions,
		// a refusal among them (provider_specific_fields.refusal).
		ProviderSpecificFields json.RawMessage `json:"provider_specific_fields"`
	}
	chatUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		// TotalTokens should be the sum of the two; what it counts past them (all of it,
		// from a provider that reports only the total) counts as input tokens.
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		// CacheCreationInputTokens is LiteLLM's count of the prompt tokens written to
		// an Anthropic model's cache.
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		// Cost is OpenRouter's report of what the request cost.
		Cost float64 `json:"cost"`
	}
)

// The two names providers use for the output-token limit.
const (
	MaxTokensParam           = "max_tokens"
	MaxCompletionTokensParam = "max_completion_tokens"
)

// outputSchemaName is the name an output schema is sent under (response_format's
// json_schema.name, the Responses text.format's name).
const outputSchemaName = "output"

// OpenAIChatRequest builds a Chat Completions request body from c.
//
// The instructions become one system message. Tool calls are sent with
// their arguments as a JSON string, and each tool result as its own tool
// message. The output-token limit, when the call sets one, is sent under
// maxTokensParam: "max_tokens" (also when empty) or "max_completion_tokens".
// An output schema goes in response_format as a non-strict JSON Schema
// (strict mode would refuse schemas outside its subset).
func OpenAIChatRequest(c *Call, maxTokensParam string) ([]byte, error) {
	return chatRequest(c, maxTokensParam, false)
}

// chatRequest is OpenAIChatRequest, streamed when stream is set: the request
// then asks for server-sent events and for the usage in the last of them
// (stream_options.include_usage), without which a streamed answer's tokens
// and cost would be unknown.
func chatRequest(c *Call, maxTokensParam string, stream bool) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("openai chat request: %w", err)
	}
	if maxTokensParam == "" {
		maxTokensParam = MaxTokensParam
	}
	if maxTokensParam != MaxTokensParam && maxTokensParam != MaxCompletionTokensParam {
		return nil, fmt.Errorf("openai chat request: max tokens parameter %q: want %q or %q", maxTokensParam, MaxTokensParam, MaxCompletionTokensParam)
	}
	if len(c.Controls.OutputSchema) > 0 && !isObject(c.Controls.OutputSchema) {
		return nil, fmt.Errorf("openai chat request: the output schema is not a JSON object")
	}
	var msgs []chatMessage
	if len(c.Instructions) > 0 {
		msgs = append(msgs, chatMessage{Role: "system", Content: ptr(joinInstructions(c.Instructions))})
	}
	for _, m := range c.Messages {
		switch m.Role {
		case RoleUser:
			msgs = append(msgs, chatMessage{Role: "user", Content: ptr(m.Text)})
		case RoleAssistant:
			am := chatMessage{Role: "assistant"}
			if m.Text != "" {
				am.Content = ptr(m.Text)
			}
			for _, tc := range m.ToolCalls {
				w := chatToolCall{ID: tc.ID, Type: "function"}
				w.Function.Name = tc.Name
				args, _ := json.Marshal(argumentsText(tc))
				w.Function.Arguments = args
				am.ToolCalls = append(am.ToolCalls, w)
			}
			msgs = append(msgs, am)
		case RoleTool:
			for _, r := range m.ToolResults {
				msgs = append(msgs, chatMessage{Role: "tool", ToolCallID: r.CallID, Content: ptr(r.Content)})
			}
		}
	}
	req := map[string]any{"model": c.Controls.Model, "messages": msgs}
	if len(c.Tools) > 0 {
		tools := make([]chatTool, 0, len(c.Tools))
		for _, t := range c.Tools {
			w := chatTool{Type: "function"}
			w.Function.Name, w.Function.Description, w.Function.Parameters = t.Name, t.Description, t.inputSchema()
			tools = append(tools, w)
		}
		req["tools"] = tools
	}
	if c.Controls.MaxTokens > 0 {
		req[maxTokensParam] = c.Controls.MaxTokens
	}
	if c.Controls.Temperature != nil {
		req["temperature"] = *c.Controls.Temperature
	}
	if len(c.Controls.OutputSchema) > 0 {
		req["response_format"] = map[string]any{
			"type":        "json_schema",
			"json_schema": map[string]any{"name": outputSchemaName, "schema": c.Controls.OutputSchema, "strict": false},
		}
	}
	if stream {
		req["stream"] = true
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	return json.Marshal(req)
}

// OpenAIChatResult reads a Chat Completions response body into a Result,
// from its first choice.
//
// Tool-call arguments arrive as a JSON string that must parse to an object;
// when one does not, the call keeps the text in Raw with nil Arguments so
// the loop answers invalid_tool_arguments. The answer is a refusal, its
// partial output dropped and its usage kept, when the message's refusal
// field is set, when LiteLLM's provider_specific_fields.refusal is (LiteLLM
// moves the field there), or when finish_reason is content_filter (also how
// LiteLLM reports a Claude refusal). reasoning_content (DeepSeek, Qwen) and
// reasoning (OpenRouter) become a reasoning block. The request id comes
// from the x-request-id header, else the completion id; tool calls make the
// finish reason tool_calls even where a compatible server says stop;
// usage.cost, when the provider reports it (OpenRouter), is the cost. A
// usage.total_tokens larger than prompt_tokens and completion_tokens together
// (a provider that reports only the total) counts the difference as input
// tokens, so that the budgets count at least the total.
func OpenAIChatResult(body []byte, header http.Header) (*Result, error) {
	var resp chatResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("openai chat response: %w", err)
	}
	return chatResult(&resp, header, "openai chat response")
}

// chatResult reads a decoded Chat Completions response (received whole, or
// put together from a stream); what names the source in errors.
func chatResult(resp *chatResponse, header http.Header, what string) (*Result, error) {
	if resp.Error != nil {
		return nil, fmt.Errorf("%s: %s", what, resp.Error.Message)
	}
	if len(resp.Choices) == 0 {
		return nil, fmt.Errorf("%s: no choices", what)
	}
	choice := resp.Choices[0]
	msg := choice.Message
	res := &Result{
		Blocks: []Block{},
		Usage: Usage{
			InputTokens:      inputTokens(resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens),
			OutputTokens:     resp.Usage.CompletionTokens,
			CacheReadTokens:  resp.Usage.PromptTokensDetails.CachedTokens,
			CacheWriteTokens: resp.Usage.CacheCreationInputTokens,
			CostUSD:          resp.Usage.Cost,
		},
		Evidence: Evidence{RequestID: requestID(header, resp.ID, "x-request-id"), Model: resp.Model},
	}
	if res.Usage.CostUSD > 0 {
		res.Usage.CostSource = "provider"
	}
	if r := msg.ReasoningContent + msg.Reasoning; r != "" {
		res.Blocks = append(res.Blocks, Block{Kind: BlockReasoning, Text: r})
	}
	if msg.Content != nil && *msg.Content != "" {
		res.Blocks = append(res.Blocks, Block{Kind: BlockText, Text: *msg.Content})
	}
	for i, w := range msg.ToolCalls {
		if w.Type != "" && w.Type != "function" {
			return nil, fmt.Errorf("%s: tool call %d: unsupported type %q", what, i, w.Type)
		}
		if w.ID == "" || w.Function.Name == "" {
			return nil, fmt.Errorf("%s: tool call %d without id or name", what, i)
		}
		tc := &ToolCall{ID: w.ID, Name: w.Function.Name}
		var text string
		if err := json.Unmarshal(w.Function.Arguments, &text); err == nil {
			tc.Arguments, tc.Raw = parseArguments(text)
		} else if isObject(w.Function.Arguments) {
			// Some compatible servers send the object itself.
			tc.Arguments = compact(w.Function.Arguments)
		} else {
			tc.Raw = string(w.Function.Arguments)
		}
		res.Blocks = append(res.Blocks, Block{Kind: BlockToolCall, ToolCall: tc})
	}
	switch {
	case msg.Refusal != nil && *msg.Refusal != "":
		res.refuse(FinishRefusal, *msg.Refusal)
		return res, nil
	case litellmRefusal(msg.ProviderSpecificFields) != "":
		res.refuse(FinishRefusal, litellmRefusal(msg.ProviderSpecificFields))
		return res, nil
	case choice.FinishReason == "content_filter":
		res.refuse(FinishContentFilter, contentFilterReason)
		return res, nil
	}
	switch choice.FinishReason {
	case "stop", "tool_calls", "function_call":
		// Some compatible servers (Ollama among them) say stop after tool
		// calls; the calls decide.
		res.FinishReason = FinishStop
		if len(msg.ToolCalls) > 0 {
			res.FinishReason = FinishToolCalls
		}
	case "length":
		res.FinishReason = FinishLength
	default:
		return nil, fmt.Errorf("%s: unknown finish_reason %q", what, choice.FinishReason)
	}
	return res, nil
}

// contentFilterReason is the refusal reason of finish_reason content_filter.
const contentFilterReason = "finish_reason content_filter: a content filter stopped the answer " +
	"(LiteLLM also reports a model's refusal this way)"

// litellmRefusal returns the refusal in LiteLLM's provider_specific_fields, or
// "" when there is none: its text when it is one, else a note that the field
// is set (LiteLLM passes on whatever the provider sent).
func litellmRefusal(fields json.RawMessage) string {
	var f struct {
		Refusal json.RawMessage `json:"refusal"`
	}
	if len(fields) == 0 || json.Unmarshal(fields, &f) != nil {
		return ""
	}
	var text string
	switch raw := strings.TrimSpace(string(f.Refusal)); {
	case raw == "", raw == "null", raw == "false", raw == `""`:
		return ""
	case json.Unmarshal(f.Refusal, &text) == nil:
		return text
	default:
		return "provider_specific_fields.refusal: " + string(compact(f.Refusal))
	}
}

func ptr[T any](v T) *T { return &v }

// inputTokens is the input tokens a usage counts: the input (prompt) tokens, plus what the
// total counts past input and output together, if anything. A provider reporting only
// total_tokens has its total counted as input; one whose total includes tokens the two
// leave out (reasoning, say) has them counted too.
func inputTokens(input, output, total int) int {
	if extra := total - input - output; extra > 0 {
		return input + extra
	}
	return input
}
