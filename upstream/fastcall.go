package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// The fast path (docs/design.md, "The fast path"): a tools/call to a stdio server is written
// and its answer read by the gateway itself, on the stdioConn the SDK's client session runs
// over, instead of by ClientSession.CallTool. The SDK decodes an answer three times (the
// message, the result, the result's content), each time through a decoder that allocates a
// buffer of 32 KiB; the gateway's connection has already split the message (decodeMessage), and
// the result is decoded once (fastdecode.go). Everything else the connection carries (every
// other request, notifications, the server's own requests) still goes to the SDK's session, so
// progress and log notifications reach their handlers as before.
//
// What is written is the message the SDK would write for the same call, byte for byte but for
// its id (trace context included: Call puts it in the params both paths encode, trace.go), and
// what a caller gets back (a result, an error, the cancellation sent when ctx ends) is what
// ClientSession.CallTool gives; TestFastPathMatchesTheSDK holds it to that. An HTTP server
// keeps the SDK's path: its connection (the SDK's streamable client) is not the gateway's to
// read.

// fastIDBase: the gateway's own requests have ids above it. The SDK's client numbers its
// requests on a connection 1, 2, 3…; it would take it 2^50 requests to reach this range, so
// the ids cannot collide. They stay integers below 2^53, which a server that reads ids as
// JSON numbers into a float64 (JavaScript) holds exactly.
const fastIDBase int64 = 1 << 50

// newProtocol is the first revision whose requests carry the client's protocol version,
// implementation and capabilities in _meta (SEP-2575).
const newProtocol = "2026-07-28"

// errClientClosing is what the SDK says of a call made on a connection that is going away.
var errClientClosing = &jsonrpc.Error{Code: codeClientClosing, Message: "client is closing"}

// fastCalls are the gateway's own calls in flight on one connection, by id.
type fastCalls struct {
	mu      sync.Mutex
	next    int64
	waiting map[int64]fastWait
	// owed are the cancellations decided and not yet written: a call gave up its id, and
	// notifications/cancelled goes out off its caller's path (notifyCancelled) or ahead of
	// the next stop call (writeCall), whichever writes first.
	owed map[int64]error
	// told are the ids whose cancellation a stop call wrote while their caller had not yet
	// woken to its context's end; giveUp clears them.
	told   map[int64]struct{}
	done   error // the connection's end: set, every call fails with it
	broken error // a write failed: new calls are not sent
}

// fastWait is one call waiting for its answer.
type fastWait struct {
	ch  chan *jsonrpc.Response
	ctx context.Context // the call's: once it ends, the call is given up
	// written: the call's request is on the wire (set under the connection's write lock, in
	// the same turn as the write). Only such a call is cancelled, ahead of a stop or after: one
	// whose request is not written yet finds its context ended when it gets the lock, and is
	// neither written nor cancelled.
	written bool
}

// register reserves the next id for a call made with ctx.
func (f *fastCalls) register(ctx context.Context) (int64, chan *jsonrpc.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.done != nil:
		return 0, nil, f.done
	case f.broken != nil:
		return 0, nil, f.broken
	}
	f.next++
	id := fastIDBase + f.next
	if f.waiting == nil {
		f.waiting = make(map[int64]fastWait)
	}
	ch := make(chan *jsonrpc.Response, 1)
	f.waiting[id] = fastWait{ch: ch, ctx: ctx}
	return id, ch, nil
}

// retire stops waiting for id's answer; one that arrives later is dropped.
func (f *fastCalls) retire(id int64) {
	f.mu.Lock()
	delete(f.waiting, id)
	f.mu.Unlock()
}

// wrote marks id's request as written. Called with the connection's write lock held.
func (f *fastCalls) wrote(id int64) {
	f.mu.Lock()
	if w, ok := f.waiting[id]; ok {
		w.written = true
		f.waiting[id] = w
	}
	f.mu.Unlock()
}

// giveUp retires id, whose call's context ended with cause, and reports whether its
// cancellation is still owed; it is not when a stop call wrote it already.
func (f *fastCalls) giveUp(id int64, cause error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.told[id]; ok {
		delete(f.told, id)
		return false
	}
	delete(f.waiting, id)
	if f.owed == nil {
		f.owed = make(map[int64]error)
	}
	f.owed[id] = cause
	return true
}

// takeOwed takes id's owed cancellation, if no one wrote it yet.
func (f *fastCalls) takeOwed(id int64) (error, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cause, ok := f.owed[id]
	delete(f.owed, id)
	return cause, ok
}

