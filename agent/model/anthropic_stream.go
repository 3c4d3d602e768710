package model

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// messagesStream decodes one streamed Messages answer (server-sent events) into the Result
// the same answer gives unstreamed: message_start opens the message with its input usage,
// content_block_start/delta/stop build each block (text_delta, thinking_delta,
// signature_delta, input_json_delta joined into the tool input), message_delta brings the
// stop reason, stop_details and the cumulative usage, message_stop ends it. ping and
// events it does not know are skipped; an error event is an error. Each text_delta is
// returned as a chunk, and kept in Result.Chunks unless the answer is a refusal; after a
// fallback block, Result.Chunks holds only the chunks that followed the last one (the
// answer's), though the declined model's text was already returned as chunks while it
// arrived. Streamed blocks have no JSON as received: the request replays them from their
// fields.
type messagesStream struct {
	started, stopped bool
	resp             anthropicResponse
	blocks           []*streamBlock
	chunks           []string
}

// streamBlock is a content block being streamed.
type streamBlock struct {
	content                      anthropicContent
	text, thinking, sig, partial strings.Builder
	sawPartial, done             bool
}

// The events' data, limited to what the decoder reads.
type (
	anthropicEvent struct {
		Type         string             `json:"type"`
		Message      *anthropicResponse `json:"message"`
		Index        int                `json:"index"`
		ContentBlock json.RawMessage    `json:"content_block"`
		Delta        json.RawMessage    `json:"delta"`
		Usage        *anthropicDeltaUse `json:"usage"`
		Error        *anthropicError    `json:"error"`
	}
	anthropicBlockDelta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
	}
	anthropicMessageDelta struct {
		StopReason  string                `json:"stop_reason"`
		StopDetails *anthropicStopDetails `json:"stop_details"`
	}
	// anthropicDeltaUse is message_delta's usage: cumulative counts, each only when sent.
	anthropicDeltaUse struct {
		InputTokens              *int                 `json:"input_tokens"`
		OutputTokens             *int                 `json:"output_tokens"`
		CacheReadInputTokens     *int                 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens *int                 `json:"cache_creation_input_tokens"`
		Iterations               []anthropicIteration `json:"iterations"`
	}
)

// streamErrorStatus is the HTTP status the API gives each error type, so that an error
// event mid-stream is classified (and retried or not) like the same error before it.
var streamErrorStatus = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"billing_error":         http.StatusPaymentRequired,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"request_too_large":     http.StatusRequestEntityTooLarge,
	"rate_limit_error":      http.StatusTooManyRequests,
	"api_error":             http.StatusInternalServerError,
	"timeout_error":         http.StatusGatewayTimeout,
	"overloaded_error":      529,
}

