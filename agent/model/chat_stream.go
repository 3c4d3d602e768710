package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The Chat Completions stream: server-sent events without names, each `data: {chunk}`, the
// last `data: [DONE]`. A chunk's first choice carries a delta of the message (content, refusal,
// reasoning, tool calls by index: id and name once, the arguments in pieces) and, once, the
// finish reason; with stream_options.include_usage a last chunk without choices carries the
// usage.
type (
	chatChunk struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Index        int       `json:"index"`
			Delta        chatDelta `json:"delta"`
			FinishReason *string   `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	chatDelta struct {
		Content          *string `json:"content"`
		Refusal          *string `json:"refusal"`
		ReasoningContent string  `json:"reasoning_content"`
		Reasoning        string  `json:"reasoning"`
		ToolCalls        []struct {
			Index    int    `json:"index"`
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ProviderSpecificFields json.RawMessage `json:"provider_specific_fields"`
	}
)

// chatStream puts one streamed answer back together as the response the provider would have
// sent whole, and reads that, so a streamed answer gives the same Result (Chunks aside).
type chatStream struct {
	blockEmpty bool

	id, model                    string
	content, refusal, pssRefusal strings.Builder
	reasoningContent, reasoning  strings.Builder
	sawContent, sawRefusal       bool
	chunks                       []string
	calls                        []*streamedCall
	finish                       string
	usage                        chatUsage
	done                         bool
}

// streamedCall is one tool call being streamed: its index, id, type and name as first sent,
// its arguments joined.
type streamedCall struct {
	index         int
	id, typ, name string
	args          strings.Builder
}

const chatStreamWhat = "openai chat stream"

// Event takes one data line. It returns the text of a content delta as the chunk.
func (s *chatStream) Event(_ string, data []byte) (string, error) {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return "", nil
	case string(data) == "[DONE]":
		s.done = true
		return "", nil
	case s.done:
		return "", nil // nothing follows [DONE]; a server that sends more is not read
	}
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("%s: a chunk is not JSON: %w", chatStreamWhat, err)
	}
	if c.Error != nil {
		return "", fmt.Errorf("%s: the provider reported an error mid-answer: %s", chatStreamWhat, c.Error.Message)
	}
	if s.id == "" {
		s.id = c.ID
	}
	if s.model == "" {
		s.model = c.Model
	}
	if c.Usage != nil {
		// The last usage seen: servers that report it on every chunk count up to the total.
		s.usage = *c.Usage
	}
	chunk := ""
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only the first choice is read, as for an answer sent whole
		}
		d := ch.Delta
		if d.Content != nil && *d.Content != "" {
			s.sawContent = true
			s.content.WriteString(*d.Content)
			chunk += *d.Content
		}
		if d.Refusal != nil && *d.Refusal != "" {
			s.sawRefusal = true
			s.refusal.WriteString(*d.Refusal)
		}
		if r := litellmRefusal(d.ProviderSpecificFields); r != "" {
			s.pssRefusal.WriteString(r)
		}
		s.reasoningContent.WriteString(d.ReasoningContent)
		s.reasoning.WriteString(d.Reasoning)
		for _, tc := range d.ToolCalls {
			s.toolCallDelta(tc.Index, tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
		}
	}
	if chunk != "" {
		s.chunks = append(s.chunks, chunk)
	}
	return chunk, nil
}

// toolCallDelta adds one tool-call delta: a new index (or a new id at a known index, as servers
// that number every call 0 send it) starts a call, the rest adds to it.
func (s *chatStream) toolCallDelta(index int, id, typ, name, args string) {
	var call *streamedCall
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].index == index {
			call = s.calls[i]
			break
		}
	}
	if call == nil || (id != "" && call.id != "" && id != call.id) {
		call = &streamedCall{index: index}
		s.calls = append(s.calls, call)
	}
	if call.id == "" {
		call.id = id
	}
	if call.typ == "" {
		call.typ = typ
	}
	if call.name == "" {
		call.name = name
	}
	call.args.WriteString(args)
}

// Result reads the answer once the stream has ended. A stream that ended before its finish
// reason is an error: the answer was cut off, and reading it as finished would pass on part of
// it (or a refusal's start) as the whole.
func (s *chatStream) Result(header http.Header) (*Result, error) {
	if s.finish == "" {
		return nil, fmt.Errorf("%s: the stream ended before the answer finished (no finish_reason)", chatStreamWhat)
	}
	msg := chatReply{ReasoningContent: s.reasoningContent.String(), Reasoning: s.reasoning.String()}
	if s.sawContent {
		msg.Content = ptr(s.content.String())
	}
	if s.sawRefusal {
		msg.Refusal = ptr(s.refusal.String())
	}
	if r := s.pssRefusal.String(); r != "" {
		msg.ProviderSpecificFields, _ = json.Marshal(map[string]string{"refusal": r})
	}
	for _, c := range s.calls {
		w := chatToolCall{ID: c.id, Type: c.typ}
		w.Function.Name = c.name
		w.Function.Arguments, _ = json.Marshal(c.args.String())
		msg.ToolCalls = append(msg.ToolCalls, w)
	}
	resp := &chatResponse{ID: s.id, Model: s.model, Usage: s.usage, Choices: []chatChoice{{Message: msg, FinishReason: s.finish}}}
	res, err := chatResult(resp, header, chatStreamWhat)
	if err != nil {
		return nil, err
	}
	if !res.Refusal {
		res.Chunks = s.chunks
	}
	if s.blockEmpty {
		refuseEmpty(res)
	}
	return res, nil
}