// cancelledNow takes every cancellation not yet written, in the order of the calls' ids: those
// owed, and those of calls whose request is written and whose context has ended while their
// caller has not yet woken to it (marked told, so that it does not write them again). Called
// with the connection's write lock held.
func (f *fastCalls) cancelledNow() []cancellation {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cancellation
	for id, cause := range f.owed {
		out = append(out, cancellation{id, cause})
	}
	clear(f.owed)
	for id, w := range f.waiting {
		if err := w.ctx.Err(); err != nil && w.written {
			delete(f.waiting, id)
			if f.told == nil {
				f.told = make(map[int64]struct{})
			}
			f.told[id] = struct{}{}
			out = append(out, cancellation{id, err})
		}
	}
	slices.SortFunc(out, func(a, b cancellation) int { return cmp.Compare(a.id, b.id) })
	return out
}

// cancellation is a notifications/cancelled to write.
type cancellation struct {
	id    int64
	cause error
}

func (f *fastCalls) writeFailed(err error) {
	f.mu.Lock()
	if f.broken == nil {
		f.broken = err
	}
	f.mu.Unlock()
}

// take hands a response to the gateway's call it answers. It reports whether msg was the
// answer to one of the gateway's calls, in flight or not: those never go to the SDK.
func (f *fastCalls) take(msg jsonrpc.Message) bool {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	id, ok := resp.ID.Raw().(int64)
	if !ok || id <= fastIDBase {
		return false
	}
	f.mu.Lock()
	w, ok := f.waiting[id]
	delete(f.waiting, id)
	f.mu.Unlock()
	if ok {
		w.ch <- resp // buffered, and sent to once
	}
	return true
}

// fail ends every call in flight with err, as the SDK ends its own when the connection is
// lost, and every later one before it is sent. The first error stays.
func (f *fastCalls) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done != nil {
		return
	}
	f.done = err
	for id, w := range f.waiting {
		w.ch <- &jsonrpc.Response{ID: wireID(id), Error: err}
	}
	f.waiting = nil
}

// wireID is id as a JSON-RPC id, as it reads off the wire.
func wireID(id int64) jsonrpc.ID {
	v, _ := jsonrpc.MakeID(float64(id)) // exact: id < 2^53
	return v
}

// fastConn is the connection of s that the fast path can send on, or nil.
func (u *Upstream) fastConn(s *session) *stdioConn {
	if !u.opts.FastPath || s.proc == nil {
		return nil
	}
	c, _ := s.conn.(*stdioConn)
	return c
}

// callTool sends a tools/call on c and waits for its answer, as s.cs.CallTool(ctx, params)
// would. ok is false, with nothing sent, when the call must go through the SDK instead.
func (c *stdioConn) callTool(ctx context.Context, s *session, params *mcp.CallToolParams) (res *mcp.CallToolResult, ok bool, err error) {
	const method = "tools/call"
	// The request line is built in one buffer, taken from a pool and given back once written:
	// the params first, after room for the line's head, which needs the id the call is
	// registered under, and registering waits until the params are known to encode.
	buf := callLines.Get().(*[]byte)
	defer putCallLine(buf)
	full, ok, err := encodeCallParams(append((*buf)[:0], make([]byte, lineHeadRoom)...), s, params)
	switch {
	case !ok:
		return nil, false, nil
	case err != nil:
		return nil, true, fmt.Errorf("calling %q: marshaling call parameters: %w", method, err)
	}
	full = append(full, "}\n"...)
	*buf = full // the buffer as it grew, for the pool
	id, answer, err := c.fast.register(ctx)
	if err != nil {
		// As the SDK says it of a connection whose reading or writing ended: not sent.
		return nil, true, fmt.Errorf("%w: calling %q: %w: %w", mcp.ErrConnectionClosed, method, errClientClosing, err)
	}
	var head [lineHeadRoom]byte
	h := append(head[:0], `{"jsonrpc":"2.0","id":`...)
	h = strconv.AppendInt(h, id, 10)
	h = append(h, `,"method":"tools/call","params":`...)
	line := full[lineHeadRoom-len(h):]
	copy(line, h)
	var resp *jsonrpc.Response
	if err := c.writeCall(ctx, id, line, classOf(ctx) == classStop); err != nil {
		c.fast.retire(id)
		if errors.Is(err, errGaveUpUnwritten) {
			// Given up before its request was written: the server has nothing to cancel.
			return nil, true, ctx.Err()
		}
		if ctx.Err() == nil {
			c.fast.writeFailed(err)
		}
		resp = &jsonrpc.Response{ID: wireID(id), Error: err}
	} else {
		select {
		case resp = <-answer:
		case <-ctx.Done():
		}
	}
	// An answer read from the server is an answer, whatever its code. The SDK takes one with
	// the code of its own "client/server is closing" (-32003, -32004) for the connection's
	// end, which the gateway reads as "not sent" and sends the call again once the server is
	// restarted: a server that acted and then answered with that code would act twice. Here
	// such an answer is the server's JSON-RPC error, like any other
	// (TestFastPathClosingCodeIsAnAnswer).
	if ctx.Err() != nil {
		// Like the SDK, even when the answer came as ctx ended: the call is given up, the
		// server told so off the caller's path, and the caller gets ctx's error.
		if c.fast.giveUp(id, ctx.Err()) {
			go c.notifyCancelled(id)
		}
		return nil, true, ctx.Err()
	}
	if resp.Error != nil {
		return nil, true, fmt.Errorf("calling %q: %w", method, resp.Error)
	}
	res, err = decodeCallToolResult(resp.Result)
	if err != nil {
		return nil, true, fmt.Errorf("calling %q: %w", method, err)
	}
	return res, true, nil
}