// Event takes one event; name is the SSE event name, used when the data names no type.
func (d *messagesStream) Event(name string, data []byte) (string, error) {
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", fmt.Errorf("anthropic stream: event %q: %w", name, err)
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "message_start":
		if ev.Message == nil {
			return "", fmt.Errorf("anthropic stream: message_start without a message")
		}
		d.started = true
		d.resp = *ev.Message
	case "content_block_start":
		if ev.Index != len(d.blocks) {
			return "", fmt.Errorf("anthropic stream: content_block_start %d, want block %d", ev.Index, len(d.blocks))
		}
		c, err := parseContent(ev.ContentBlock)
		if err != nil {
			return "", fmt.Errorf("anthropic stream: content block %d: %w", ev.Index, err)
		}
		if c.Type == "fallback" {
			// The text streamed so far was a declined model's: the answer's chunks start here.
			d.chunks = []string{}
		}
		b := &streamBlock{content: c}
		b.text.WriteString(c.Text)
		b.thinking.WriteString(c.Thinking)
		b.sig.WriteString(c.Signature)
		d.blocks = append(d.blocks, b)
	case "content_block_delta":
		b, err := d.open(ev.Index, ev.Type)
		if err != nil {
			return "", err
		}
		var delta anthropicBlockDelta
		if err := json.Unmarshal(ev.Delta, &delta); err != nil {
			return "", fmt.Errorf("anthropic stream: content block %d delta: %w", ev.Index, err)
		}
		switch delta.Type {
		case "text_delta":
			b.text.WriteString(delta.Text)
			if delta.Text != "" {
				d.chunks = append(d.chunks, delta.Text)
			}
			return delta.Text, nil
		case "thinking_delta":
			b.thinking.WriteString(delta.Thinking)
		case "signature_delta":
			b.sig.WriteString(delta.Signature)
		case "input_json_delta":
			b.sawPartial = true
			b.partial.WriteString(delta.PartialJSON)
		}
	case "content_block_stop":
		b, err := d.open(ev.Index, ev.Type)
		if err != nil {
			return "", err
		}
		b.done = true
	case "message_delta":
		var delta anthropicMessageDelta
		if len(ev.Delta) > 0 {
			if err := json.Unmarshal(ev.Delta, &delta); err != nil {
				return "", fmt.Errorf("anthropic stream: message_delta: %w", err)
			}
		}
		if delta.StopReason != "" {
			d.resp.StopReason = delta.StopReason
		}
		if delta.StopDetails != nil {
			d.resp.StopDetails = delta.StopDetails
		}
		d.resp.Usage.add(ev.Usage)
	case "message_stop":
		d.stopped = true
	case "error":
		if ev.Error == nil {
			return "", fmt.Errorf("anthropic stream: an error event without an error")
		}
		status, ok := streamErrorStatus[ev.Error.Type]
		if !ok {
			status = http.StatusInternalServerError
		}
		return "", fmt.Errorf("anthropic stream: error event %s: %w", ev.Error.Type, &StatusError{StatusCode: status, Message: ev.Error.Message})
	}
	return "", nil
}

// open returns the block an event at index i refers to, which must have started and not
// stopped.
func (d *messagesStream) open(i int, event string) (*streamBlock, error) {
	if i < 0 || i >= len(d.blocks) {
		return nil, fmt.Errorf("anthropic stream: %s for block %d, which has not started", event, i)
	}
	if d.blocks[i].done {
		return nil, fmt.Errorf("anthropic stream: %s for block %d, which has stopped", event, i)
	}
	return d.blocks[i], nil
}

// Result returns the answer once the stream has ended; a stream that ended before
// message_stop is an error, as its answer may be cut short.
func (d *messagesStream) Result(header http.Header) (*Result, error) {
	switch {
	case !d.started:
		return nil, fmt.Errorf("anthropic stream: it ended before message_start: no answer")
	case !d.stopped:
		return nil, fmt.Errorf("anthropic stream: it ended before message_stop: the answer is incomplete")
	}
	blocks := make([]anthropicContent, len(d.blocks))
	for i, b := range d.blocks {
		c := b.content
		switch c.Type {
		case "text", "thinking", "redacted_thinking", "tool_use":
			// Built from the events: its content_block_start is not the whole block.
			c.raw = nil
		}
		c.Text, c.Thinking, c.Signature = b.text.String(), b.thinking.String(), b.sig.String()
		if b.sawPartial {
			c.Input = json.RawMessage(b.partial.String())
		}
		if c.Type == "tool_use" && len(strings.TrimSpace(string(c.Input))) == 0 {
			c.Input = json.RawMessage(`{}`)
		}
		blocks[i] = c
	}
	res, err := d.resp.result(blocks, header)
	if err != nil {
		return nil, err
	}
	if !res.Refusal {
		res.Chunks = d.chunks
	}
	return res, nil
}

// add takes message_delta's cumulative usage: each count sent replaces the one so far when
// it is larger, so that a later, smaller count (message_start's input tokens resent as 1,
// say) never lowers what the budget counts.
func (u *anthropicUsage) add(d *anthropicDeltaUse) {
	if d == nil {
		return
	}
	set := func(dst *int, src *int) {
		if src != nil && *src > *dst {
			*dst = *src
		}
	}
	set(&u.InputTokens, d.InputTokens)
	set(&u.OutputTokens, d.OutputTokens)
	set(&u.CacheReadInputTokens, d.CacheReadInputTokens)
	set(&u.CacheCreationInputTokens, d.CacheCreationInputTokens)
	if d.Iterations != nil {
		u.Iterations = d.Iterations
	}
}
