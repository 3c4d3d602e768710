package model

import "net/http"

// wireFormat is one wire format as the provider layer drives it: the translator pair, its
// stream decoder and the headers its settings add. Each wire's owner builds it from the
// settings (newMessagesWire, newChatWire, newResponsesWire), checking the settings only that
// wire takes; New checks the rest.
type wireFormat interface {
	// request builds the body of one request; stream asks for a streamed answer.
	request(c *Call, stream bool) ([]byte, error)
	// result reads a (not streamed) response body.
	result(body []byte, header http.Header) (*Result, error)
	// stream returns a decoder for one streamed answer, or nil when the wire does not stream.
	stream() streamDecoder
	// header is what the wire's settings add to every request's headers (anthropic-beta for
	// refusal fallbacks, say); nil for none.
	header() http.Header
}

// chatWire is Chat Completions (openai and the compatible providers).
type chatWire struct {
	maxTokensParam string
}

// newChatWire checks the Chat Completions settings of s and returns the wire.
func newChatWire(s Settings) (wireFormat, error) {
	return &chatWire{maxTokensParam: s.MaxTokensParam}, nil
}

func (w *chatWire) request(c *Call, stream bool) ([]byte, error) {
	return OpenAIChatRequest(c, w.maxTokensParam)
}
func (w *chatWire) result(body []byte, h http.Header) (*Result, error) {
	return OpenAIChatResult(body, h)
}
func (w *chatWire) stream() streamDecoder { return nil }
func (w *chatWire) header() http.Header   { return nil }

// responsesWire is the OpenAI Responses API.
type responsesWire struct{}

// newResponsesWire checks the Responses settings of s and returns the wire.
func newResponsesWire(s Settings) (wireFormat, error) { return responsesWire{}, nil }

func (responsesWire) request(c *Call, stream bool) ([]byte, error) {
	return OpenAIResponsesRequest(c)
}
func (responsesWire) result(body []byte, h http.Header) (*Result, error) {
	return OpenAIResponsesResult(body, h)
}
func (responsesWire) stream() streamDecoder { return nil }
func (responsesWire) header() http.Header   { return nil }