// lineHeadRoom is the room left before a call's params for the head of its request line,
// `{"jsonrpc":"2.0","id":` and an id of up to 20 digits and `,"method":"tools/call","params":`.
const lineHeadRoom = 22 + 20 + 32

// callLines holds the buffers request lines are built in.
var callLines = sync.Pool{New: func() any { return new([]byte) }}

// putCallLine gives buf back to callLines, unless it grew past what is worth keeping.
func putCallLine(buf *[]byte) {
	if cap(*buf) <= 64<<10 {
		*buf = (*buf)[:0]
		callLines.Put(buf)
	}
}

// codeClientClosing is the code of the SDK's own error for a call on a connection that is going
// away.
const codeClientClosing = -32003

// notifyCancelled tells the server that the gateway gave up its call id, unless a stop call
// told it first. It waits for the connection as long as the connection's writes do: a server
// that stops reading its stdin holds it until the pipe is closed, off the caller's path.
func (c *stdioConn) notifyCancelled(id int64) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if cause, ok := c.fast.takeOwed(id); ok {
		_, _ = c.t.w.Write(cancelledLine(id, cause)) // best effort, as the SDK's
	}
}

// errGaveUpUnwritten: the call's context ended before its request was written.
var errGaveUpUnwritten = errors.New("given up before it was written")

// writeCall writes the request line of call id, and marks it written in the same turn of the
// connection's write lock. A call whose context has ended by the time it has the lock is not
// written. A stop call's line goes after the notifications/cancelled of every call given up
// before it: the server reads that the calls it is running were cancelled before it reads the
// stop, whichever goroutine got to the wire first. A robot told to stop while it brakes after
// a cancellation knows it was braking (the halt, docs/operations.md).
func (c *stdioConn) writeCall(ctx context.Context, id int64, line []byte, stop bool) error {
	if ctx.Err() != nil {
		return errGaveUpUnwritten
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if ctx.Err() != nil {
		return errGaveUpUnwritten // it ended while the call waited for the lock (behind a stop, say)
	}
	if stop {
		for _, cn := range c.fast.cancelledNow() {
			if _, err := c.t.w.Write(cancelledLine(cn.id, cn.cause)); err != nil {
				return err
			}
		}
	}
	if _, err := c.t.w.Write(line); err != nil {
		return err
	}
	c.fast.wrote(id)
	return nil
}

// cancelledLine is the notifications/cancelled of call id, as the SDK writes it.
func cancelledLine(id int64, cause error) []byte {
	params, err := wirejson.Marshal(&mcp.CancelledParams{Reason: cause.Error(), RequestID: id})
	if err != nil {
		params = []byte(`{"requestId":` + strconv.FormatInt(id, 10) + `}`)
	}
	line := make([]byte, 0, len(params)+80)
	line = append(line, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":`...)
	line = append(line, params...)
	return append(line, "}\n"...)
}

// encodeCallParams is the params of the tools/call the SDK's client session would send for
// params: arguments {} when there are none, and on MCP 2026-07-28 and later the protocol
// version and the client's implementation added to _meta. ok is false when the SDK would add
// what the gateway cannot know: the client's capabilities, which Origin.meta always sets.
func encodeCallParams(b []byte, s *session, params *mcp.CallToolParams) (body []byte, ok bool, err error) {
	p := *params
	if p.Arguments == nil {
		p.Arguments = map[string]any{}
	}
	if init := s.cs.InitializeResult(); init != nil && init.ProtocolVersion >= newProtocol {
		if _, has := p.Meta[mcp.MetaKeyClientCapabilities]; !has {
			return nil, false, nil
		}
		_, hasVersion := p.Meta[mcp.MetaKeyProtocolVersion]
		_, hasInfo := p.Meta[mcp.MetaKeyClientInfo]
		if !hasVersion || (!hasInfo && s.impl != nil) {
			m := make(mcp.Meta, len(p.Meta)+2)
			for k, v := range p.Meta {
				m[k] = v
			}
			if !hasVersion {
				m[mcp.MetaKeyProtocolVersion] = init.ProtocolVersion
			}
			if !hasInfo && s.impl != nil {
				m[mcp.MetaKeyClientInfo] = s.impl
			}
			p.Meta = m
		}
	}
	body, err = appendCallParams(b, &p)
	return body, true, err
}
