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
