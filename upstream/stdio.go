package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/strictjson"
)

// A stdio server's stdout is read in pieces of readChunk bytes; a line longer than that is
// gathered from pieces of that size, so that it is copied once, into a buffer of its exact size.
const readChunk = 64 << 10

// chunks recycles the pieces long lines are gathered from.
var chunks = sync.Pool{New: func() any { return new([readChunk]byte) }}

// stdioTransport carries MCP over a stdio server's stdin and stdout as newline-delimited
// JSON-RPC, like the SDK's IOTransport, but reads what the server writes defensively:
//
//   - A line longer than limit (max_result_bytes) is never held: it is read to its newline and
//     dropped, and only its JSON-RPC id is picked out on the way. If it is a response, its call
//     fails with an *OutputError (too large); the session goes on. If no id can be read from it
//     (no top-level id, or one longer than 128 bytes), the connection fails with that error,
//     since the answer it carried is lost and cannot be tied to a call.
//   - A line that does not start with { or [ is not JSON (a banner, a log line printed on the
//     wrong stream): it is logged with the server's name, counted and skipped.
//   - A line that is JSON but not valid UTF-8, not strict JSON (internal/strictjson: one value,
//     no duplicate key at any depth, numbers a float64 holds), or not a valid JSON-RPC message,
//     fails the call it answers when its id can be read, and is otherwise logged and skipped.
//   - A request from the server that is refused this way is answered with a JSON-RPC error, so
//     the server does not wait for an answer; a refused notification is dropped.
//
// A message kept is decoded without a copy: a result or params is a slice of the line read.
type stdioTransport struct {
	server string
	limit  int64
	log    *slog.Logger
	stats  *outputStats
	r      io.ReadCloser // the child's stdout
	w      io.WriteCloser
	// notes, if set, counts the log and progress notifications read (order.go): they are
	// counted here, before they are handed to the SDK, so that a call answered on the fast
	// path (fastcall.go), whose response never reaches the SDK, still waits for them.
	notes *notes
}

func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &stdioConn{
		t:        t,
		incoming: make(chan readResult),
		closed:   make(chan struct{}),
	}
	go c.readLoop(bufio.NewReaderSize(t.r, readChunk))
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

// stdioConn is one connection of a stdioTransport.
type stdioConn struct {
	t        *stdioTransport
	writeMu  sync.Mutex
	incoming chan readResult
	queue    []jsonrpc.Message // the rest of a batch; Read is not called concurrently

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error

	fast fastCalls // the gateway's own tools/call requests in flight (fastcall.go)
}

func (c *stdioConn) SessionID() string { return "" }

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		msg := c.queue[0]
		c.queue = c.queue[1:]
		return msg, nil
	}
	select {
	case r := <-c.incoming:
		return r.msg, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	return c.writeLine(ctx, append(data, '\n'))
}

// writeLine writes one encoded message, with its newline, to the server's stdin.
func (c *stdioConn) writeLine(ctx context.Context, line []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err := c.t.w.Write(line)
	return err
}

func (c *stdioConn) Close() error {
	// What Read returns from now on (io.EOF) is what the SDK fails its calls in flight with;
	// the gateway's fail with it first, before the read loop sees its stdout closed.
	c.fast.fail(io.EOF)
	c.closeOnce.Do(func() {
		c.closeErr = errors.Join(c.t.r.Close(), c.t.w.Close())
		close(c.closed)
	})
	return c.closeErr
}

