package model

import (
	"context"
	"net/http"
)

// The per-request values the loop gives a Model through the context, so that the Model
// interface stays one method.

type chunksKey struct{}
type invocationKey struct{}

// WithChunks returns ctx carrying fn, which receives the text of a streamed (or scripted
// chunked) answer piece by piece, in order, while Generate runs — or, with hold_stream, only
// once the answer has finished and was not declined. fn is never called for a declined
// answer's text under hold_stream. It must not block for long.
func WithChunks(ctx context.Context, fn func(chunk string)) context.Context {
	return context.WithValue(ctx, chunksKey{}, fn)
}

// chunksOf returns the chunk callback of ctx, or nil.
func chunksOf(ctx context.Context) func(string) {
	fn, _ := ctx.Value(chunksKey{}).(func(string))
	return fn
}

// WithInvocationID returns ctx carrying the loop's id of the model request it is used for;
// HTTP providers send it as the X-Invocation-Id header (InvocationHeader) and every Model puts
// it in Result.Evidence.InvocationID.
func WithInvocationID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, invocationKey{}, id)
}

// InvocationID returns the invocation id of ctx, or "".
func InvocationID(ctx context.Context) string {
	id, _ := ctx.Value(invocationKey{}).(string)
	return id
}

// InvocationHeader is the request header an HTTP provider's request carries the invocation id in.
const InvocationHeader = "X-Invocation-Id"

// streamDecoder reads one streamed answer (server-sent events) into a Result. Each wire that
// streams has one (Chat Completions, Messages).
type streamDecoder interface {
	// Event takes one event: its name ("" when the stream names none) and its data. It returns
	// the text delta the event carries, if any, to deliver as a chunk.
	Event(name string, data []byte) (chunk string, err error)
	// Result returns the answer once the stream has ended, with the response's headers.
	Result(header http.Header) (*Result, error)
}

// Used by the stream decoders and the scripted model's chunks; these keep the linter quiet
// until they exist.
var (
	_               = chunksOf
	_ streamDecoder = nil
)
