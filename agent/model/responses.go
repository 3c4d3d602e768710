package model

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The Responses API wire types the translator reads; requests are built as
// maps, since each input item type has its own fields.
type (
	responsesItem struct {
		Type string `json:"type"`
		// message
		Content json.RawMessage `json:"content"`
		// function_call
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		// reasoning
		Summary []responsesPart `json:"summary"`
	}
	responsesPart struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	responsesTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	responsesResponse struct {
		ID                string          `json:"id"`
		Object            string          `json:"object"`
		Model             string          `json:"model"`
		Status            string          `json:"status"`
		Output            []responsesItem `json:"output"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Usage struct {
			InputTokens        int `json:"input_tokens"`
			OutputTokens       int `json:"output_tokens"`
			TotalTokens        int `json:"total_tokens"`
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
)

// OpenAIResponsesRequest builds a Responses API request body from c.
//
// The instructions go in the instructions field. User and assistant text
// become message items, tool calls function_call items (arguments as a
// JSON string) and tool results function_call_output items. The output
// limit, when set, is max_output_tokens; an output schema is text.format, a
// non-strict JSON Schema as Chat Completions sends it. Nothing is stored at
// the provider (store: false): the call always carries the whole
// conversation.
func OpenAIResponsesRequest(c *Call) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("openai responses request: %w", err)
	}
	if len(c.Controls.OutputSchema) > 0 && !isObject(c.Controls.OutputSchema) {
		return nil, fmt.Errorf("openai responses request: the output schema is not a JSON object")
	}
	input := []map[string]any{}
	for _, m := range c.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant:
			if m.Text != "" {
				input = append(input, map[string]any{"type": "message", "role": string(m.Role), "content": m.Text})
			}
			for _, tc := range m.ToolCalls {
				input = append(input, map[string]any{"type": "function_call", "call_id": tc.ID, "name": tc.Name, "arguments": argumentsText(tc)})
			}
		case RoleTool:
			for _, r := range m.ToolResults {
				input = append(input, map[string]any{"type": "function_call_output", "call_id": r.CallID, "output": r.Content})
			}
		}
	}
	req := map[string]any{"model": c.Controls.Model, "input": input, "store": false}
	if len(c.Instructions) > 0 {
		req["instructions"] = joinInstructions(c.Instructions)
	}
	if len(c.Tools) > 0 {
		tools := make([]responsesTool, 0, len(c.Tools))
		for _, t := range c.Tools {
			tools = append(tools, responsesTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.inputSchema()})
		}
		req["tools"] = tools
	}
	if c.Controls.MaxTokens > 0 {
		req["max_output_tokens"] = c.Controls.MaxTokens
	}
	if c.Controls.Temperature != nil {
		req["temperature"] = *c.Controls.Temperature
	}
	if len(c.Controls.OutputSchema) > 0 {
		req["text"] = map[string]any{"format": map[string]any{
			"type": "json_schema", "name": outputSchemaName, "schema": c.Controls.OutputSchema, "strict": false,
		}}
	}
	return json.Marshal(req)
}

// OpenAIResponsesResult reads a Responses API response body into a Result.
//
// Output items map in order: reasoning summaries to reasoning blocks,
// message text to text blocks, function_call items to tool calls (keyed by
// call_id; arguments that do not parse to an object stay in Raw with nil
// Arguments). A refusal part makes a refusal. Status completed finishes
// with tool_calls when the model called tools, else stop; incomplete
// finishes with length (max_output_tokens) or a content_filter refusal;
// failed finishes with error and the provider's message. The request id
// comes from the x-request-id header, else the response id. A
// usage.total_tokens larger than input_tokens and output_tokens together
// counts the difference as input tokens, as in Chat Completions.
func OpenAIResponsesResult(body []byte, header http.Header) (*Result, error) {
	var resp responsesResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("openai responses response: %w", err)
	}
	if resp.Object != "response" {
		if resp.Error != nil {
			return nil, fmt.Errorf("openai responses response: %s", resp.Error.Message)
		}
		return nil, fmt.Errorf("openai responses response: object %q, want \"response\"", resp.Object)
	}
	res := &Result{
		Blocks: []Block{},
		Usage: Usage{
			InputTokens:     inputTokens(resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.Usage.TotalTokens),
			OutputTokens:    resp.Usage.OutputTokens,
			CacheReadTokens: resp.Usage.InputTokensDetails.CachedTokens,
		},
		Evidence: Evidence{RequestID: requestID(header, resp.ID, "x-request-id"), Model: resp.Model},
	}
	var refusal string
	calls := 0
	for i, item := range resp.Output {
		switch item.Type {
		case "reasoning":
			for _, p := range item.Summary {
				res.Blocks = append(res.Blocks, Block{Kind: BlockReasoning, Text: p.Text})
			}
		case "message":
			var parts []responsesPart
			if err := json.Unmarshal(item.Content, &parts); err != nil {
				return nil, fmt.Errorf("openai responses response: output %d: message content: %w", i, err)
			}
			for _, p := range parts {
				switch p.Type {
				case "output_text":
					res.Blocks = append(res.Blocks, Block{Kind: BlockText, Text: p.Text})
				case "refusal":
					refusal = p.Refusal
				default:
					return nil, fmt.Errorf("openai responses response: output %d: unknown content type %q", i, p.Type)
				}
			}
		case "function_call":
			if item.CallID == "" || item.Name == "" {
				return nil, fmt.Errorf("openai responses response: output %d: function_call without call_id or name", i)
			}
			tc := &ToolCall{ID: item.CallID, Name: item.Name}
			tc.Arguments, tc.Raw = parseArguments(item.Arguments)
			res.Blocks = append(res.Blocks, Block{Kind: BlockToolCall, ToolCall: tc})
			calls++
		default:
			return nil, fmt.Errorf("openai responses response: output %d: unknown item type %q", i, item.Type)
		}
	}
	if refusal != "" {
		res.refuse(FinishRefusal, refusal)
		return res, nil
	}
	switch resp.Status {
	case "completed":
		res.FinishReason = FinishStop
		if calls > 0 {
			res.FinishReason = FinishToolCalls
		}
	case "incomplete":
		reason := ""
		if resp.IncompleteDetails != nil {
			reason = resp.IncompleteDetails.Reason
		}
		switch reason {
		case "max_output_tokens":
			res.FinishReason = FinishLength
		case "content_filter":
			res.refuse(FinishContentFilter, "incomplete: content_filter")
		default:
			return nil, fmt.Errorf("openai responses response: incomplete for unknown reason %q", reason)
		}
	case "failed":
		res.FinishReason = FinishError
		res.Error = "failed"
		if resp.Error != nil {
			res.Error = resp.Error.Code + ": " + resp.Error.Message
		}
	default:
		return nil, fmt.Errorf("openai responses response: unknown status %q", resp.Status)
	}
	return res, nil
}

// responsesWire is the OpenAI Responses API. It does not stream: its answers arrive whole.
type responsesWire struct {
	blockEmpty bool
}

// newResponsesWire checks the Responses settings of s and returns the wire: stream is refused,
// since this wire reads only whole answers.
func newResponsesWire(s Settings) (wireFormat, error) {
	if s.Stream {
		return nil, SettingErrors{{Key: "stream", Msg: fmt.Sprintf(
			"provider %s does not stream (its answers arrive whole): remove stream, or use provider openai (Chat Completions), which does", s.Provider)}}
	}
	return responsesWire{blockEmpty: s.BlockEmptyAnswers}, nil
}

func (responsesWire) request(c *Call, _ bool) ([]byte, error) { return OpenAIResponsesRequest(c) }

func (w responsesWire) result(body []byte, h http.Header) (*Result, error) {
	res, err := OpenAIResponsesResult(body, h)
	if err != nil {
		return nil, err
	}
	if w.blockEmpty {
		refuseEmpty(res)
	}
	return res, nil
}

func (responsesWire) stream() streamDecoder { return nil }
func (responsesWire) header() http.Header   { return nil }
