package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/msgline"
)

// strictStdio is the transport of `serve --stdio`: newline-delimited JSON-RPC on the process's
// stdin and stdout, as the SDK's StdioTransport, with every line screened first (strict.go).
// The SDK's own reader decodes a stream of JSON values, so a line of garbage would end the
// session and a line of two values would be two messages; here a line is one message or it
// is refused: answered on stdout with a JSON-RPC error and dropped, and the session goes on.
// A line longer than limit (gateway.max_body_bytes) is read to its end without being kept and
// refused the same way.
type strictStdio struct {
	in    io.ReadCloser
	out   io.Writer
	limit int64
	door  *door
}

func newStrictStdio(in io.ReadCloser, out io.Writer, limit int64, d *door) *strictStdio {
	return &strictStdio{in: in, out: out, limit: limit, door: d}
}

func (t *strictStdio) Connect(ctx context.Context) (mcp.Connection, error) {
	w := &lockedWriter{w: t.out}
	r := &screenedLines{in: t.in, br: bufio.NewReaderSize(t.in, 64<<10), out: w, limit: t.limit, door: t.door}
	// The lines that reach the SDK are bounded here already.
	return (&mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1}).Connect(ctx)
}

// lockedWriter keeps the SDK's messages and the refusals from interleaving on stdout: each
// Write is one whole line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Close leaves stdout open: the process's logs and the SDK's last words may follow.
func (l *lockedWriter) Close() error { return nil }

// screenedLines is stdin as the SDK reads it: only the lines screen lets through, each ending
// in a newline. It is read by the SDK's one reading goroutine.
type screenedLines struct {
	in      io.Closer
	br      *bufio.Reader
	out     io.Writer
	limit   int64
	door    *door
	pending []byte // the rest of the line being handed over
	err     error  // how stdin ended, once it has
}

func (s *screenedLines) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		line, tooLong, err := s.readLine()
		if err != nil {
			s.err = err
		}
		if len(bytes.TrimSpace(line)) == 0 && !tooLong {
			continue
		}
		ref := s.check(line, tooLong)
		if ref == nil {
			s.pending = append(line, '\n')
			continue
		}
		s.door.refused(ref)
		if _, werr := s.out.Write(ref.encode()); werr != nil {
			s.err = fmt.Errorf("answering a refused line on stdout: %w", werr)
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// check is the refusal of one line, or nil.
func (s *screenedLines) check(line []byte, tooLong bool) *refusal {
	if tooLong {
		return &refusal{reason: refusalTooLarge, code: jsonrpc.CodeInvalidRequest,
			message: fmt.Sprintf("Invalid Request: a line longer than %d bytes (gateway.max_body_bytes); send a smaller message, "+
				"or ask the operator to raise gateway.max_body_bytes", s.limit)}
	}
	_, ref := screen(line)
	return ref
}

// readLine reads the next line under the bound (internal/msgline).
func (s *screenedLines) readLine() (line []byte, tooLong bool, err error) {
	return msgline.Read(s.br, s.limit)
}

// Close closes stdin.
func (s *screenedLines) Close() error { return s.in.Close() }
