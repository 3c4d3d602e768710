package model

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The Messages response body, limited to what the translator reads. The stream decoder
// builds the same values from the events.
type (
	anthropicResponse struct {
		ID          string                `json:"id"`
		Type        string                `json:"type"`
		Model       string                `json:"model"`
		Content     []json.RawMessage     `json:"content"`
		StopReason  string                `json:"stop_reason"`
		StopDetails *anthropicStopDetails `json:"stop_details"`
		Usage       anthropicUsage        `json:"usage"`
		Error       *anthropicError       `json:"error"`
	}
	// anthropicStopDetails explains a refusal: the policy area, a text to show (not
	// stable, never parsed) and, when no fallback could run, the model to retry on.
	anthropicStopDetails struct {
		Type             string `json:"type"`
		Category         string `json:"category"`
		Explanation      string `json:"explanation"`
		RecommendedModel string `json:"recommended_model"`
	}
	anthropicUsage struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		// Iterations break the request down by sampling iteration: each hop of a
		// server-side fallback ("message" for a declined hop, "fallback_message" for the
		// fallback that answered), compactions, advisor calls.
		Iterations []anthropicIteration `json:"iterations"`
	}
	anthropicIteration struct {
		Type                     string `json:"type"`
		Model                    string `json:"model"`
		InputTokens              int    `json:"input_tokens"`
		OutputTokens             int    `json:"output_tokens"`
		CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	}
	anthropicError struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	// anthropicContent is one content block as read, with raw its JSON as sent.
	anthropicContent struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		From      *anthropicHop   `json:"from"`
		To        *anthropicHop   `json:"to"`
		raw       json.RawMessage
	}
	anthropicHop struct {
		Model string `json:"model"`
	}
)

// AnthropicResult reads a Messages API response body into a Result.
//
// Stop reasons map end_turn and stop_sequence to stop, tool_use to tool_calls, max_tokens
// and model_context_window_exceeded to length, and refusal to a refusal: its reason is
// stop_details.explanation (else "stop_reason: refusal") and its category
// stop_details.category — after server-side fallbacks, the refusal that still stands.
//
// Thinking blocks become reasoning blocks with their signature, redacted_thinking blocks
// redacted reasoning blocks with their data; each text, thinking, redacted_thinking and
// tool_use block keeps its JSON as received in Block.Raw, which the request replays.
//
// A fallback block marks where the output of a model that declined ends and the
// fallback's begins ("from" is the model that declined, "to" the one whose output follows).
// The answer is what follows the last one: only those blocks become the Result's text,
// reasoning and tool calls. The fallback blocks and everything before the last one (the
// declined attempts' partial output) are kept as opaque blocks, sent back in place on the
// next request as the API asks (the assistant turn echoed verbatim, fallback blocks
// included), never shown or run; a warning counts them. Each fallback is noted in
// Evidence.Warnings ("refused by X, answered by fallback Y"); Evidence.Model is the model
// that answered. A block of a type this translator does not know is kept as an opaque
// block too, with a warning, rather than failing the run: the API sends back only blocks
// it accepts in return, and the answer's text and tool calls are read as usual.
//
// Usage adds the cache reads and writes the API counts apart to the input tokens. When the
// API breaks the request down in usage.iterations (several fallback hops, say), each count
// (input with cache, cache reads, cache writes, output) is the larger of the top-level
// usage's and the sum over the iterations (each with its own input, cache and output
// tokens): that is at least what the request consumed. The request id comes from the request-id
// header, else the message id.
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
	blocks := make([]anthropicContent, len(resp.Content))
	for i, raw := range resp.Content {
		b, err := parseContent(raw)
		if err != nil {
			return nil, fmt.Errorf("anthropic response: content %d: %w", i, err)
		}
		blocks[i] = b
	}
	return resp.result(blocks, header)
}

