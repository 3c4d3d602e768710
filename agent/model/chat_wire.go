package model

import (
	"fmt"
	"net/http"
	"unicode"
)

// chatWire is Chat Completions (openai and the compatible providers).
type chatWire struct {
	maxTokensParam string
	blockEmpty     bool
}

// newChatWire checks the Chat Completions settings of s (max_tokens_param) and returns the wire.
func newChatWire(s Settings) (wireFormat, error) {
	switch s.MaxTokensParam {
	case "", MaxTokensParam, MaxCompletionTokensParam:
	default:
		return nil, SettingErrors{{Key: "max_tokens_param", Msg: fmt.Sprintf(
			"%q is not a name provider %s takes for the output limit: set %s (the default) or %s (OpenAI's newer models ask for it)",
			s.MaxTokensParam, s.Provider, MaxTokensParam, MaxCompletionTokensParam)}}
	}
	return &chatWire{maxTokensParam: s.MaxTokensParam, blockEmpty: s.BlockEmptyAnswers}, nil
}

func (w *chatWire) request(c *Call, stream bool) ([]byte, error) {
	return chatRequest(c, w.maxTokensParam, stream)
}

func (w *chatWire) result(body []byte, h http.Header) (*Result, error) {
	res, err := OpenAIChatResult(body, h)
	if err != nil {
		return nil, err
	}
	if w.blockEmpty {
		refuseEmpty(res)
	}
	return res, nil
}

// stream returns the decoder of one streamed Chat Completions answer (chat_stream.go).
func (w *chatWire) stream() streamDecoder { return &chatStream{blockEmpty: w.blockEmpty} }

func (w *chatWire) header() http.Header { return nil }

// emptyAnswerReason is the refusal reason of an empty answer under block_empty_answers.
const emptyAnswerReason = "the answer has no text and no tool calls, and block_empty_answers counts that as declined " +
	"(a refusal whose signal was lost, such as a streamed refusal through LiteLLM)"

// Blank reports whether s shows nothing: it holds only white space, control characters and
// Unicode format characters (unicode.Cf: U+200B zero width space, U+FEFF, U+2060, …). Such a
// text is no answer, for block_empty_answers and for the loop.
func Blank(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) && !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// refuseEmpty makes an answer with neither text (Blank text is none) nor tool calls a
// refusal (block_empty_answers):
// the reasoning it may hold is dropped with it, its usage kept. A refusal or a reported error
// stays what it is.
func refuseEmpty(res *Result) {
	if res.Refusal || res.FinishReason == FinishError || !Blank(res.Text()) || len(res.ToolCalls()) > 0 {
		return
	}
	res.refuse(FinishRefusal, emptyAnswerReason)
	res.Chunks = nil
}
