package model

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The Anthropic Messages API wire types, limited to what the translator
// sends and reads.
type (
	anthropicRequest struct {
		Model       string             `json:"model"`
		MaxTokens   int                `json:"max_tokens"`
		System      string             `json:"system,omitempty"`
		Messages    []anthropicMessage `json:"messages"`
		Tools       []anthropicTool    `json:"tools,omitempty"`
		Temperature *float64           `json:"temperature,omitempty"`
	}
	anthropicMessage struct {
		Role    string           `json:"role"`
		Content []anthropicBlock `json:"content"`
	}
	anthropicBlock struct {
		Type string `json:"type"`
		// text
		Text string `json:"text,omitempty"`
		// thinking
		Thinking string `json:"thinking,omitempty"`
		// tool_use
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
		// tool_result
		ToolUseID string `json:"tool_use_id,omitempty"`
		Content   string `json:"content,omitempty"`
		IsError   bool   `json:"is_error,omitempty"`
	}
	anthropicTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	anthropicResponse struct {
		ID         string           `json:"id"`
		Type       string           `json:"type"`
		Model      string           `json:"model"`
		Content    []anthropicBlock `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      struct {
			InputTokens              int `json:"input_tokens"`
			OutputTokens             int `json:"output_tokens"`
			CacheReadInputTokens     int `json:"cache_read_input_tokens"`
			CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// AnthropicRequest builds a Messages API request body from c.
//
// The instructions become the system prompt. Tool messages become user
// messages of tool_result blocks (is_error set for failures); a following
// user message joins the same user turn, because the API wants every result
// of a turn in the one user message after the tool calls. max_tokens is
// always sent: the call's MaxTokens, else defaultMaxTokens, and it is an
// error when neither is positive.
func AnthropicRequest(c *Call, defaultMaxTokens int) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("anthropic request: %w", err)
	}
	req := anthropicRequest{
		Model:       c.Controls.Model,
		MaxTokens:   c.Controls.MaxTokens,
		System:      joinInstructions(c.Instructions),
		Messages:    []anthropicMessage{},
		Temperature: c.Controls.Temperature,
	}
	if req.MaxTokens <= 0 {
		req.MaxTokens = defaultMaxTokens
	}
	if req.MaxTokens <= 0 {
		return nil, fmt.Errorf("anthropic request: max_tokens is required: set the call's MaxTokens or a positive default")
	}
	for _, m := range c.Messages {
		role, blocks := anthropicBlocks(m)
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
			continue
		}
		req.Messages = append(req.Messages, anthropicMessage{Role: role, Content: blocks})
	}
	for _, t := range c.Tools {
		req.Tools = append(req.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: t.inputSchema()})
	}
	return json.Marshal(req)
}

// anthropicBlocks returns the wire role and content blocks of one message.
func anthropicBlocks(m Message) (string, []anthropicBlock) {
	var blocks []anthropicBlock
	switch m.Role {
	case RoleTool:
		for _, r := range m.ToolResults {
			blocks = append(blocks, anthropicBlock{Type: "tool_result", ToolUseID: r.CallID, Content: r.Content, IsError: r.IsError})
		}
		return "user", blocks
	case RoleAssistant:
		if m.Text != "" {
			blocks = append(blocks, anthropicBlock{Type: "text", Text: m.Text})
		}
		for _, tc := range m.ToolCalls {
			input := tc.Arguments
			if input == nil {
				// The API only takes an object; the model's invalid text
				// was already answered by an invalid_tool_arguments result.
				input = json.RawMessage(`{}`)
			}
			blocks = append(blocks, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
		}
		return "assistant", blocks
	default:
		return "user", []anthropicBlock{{Type: "text", Text: m.Text}}
	}
}

// AnthropicResult reads a Messages API response body into a Result.
//
// Stop reasons map end_turn and stop_sequence to stop, tool_use to
// tool_calls, max_tokens and model_context_window_exceeded to length, and
// refusal to a refusal. Thinking blocks become reasoning blocks. Input
// tokens add the cache reads and writes the API counts apart. The request
// id comes from the request-id header, else the message id.
func AnthropicResult(body []byte, header http.Header) (*Result, error) {
	var resp anthropicResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("anthropic response: %w", err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("anthropic response: %s: %s", resp.Error.Type, resp.Error.Message)
	}
	if resp.Type != "message" {
		return nil, fmt.Errorf("anthropic response: type %q, want \"message\"", resp.Type)
	}
	res := &Result{
		Blocks: []Block{},
		Usage: Usage{
			InputTokens:     resp.Usage.InputTokens + resp.Usage.CacheReadInputTokens + resp.Usage.CacheCreationInputTokens,
			OutputTokens:    resp.Usage.OutputTokens,
			CacheReadTokens: resp.Usage.CacheReadInputTokens,
		},
		Evidence: Evidence{RequestID: requestID(header, resp.ID, "request-id"), Model: resp.Model},
	}
	for i, b := range resp.Content {
		switch b.Type {
		case "text":
			res.Blocks = append(res.Blocks, Block{Kind: BlockText, Text: b.Text})
		case "thinking":
			res.Blocks = append(res.Blocks, Block{Kind: BlockReasoning, Text: b.Thinking})
		case "redacted_thinking":
			// Encrypted reasoning carries nothing a person can read.
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, fmt.Errorf("anthropic response: content %d: tool_use without id or name", i)
			}
			tc := &ToolCall{ID: b.ID, Name: b.Name}
			if isObject(b.Input) {
				tc.Arguments = compact(b.Input)
			} else {
				tc.Raw = string(b.Input)
			}
			res.Blocks = append(res.Blocks, Block{Kind: BlockToolCall, ToolCall: tc})
		default:
			return nil, fmt.Errorf("anthropic response: content %d: unknown block type %q", i, b.Type)
		}
	}
	switch resp.StopReason {
	case "end_turn", "stop_sequence":
		res.FinishReason = FinishStop
	case "tool_use":
		res.FinishReason = FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		res.FinishReason = FinishLength
	case "refusal":
		res.refuse(FinishRefusal, "stop_reason: refusal")
	default:
		return nil, fmt.Errorf("anthropic response: unknown stop_reason %q", resp.StopReason)
	}
	return res, nil
}

// refuse marks the result declined, with why as its reason, and drops its
// output: a declined or filtered answer's partial text is never passed on.
func (r *Result) refuse(reason FinishReason, why string) {
	r.Refusal = true
	r.FinishReason = reason
	r.RefusalReason = why
	r.Blocks = []Block{}
}
