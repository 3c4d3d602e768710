package model

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxEventLine bounds one line of a server-sent event stream; a provider's
// deltas are far smaller.
const maxEventLine = 1 << 20

// DoStream sends body asking for a streamed answer (Accept:
// text/event-stream) and reads the answer's server-sent events, calling
// event with each one's name ("" when the stream names none) and data (its
// data lines joined with "\n") in order. It returns the answer's headers.
//
// The request itself is retried as Do retries it, until an answer with a
// 2xx status arrives; from then on nothing is retried, since events have
// been delivered. An error the event callback returns ends the stream with that error,
// and so does a line longer than 1 MiB or an answer longer than 32 MiB.
// Timeout bounds each attempt, the whole stream included, and cancelling
// ctx stops the stream at once.
func (t *Transport) DoStream(ctx context.Context, body []byte, event func(name string, data []byte) error) (http.Header, error) {
	_, header, err := t.send(ctx, body, true, func(r io.Reader) ([]byte, error) {
		if err := readEvents(&limitedReader{r: r, left: maxResponseBytes}, event); err != nil {
			return nil, &finalError{err}
		}
		return nil, nil
	})
	return header, err
}

// readEvents reads a server-sent event stream (the WHATWG EventSource
// format): "field: value" lines, an event ending at a blank line; data lines
// accumulate, joined with "\n"; event names the event; lines starting with
// ":" are comments; id, retry and unknown fields are ignored. An event
// without data is not delivered. Lines end with "\n" or "\r\n". An event the
// stream ends without its blank line is still delivered: some servers end
// with "data: [DONE]" and no blank line.
func readEvents(r io.Reader, event func(name string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var (
		name    string
		data    []byte
		hasData bool
		first   = true
	)
	dispatch := func() error {
		defer func() { name, data, hasData = "", nil, false }()
		if !hasData {
			return nil
		}
		return event(name, data)
	}
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
			first = false
		}
		if len(line) == 0 {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("reading the event stream: a line is longer than %d bytes", maxEventLine)
		}
		return fmt.Errorf("reading the event stream: %w", err)
	}
	return dispatch()
}

// limitedReader fails once more than left bytes are read, where
// io.LimitReader would end the stream as if it were complete.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, fmt.Errorf("the answer is longer than %d bytes", maxResponseBytes)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// generateStream sends body as a streamed request and decodes the events
// with the wire's stream decoder. Text chunks go to the context's chunk
// callback as they arrive, or, with hold_stream, only once the answer has
// finished and was not declined; a declined answer's chunks never reach it.
func (m *httpModel) generateStream(ctx context.Context, body []byte) (*Result, http.Header, error) {
	dec := m.wire.stream()
	deliver := chunksOf(ctx)
	var chunks []string
	header, err := m.transport.DoStream(ctx, body, func(name string, data []byte) error {
		if err := impossibleUsage(data); err != nil {
			return err
		}
		chunk, err := dec.Event(name, data)
		if err != nil {
			return err
		}
		if chunk != "" {
			chunks = append(chunks, chunk)
			if deliver != nil && !m.holdStream {
				deliver(chunk)
			}
		}
		return nil
	})
	if err != nil {
		return nil, header, err
	}
	res, err := dec.Result(header)
	if err != nil {
		return nil, header, err
	}
	if res.Chunks == nil {
		res.Chunks = chunks
	}
	if res.Refusal {
		res.Chunks = nil
		return res, header, nil
	}
	if deliver != nil && m.holdStream && res.FinishReason != FinishError {
		for _, c := range res.Chunks {
			deliver(c)
		}
	}
	return res, header, nil
}