// parseContent reads one content block. Only the types the translator knows are read
// field by field; another type keeps just its type and JSON, whatever its fields hold.
func parseContent(raw json.RawMessage) (anthropicContent, error) {
	var b anthropicContent
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return b, err
	}
	switch head.Type {
	case "text", "thinking", "redacted_thinking", "tool_use", "fallback":
		if err := json.Unmarshal(raw, &b); err != nil {
			return b, err
		}
	default:
		b.Type = head.Type
	}
	b.raw = raw
	return b, nil
}

// result reads the response with its content blocks (parsed from the body, or built from
// a stream's events) into a Result.
//
// The answer is what follows the last fallback block: the blocks before it are the output
// of a model that declined (each fallback block marks where one model's output ends and
// the next one's begins). They become opaque blocks, kept only to be sent back in place as
// the API asks, never read as text, reasoning or tool calls.
func (resp *anthropicResponse) result(blocks []anthropicContent, header http.Header) (*Result, error) {
	res := &Result{
		Blocks:   []Block{},
		Usage:    resp.Usage.total(),
		Evidence: Evidence{RequestID: requestID(header, resp.ID, "request-id"), Model: resp.Model},
	}
	answer := 0
	for i, b := range blocks {
		if b.Type == "fallback" {
			answer = i + 1
		}
	}
	var hops []anthropicContent
	declined := 0
	for i, b := range blocks {
		switch {
		case b.Type == "":
			return nil, fmt.Errorf("anthropic response: content %d: a block without a type", i)
		case b.Type == "fallback":
			hops = append(hops, b)
			res.Blocks = append(res.Blocks, Block{Kind: BlockOpaque, Data: string(b.json())})
			continue
		case i < answer:
			declined++
			res.Blocks = append(res.Blocks, Block{Kind: BlockOpaque, Data: string(b.json())})
			continue
		}
		switch b.Type {
		case "text":
			res.Blocks = append(res.Blocks, Block{Kind: BlockText, Text: b.Text, Raw: b.raw})
		case "thinking":
			res.Blocks = append(res.Blocks, Block{Kind: BlockReasoning, Text: b.Thinking, Signature: b.Signature, Raw: b.raw})
		case "redacted_thinking":
			res.Blocks = append(res.Blocks, Block{Kind: BlockReasoning, Redacted: true, Data: b.Data, Raw: b.raw})
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
			res.Blocks = append(res.Blocks, Block{Kind: BlockToolCall, ToolCall: tc, Raw: b.raw})
		default:
			res.Blocks = append(res.Blocks, Block{Kind: BlockOpaque, Data: string(b.json())})
			res.Evidence.Warnings = append(res.Evidence.Warnings, fmt.Sprintf("content %d: block type %q is not one this translator reads: kept to replay, otherwise ignored", i, b.Type))
		}
	}
	if declined > 0 {
		res.Evidence.Warnings = append(res.Evidence.Warnings, fmt.Sprintf("%d content block(s) before the last fallback block are the output of a model that declined: kept only to send back, not shown and no tool call of theirs run", declined))
	}
	res.Evidence.Warnings = append(res.Evidence.Warnings, fallbackWarnings(hops, resp)...)
	res.Evidence.Model = answeringModel(hops, resp)
	switch resp.StopReason {
	case "end_turn", "stop_sequence":
		res.FinishReason = FinishStop
	case "tool_use":
		res.FinishReason = FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		res.FinishReason = FinishLength
	case "refusal":
		why := "stop_reason: refusal"
		if d := resp.StopDetails; d != nil && d.Explanation != "" {
			why = d.Explanation
		}
		res.refuse(FinishRefusal, why)
		if d := resp.StopDetails; d != nil {
			res.RefusalCategory = d.Category
			if d.RecommendedModel != "" {
				res.Evidence.Warnings = append(res.Evidence.Warnings, fmt.Sprintf("no fallback could run for this refusal (its model was rate limited or overloaded): the API recommends retrying on %s", d.RecommendedModel))
			}
		}
	default:
		return nil, fmt.Errorf("anthropic response: unknown stop_reason %q", resp.StopReason)
	}
	return res, nil
}