// deliver hands a message or the connection's final error to Read; it reports false once the
// connection is closed.
func (c *stdioConn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

// readLoop reads the server's stdout line by line until it ends or the connection closes.
// The answers to the gateway's own calls (fastcall.go) go to them, everything else to Read. When
// it ends, the gateway's calls in flight fail with the error the SDK's fail with.
func (c *stdioConn) readLoop(br *bufio.Reader) {
	for {
		line, err := c.readLine(br)
		if line.data != nil || line.refused != nil {
			for _, r := range c.handle(line) {
				if r.err != nil {
					c.fast.fail(r.err)
				} else if c.fast.take(r.msg) {
					continue
				} else if c.t.notes != nil {
					c.t.notes.count(r.msg)
				}
				if !c.deliver(r) {
					return // closed: Close failed the gateway's calls
				}
				if r.err != nil {
					return
				}
			}
		}
		if err != nil {
			c.fast.fail(err)
			c.deliver(readResult{err: err})
			return
		}
	}
}

// piece is part of a long line, in a recycled buffer.
type piece struct {
	buf *[readChunk]byte
	n   int
}

func (p piece) bytes() []byte { return p.buf[:p.n] }

// line is one line of the server's stdout: kept whole (data), or refused while it was read.
type line struct {
	data    []byte
	refused *OutputError
	scan    *scan // of a refused line that looked like JSON, for its id
}

// readLine reads the next line that is not blank. A line that does not start like JSON, or is
// longer than the limit, is read to its end and dropped without being kept.
func (c *stdioConn) readLine(br *bufio.Reader) (line, error) {
	var (
		pieces  []piece // the pieces of a line being kept
		total   int64   // bytes of the line, from its first that is not blank
		head    []byte  // its start, for messages
		drop    *scan   // set once a JSON line is too long to keep: picks out its id
		notJSON bool
		started bool
	)
	defer func() {
		for _, p := range pieces {
			chunks.Put(p.buf)
		}
	}()
	for {
		chunk, err := br.ReadSlice('\n')
		full := errors.Is(err, bufio.ErrBufferFull)
		body := chunk
		if !full && len(body) > 0 && body[len(body)-1] == '\n' {
			body = body[:len(body)-1]
		}
		if !started {
			body = bytes.TrimLeft(body, " \t\r")
			if len(body) == 0 {
				if !full && err != nil {
					return line{}, err
				}
				continue // blank so far
			}
			started = true
			notJSON = body[0] != '{' && body[0] != '['
		}
		if n := quoteBytes + utf8.UTFMax - len(head); n > 0 {
			head = append(head, body[:min(len(body), n)]...)
		}
		total += int64(len(body))
		switch {
		case notJSON:
		case drop != nil:
			drop.feed(body)
		case total > c.t.limit:
			drop = newScan()
			for _, p := range pieces {
				drop.feed(p.bytes())
				chunks.Put(p.buf)
			}
			pieces = nil
			drop.feed(body)
		case full:
			p := piece{buf: chunks.Get().(*[readChunk]byte), n: len(body)}
			copy(p.buf[:], body)
			pieces = append(pieces, p)
		default: // the end of a line that is kept: copied once, into a buffer of its size
			data := make([]byte, total)
			n := 0
			for _, p := range pieces {
				n += copy(data[n:], p.bytes())
			}
			copy(data[n:], body)
			return line{data: bytes.TrimRight(data, "\r")}, err
		}
		if !full {
			if err != nil && !errors.Is(err, io.EOF) {
				return line{}, err
			}
			return c.dropped(head, total, err != nil, notJSON, drop), err
		}
	}
}

// dropped describes a line that was read and not kept.
func (c *stdioConn) dropped(head []byte, size int64, truncated, notJSON bool, s *scan) line {
	q := quote(bytes.TrimRight(head, "\r"))
	if notJSON {
		return line{refused: &OutputError{Server: c.t.server, Reason: OutputNotJSON, Size: size, Quote: q}}
	}
	return line{
		refused: &OutputError{Server: c.t.server, Reason: OutputTooLarge, Size: size, Truncated: truncated, Limit: c.t.limit, Quote: q},
		scan:    s,
	}
}

// handle turns one line into what Read returns: messages, errors that fail one call (as a
// response), or an error that fails the connection. A line that is skipped gives nothing.
func (c *stdioConn) handle(l line) []readResult {
	if l.refused != nil {
		return c.refuse(l.refused, l.scan)
	}
	data := l.data
	if !utf8.Valid(data) {
		detail, q := invalidUTF8(data)
		return c.refuse(&OutputError{Server: c.t.server, Reason: OutputInvalidUTF8, Size: int64(len(data)),
			Detail: detail, Quote: q}, scanned(data))
	}
	// Strict JSON (SPEC.md §15): one value, no duplicate key at any depth, numbers a float64
	// holds. A result another reader would read otherwise fails its call.
	if err := strictjson.Validate(data); err != nil {
		return c.refuse(&OutputError{Server: c.t.server, Reason: OutputNotJSONRPC, Size: int64(len(data)),
			Detail: "not strict JSON: " + err.Error(), Quote: quote(data), Fatal: data[0] == '['}, scanned(data))
	}
	if data[0] == '[' {
		return c.batch(data)
	}
	msg, err := decodeMessage(data)
	if err != nil {
		return c.refuse(&OutputError{Server: c.t.server, Reason: OutputNotJSONRPC, Size: int64(len(data)),
			Detail: err.Error(), Quote: quote(data)}, scanned(data))
	}
	return []readResult{{msg: msg}}
}

func scanned(data []byte) *scan {
	s := newScan()
	s.feed(data)
	return s
}

// batch decodes a JSON array of messages (JSON-RPC batching, before MCP 2025-06-18).
func (c *stdioConn) batch(data []byte) []readResult {
	var raws []json.RawMessage
	err := json.Unmarshal(data, &raws)
	if err == nil && len(raws) == 0 {
		err = errors.New("an empty batch")
	}
	var out []readResult
	for _, raw := range raws {
		if err != nil {
			break
		}
		var msg jsonrpc.Message
		if msg, err = decodeMessage(raw); err == nil {
			out = append(out, readResult{msg: msg})
		}
	}
	if err != nil {
		return c.refuse(&OutputError{Server: c.t.server, Reason: OutputNotJSONRPC, Size: int64(len(data)),
			Detail: "a batch that is not a JSON array of JSON-RPC messages: " + err.Error(), Quote: quote(data), Fatal: true}, nil)
	}
	return out
}

// refuse reports a line the gateway does not take: logged and counted, then a response with
// the error for the call it answers, or an error answer to the server's request, or, for a
// response that cannot be tied to a call, the connection's end.
func (c *stdioConn) refuse(e *OutputError, s *scan) []readResult {
	if e.Reason == OutputNotJSON {
		c.t.stats.skippedLine(e.Quote)
		c.t.log.Warn(fmt.Sprintf("server %s wrote a line to stdout that is not JSON-RPC: %s; it was skipped. Servers must log to stderr", e.Server, e.Quote),
			"stream", "stdout", "reason", e.Reason, "bytes", e.Size)
		return nil
	}
	c.t.stats.count(e.Reason)
	if s != nil {
		if id, ok := s.responseID(); ok && !e.Fatal {
			c.t.log.Error(e.Error()+"; the call it answers fails", "stream", "stdout", "reason", e.Reason, "bytes", e.Size)
			return []readResult{{msg: &jsonrpc.Response{ID: id, Error: e}}}
		}
		if id, ok := s.requestID(); ok && !e.Fatal {
			c.t.log.Error(e.Error()+"; the request was refused", "stream", "stdout", "reason", e.Reason, "bytes", e.Size)
			answer := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the gateway refused the request: " + e.what()}}
			if err := c.Write(context.Background(), answer); err != nil {
				return []readResult{{err: fmt.Errorf("answering a refused request: %w", err)}}
			}
			return nil
		}
		if s.has(memberMethod) && !e.Fatal { // a notification
			c.t.log.Error(e.Error()+"; the notification was dropped", "stream", "stdout", "reason", e.Reason, "bytes", e.Size)
			return nil
		}
	}
	if e.Reason != OutputTooLarge && !e.Fatal {
		// Small enough to have been read whole, and no call is waiting for it by its id.
		c.t.log.Error(e.Error()+"; it answers no call and was skipped", "stream", "stdout", "reason", e.Reason, "bytes", e.Size)
		return nil
	}
	e.Fatal = true
	c.t.log.Error(e.Error()+"; it cannot be tied to a call, so the connection is closed", "stream", "stdout", "reason", e.Reason, "bytes", e.Size)
	return []readResult{{err: e}}
}
