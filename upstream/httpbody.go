package upstream

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// codeRefused is the JSON-RPC error code of the answers boundedBody puts in place of a message
// it refused. Its message is a one-time token the upstream looks up in its refusals, so that
// no server can pass off an error of its own as one of the gateway's refusals.
const codeRefused = -32099

// refusals are the OutputErrors an HTTP server's bodies were refused with, by the token that
// stands in for each in the answer the SDK reads.
type refusals struct {
	mu sync.Mutex
	m  map[string]*OutputError
}

// add keeps e and returns the JSON-RPC error response that carries its token.
func (r *refusals) add(id jsonrpc.ID, e *OutputError) []byte {
	var b [12]byte
	_, _ = rand.Read(b[:])
	token := "mcp-gateway refused the answer " + hex.EncodeToString(b[:])
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[string]*OutputError)
	}
	r.m[token] = e
	r.mu.Unlock()
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeRefused, Message: token}})
	if err != nil {
		panic("upstream: encoding a refusal: " + err.Error()) // an ID and a string always encode
	}
	return data
}

// take returns the OutputError an answer stands for, if it is one of the gateway's refusals,
// and forgets it.
func (r *refusals) take(err error) (*OutputError, bool) {
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != codeRefused {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[wire.Message]
	delete(r.m, wire.Message)
	return e, ok
}

// boundedTransport bounds the bodies of an HTTP server's answers to limit (max_result_bytes)
// while they are read: an application/json body as a whole, a text/event-stream body per event.
// A body or event over the limit is read to its end without being kept, its JSON-RPC id picked
// out on the way, and replaced by an error answer for that id carrying the refusal's token; if
// no id can be read, the body fails with the OutputError.
type boundedTransport struct {
	base     http.RoundTripper
	server   string
	limit    int64
	log      *slog.Logger
	stats    *outputStats
	refusals *refusals
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case media == "application/json" && resp.ContentLength >= 0 && resp.ContentLength <= t.limit:
		// The client stops at the length given; nothing to bound.
	case media == "application/json":
		resp.Body = &jsonBody{t: t, body: resp.Body}
		resp.ContentLength = -1
	case media == "text/event-stream":
		resp.Body = &sseBody{t: t, body: resp.Body, br: bufio.NewReaderSize(resp.Body, readChunk)}
	}
	return resp, nil
}

// refuse records a refused message and returns what replaces it: an error answer for its id.
func (t *boundedTransport) refuse(e *OutputError, s *scan) ([]byte, error) {
	t.stats.count(e.Reason)
	if id, ok := s.responseID(); ok {
		t.log.Error(e.Error()+"; the call it answers fails", "reason", e.Reason, "bytes", e.Size)
		return t.refusals.add(id, e), nil
	}
	e.Fatal = true
	t.log.Error(e.Error()+"; it cannot be tied to a call, so the connection fails", "reason", e.Reason, "bytes", e.Size)
	return nil, e
}

// jsonBody is an application/json body of unknown or excessive length. It is read whole before
// the client sees any of it, up to the limit; a longer one is replaced.
type jsonBody struct {
	t    *boundedTransport
	body io.ReadCloser
	out  *bytes.Reader
	err  error
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.out == nil && b.err == nil {
		b.out, b.err = b.load()
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.out.Read(p)
}

func (b *jsonBody) load() (*bytes.Reader, error) {
	data, err := io.ReadAll(io.LimitReader(b.body, b.t.limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) <= b.t.limit {
		return bytes.NewReader(data), nil
	}
	s := newScan()
	s.feed(data)
	head := data[:min(len(data), quoteBytes+4)]
	size := int64(len(data))
	data = nil
	n, err := io.Copy(scanWriter{s}, b.body)
	size += n
	e := &OutputError{Server: b.t.server, Reason: OutputTooLarge, Size: size, Truncated: err != nil, Limit: b.t.limit, Quote: quote(head)}
	answer, ferr := b.t.refuse(e, s)
	if ferr != nil {
		return nil, ferr
	}
	return bytes.NewReader(answer), nil
}

func (b *jsonBody) Close() error { return b.body.Close() }

// scanWriter feeds what is written to it to a scan.
type scanWriter struct{ s *scan }

func (w scanWriter) Write(p []byte) (int, error) {
	w.s.feed(p)
	return len(p), nil
}

// sseBody is a text/event-stream body passed on one event at a time; an event over the limit
// is replaced.
type sseBody struct {
	t    *boundedTransport
	body io.ReadCloser
	br   *bufio.Reader
	out  []byte // what is ready for the reader
	err  error  // returned once out is drained
}

func (b *sseBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.out, b.err = b.event()
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *sseBody) Close() error { return b.body.Close() }

// event reads the next event, up to and including the blank line that ends it. An event over
// the limit is not kept: its data is passed to a scan for its id, and the event replaced.
func (b *sseBody) event() ([]byte, error) {
	var (
		ev     []byte
		total  int64
		s      *scan // set once the event is over the limit
		id     string
		head   []byte // the start of its data, for messages
		isData bool   // the current line is a data line
	)
	lineStart := true
	for {
		chunk, err := b.br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		blank := lineStart && !full && len(bytes.TrimRight(chunk, "\r\n")) == 0
		content := bytes.TrimRight(chunk, "\r\n")
		if lineStart {
			var field string
			field, content = sseField(chunk)
			isData = field == "data"
			if field == "id" {
				id = string(content)
			}
		}
		if isData && len(head) < quoteBytes+4 {
			head = append(head, content[:min(len(content), quoteBytes+4-len(head))]...)
		}
		total += int64(len(chunk))
		switch {
		case s == nil && total <= b.t.limit:
			ev = append(ev, chunk...)
		case s == nil: // this piece takes the event over the limit: from here on it is only scanned
			s = newScan()
			for _, l := range bytes.SplitAfter(ev, []byte("\n")) {
				if f, v := sseField(l); f == "data" {
					s.feed(v)
				}
			}
			ev = nil
			fallthrough
		default:
			if isData {
				s.feed(content)
			}
		}
		lineStart = !full
		if !(blank || (err != nil && !full)) {
			continue
		}
		if s == nil {
			return ev, err
		}
		e := &OutputError{Server: b.t.server, Reason: OutputTooLarge, Size: total, Truncated: err != nil, Limit: b.t.limit, Quote: quote(head)}
		answer, ferr := b.t.refuse(e, s)
		if ferr != nil {
			return nil, ferr
		}
		var out []byte
		if id != "" {
			out = fmt.Appendf(out, "id: %s\n", id)
		}
		return fmt.Appendf(out, "data: %s\n\n", answer), err
	}
}

// sseField splits an event-stream line into its field name and value (after one optional
// space), without the line ending.
func sseField(line []byte) (string, []byte) {
	line = bytes.TrimRight(line, "\r\n")
	name, value, found := bytes.Cut(line, []byte(":"))
	if !found {
		return string(line), nil
	}
	return string(name), bytes.TrimPrefix(value, []byte(" "))
}