// fallbackWarnings says which models declined and which fallback took over, one warning
// per fallback block; without one, a fallback_message iteration still tells that a fallback
// answered (a conversation the API keeps routing to the fallback after an earlier refusal).
func fallbackWarnings(hops []anthropicContent, resp *anthropicResponse) []string {
	var out []string
	for i, h := range hops {
		from, to := hopModel(h.From), hopModel(h.To)
		if i == len(hops)-1 && resp.StopReason != "refusal" {
			out = append(out, fmt.Sprintf("refused by %s, answered by fallback %s", from, to))
		} else {
			out = append(out, fmt.Sprintf("refused by %s, re-run on fallback %s", from, to))
		}
	}
	if len(hops) > 0 {
		return out
	}
	for _, it := range resp.Usage.Iterations {
		if it.Type == "fallback_message" {
			return append(out, fmt.Sprintf("answered by fallback %s, which the API routes this conversation to after an earlier refusal", orUnknown(it.Model)))
		}
	}
	return out
}

// answeringModel is the model whose output the answer is: the fallback of the last hop,
// else the fallback an iteration names, else the message's model. Unstreamed, all three
// agree; a stream names its model in message_start, before any fallback ran.
func answeringModel(hops []anthropicContent, resp *anthropicResponse) string {
	if n := len(hops); n > 0 && hops[n-1].To != nil && hops[n-1].To.Model != "" {
		return hops[n-1].To.Model
	}
	for _, it := range resp.Usage.Iterations {
		if it.Type == "fallback_message" && it.Model != "" {
			return it.Model
		}
	}
	return resp.Model
}

// json is the block's JSON: as the API sent it (insignificant space removed), or for a
// block built from a stream's events, written from its fields.
func (b anthropicContent) json() json.RawMessage {
	if len(b.raw) > 0 {
		return compact(b.raw)
	}
	var v any
	switch b.Type {
	case "text":
		v = anthropicText{Type: b.Type, Text: b.Text}
	case "thinking":
		v = anthropicThinkingBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature}
	case "redacted_thinking":
		v = anthropicRedacted{Type: b.Type, Data: b.Data}
	case "tool_use":
		input := b.Input
		if !isObject(input) {
			input = json.RawMessage(`{}`)
		}
		v = anthropicToolUse{Type: b.Type, ID: b.ID, Name: b.Name, Input: compact(input)}
	default:
		v = struct {
			Type string `json:"type"`
		}{b.Type}
	}
	out, _ := marshalVerbatim(v) // cannot fail: every field is a string or a JSON object
	return out
}

func hopModel(h *anthropicHop) string {
	if h == nil {
		return orUnknown("")
	}
	return orUnknown(h.Model)
}

func orUnknown(model string) string {
	if model == "" {
		return "an unnamed model"
	}
	return model
}

// total is the request's Usage, input tokens including the cache reads and writes. When
// the API breaks the request down in iterations, each count is the larger of the top-level
// usage's and the iterations' sum: the two should agree, and a provider that reports less
// in one place must not make the budgets count less than the other says.
func (u anthropicUsage) total() Usage {
	top := usageOf(u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens)
	if len(u.Iterations) == 0 {
		return top
	}
	var sum Usage
	for _, it := range u.Iterations {
		one := usageOf(it.InputTokens, it.OutputTokens, it.CacheReadInputTokens, it.CacheCreationInputTokens)
		sum.InputTokens += one.InputTokens
		sum.OutputTokens += one.OutputTokens
		sum.CacheReadTokens += one.CacheReadTokens
		sum.CacheWriteTokens += one.CacheWriteTokens
	}
	return Usage{
		InputTokens:      max(top.InputTokens, sum.InputTokens),
		OutputTokens:     max(top.OutputTokens, sum.OutputTokens),
		CacheReadTokens:  max(top.CacheReadTokens, sum.CacheReadTokens),
		CacheWriteTokens: max(top.CacheWriteTokens, sum.CacheWriteTokens),
	}
}

func usageOf(input, output, cacheRead, cacheWrite int) Usage {
	return Usage{
		InputTokens:      input + cacheRead + cacheWrite,
		OutputTokens:     output,
		CacheReadTokens:  cacheRead,
		CacheWriteTokens: cacheWrite,
	}
}
