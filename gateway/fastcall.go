package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/strictjson"
	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// The fast path from an HTTP client (issue 17, docs/design.md "The fast path"). The door has
// read and screened every /mcp body already (strict.go); the SDK would decode it again, about
// four times, each time with a streaming decoder that allocates tens of kilobytes, and carry
// the call through its streams, channels and goroutines. A POST whose body the door read as
// one tools/call request of a live stateful session is served here instead, decoded once,
// whenever the answer is certain to be the SDK's, byte for byte:
//
//   - its headers are ones the SDK takes: Content-Type application/json, an Accept of both
//     application/json and text/event-stream, Mcp-Protocol-Version the one the session
//     negotiated (before 2026-07-28), no Last-Event-ID, the principal the session was opened
//     with;
//   - nothing can need the SDK's tie of server-to-client messages to the request's stream: the
//     client declared neither sampling nor elicitation and set no log level (so an upstream's
//     requests are refused and its log messages not passed on, whichever path serves the
//     call), and the params carry no inputResponses or requestState (the multi-round-trip and
//     suspended calls of suspend.go);
//   - the tool is one handleCall would serve: listed and registered with the MCP server, or
//     not listed (unknown, hidden, quarantined: unlistedCalls);
//   - the params are plain: a name without escapes, _meta without the keys of the protocol
//     (io.modelcontextprotocol/…), a progressToken that is a string or a number. Trace
//     context in _meta (traceparent, tracestate, baggage) is read, as the SDK's path reads it,
//     when telemetry is on (callcontext.go), and left alone when it is off.
//
// Anything else goes to the SDK as before. The call is the one handleCall makes (newCall,
// callerOfToken, originFor, runCall), under the same caller watch (callerwatch.go) and idle
// count (sessionlimits.go). The answer is the SDK's: status 200, its three headers, each
// message an SSE event "message" (no id: the gateway keeps no event store), progress
// notifications before the result, each flushed, the result written as the handler returns
// (over HTTP/1.1, chunked as the SDK's flushed stream is, in one write with the headers and
// the stream's end when no progress came before it), and the same JSON, encoded with
// encoding/json without HTML escaping as the SDK's jsonrpc2 does. A result that asks for
// input is handed over to the SDK (hand). notifications/cancelled
// naming a call served here cancels it, and goes on to the SDK, which finds nothing to cancel.

// fastPath is the state of the fast path: the sessions it may serve and their calls in flight.
type fastPath struct {
	g    *Gateway
	on   bool          // gateway.fast_path, and a stateful handler to serve sessions of
	idle *idleSessions // the stateful handler's, set by statefulHandler

	mu   sync.RWMutex
	open map[string]*fastSession // session id → session, from its initialize to its end

	served   atomic.Uint64 // tools/call answered here, for tests
	handover handover
}

// fastSession is a stateful session the fast path may serve.
type fastSession struct {
	ss      *mcp.ServerSession
	user    string // the principal of the initialize; "" without authentication
	version string // the protocol revision negotiated
	asks    bool   // the client declared sampling or elicitation

	mu    sync.Mutex
	calls map[jsonrpc.ID]context.CancelCauseFunc // requests served here in flight
	sdk   map[jsonrpc.ID]int                     // requests handed to the SDK not yet done
}

// fastCalls is the door's serve hook for gateway.http_mode mode, or nil when the fast path is
// off or there are no stateful sessions to serve.
func (g *Gateway) fastCalls(mode string) func(http.ResponseWriter, *http.Request, doorMessage) bool {
	if !g.fast.on || mode == config.HTTPModeStateless {
		return nil
	}
	return g.fast.serve
}

// sessions is a receiving middleware of the MCP server: it notes each stateful session once
// its initialize has been answered, and forgets it when it ends.
func (f *fastPath) sessions(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil && f.on {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			ir, _ := res.(*mcp.InitializeResult)
			if ss != nil && ir != nil && ss.ID() != "" {
				f.opened(ss, ir.ProtocolVersion, req.GetExtra())
			}
		}
		return res, err
	}
}

func (f *fastPath) opened(ss *mcp.ServerSession, negotiated string, extra *mcp.RequestExtra) {
	init := ss.InitializeParams()
	if init == nil || init.ProtocolVersion != negotiated || negotiated >= revision20260728 {
		return // the client asked for a revision it did not get: left to the SDK
	}
	s := &fastSession{ss: ss, version: negotiated}
	if extra != nil && extra.TokenInfo != nil {
		s.user = extra.TokenInfo.UserID
	}
	if c := init.Capabilities; c != nil {
		//lint:ignore SA1019 sampling is deprecated from MCP 2026-07-28 on, still served and carried.
		s.asks = c.Sampling != nil || c.Elicitation != nil
	}
	id := ss.ID()
	f.mu.Lock()
	if f.open == nil {
		f.open = map[string]*fastSession{}
	}
	f.open[id] = s
	f.mu.Unlock()
	go func() {
		_ = ss.Wait()
		f.mu.Lock()
		if f.open[id] == s {
			delete(f.open, id)
		}
		f.mu.Unlock()
	}()
}

// serve answers the message m of POST r itself when it can (see above) and reports whether it
// did. It also cancels the calls notifications/cancelled names, and keeps track of the
// requests it leaves to the SDK, so that none of its own reuses the id of one in flight there.
func (f *fastPath) serve(w http.ResponseWriter, r *http.Request, m doorMessage) bool {
	if m.batch {
		return false
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return false
	}
	r.Header.Del(handoverHeader) // only serve sets it
	f.mu.RLock()
	s := f.open[sid]
	f.mu.RUnlock()
	if s == nil {
		return false
	}
	if !m.id.IsValid() {
		if m.method == "notifications/cancelled" {
			s.cancelled(m.params)
		}
		return false
	}
	if m.method != "tools/call" || !s.takes(r) {
		return s.toSDK(r, m.id)
	}
	p, ok := readCallParams(m.params)
	if !ok || s.asks || !f.plainSession(sid) || !f.g.handledHere(p.name) {
		return s.toSDK(r, m.id)
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	s.mu.Lock()
	if _, dup := s.calls[m.id]; dup {
		s.mu.Unlock()
		writeDuplicate(w, m.id)
		return true
	}
	if s.sdk[m.id] > 0 {
		s.mu.Unlock()
		return s.toSDK(r, m.id) // the SDK answers it: as a duplicate, or it has just ended
	}
	if s.calls == nil {
		s.calls = map[jsonrpc.ID]context.CancelCauseFunc{}
	}
	s.calls[m.id] = cancel
	s.mu.Unlock()
	f.served.Add(1)
	if f.idle != nil && f.idle.begin(sid, false) {
		defer f.idle.done(sid)
	}
	return f.g.serveCall(ctx, cancel, w, r, s, m.id, p)
}

// A result that asks the client for input (an upstream of MCP 2026-07-28 may return one) is
// fulfilled by the SDK for a client of an older revision: it sends the client the requests on
// the call's stream and calls handleCall again with the answers. When a call served here ends
// so, before anything was written, the request is handed over to the SDK with its result:
// handleCall answers it with that result (claim) instead of calling again, and the SDK carries
// on as it would have.
const handoverHeader = "Mcp-Gateway-Handover"

type handover struct {
	mu      sync.Mutex
	seq     uint64
	results map[string]*mcp.CallToolResult
}

// hand keeps res for the SDK's handling of r, until r ends.
func (f *fastPath) hand(r *http.Request, res *mcp.CallToolResult) {
	h := &f.handover
	h.mu.Lock()
	h.seq++
	token := strconv.FormatUint(h.seq, 36)
	if h.results == nil {
		h.results = map[string]*mcp.CallToolResult{}
	}
	h.results[token] = res
	h.mu.Unlock()
	r.Header.Set(handoverHeader, token)
	context.AfterFunc(r.Context(), func() {
		h.mu.Lock()
		delete(h.results, token)
		h.mu.Unlock()
	})
}

// claim is the result a call served here handed over with req, if any, once.
func (f *fastPath) claim(req *mcp.CallToolRequest) (*mcp.CallToolResult, bool) {
	if req.Extra == nil || req.Extra.Header == nil {
		return nil, false
	}
	token := req.Extra.Header.Get(handoverHeader)
	if token == "" {
		return nil, false
	}
	h := &f.handover
	h.mu.Lock()
	defer h.mu.Unlock()
	res, ok := h.results[token]
	delete(h.results, token)
	return res, ok
}

// takes reports whether r has headers the SDK's stateful handler serves for session s.
func (s *fastSession) takes(r *http.Request) bool {
	h := r.Header
	if len(h["Last-Event-Id"]) > 0 || h.Get("Content-Type") != "application/json" ||
		h.Get("Mcp-Protocol-Version") != s.version || !acceptsBoth(h["Accept"]) {
		return false
	}
	if s.user != "" {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil || ti.UserID != s.user {
			return false // the SDK answers 403
		}
	}
	return true
}

// acceptsBoth reports whether Accept values take both application/json and
// text/event-stream, as the streamable transport requires of a POST.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			media, _, _ := strings.Cut(item, ";")
			media = strings.TrimSpace(media)
			switch {
			case strings.EqualFold(media, "application/json"), strings.EqualFold(media, "application/*"):
				jsonOK = true
			case strings.EqualFold(media, "text/event-stream"), strings.EqualFold(media, "text/*"):
				streamOK = true
			case media == "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// plainSession reports whether the client of session sid set no log level: its upstreams'
// log messages are then passed to nobody, whichever path serves the call.
func (f *fastPath) plainSession(sid string) bool {
	//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28 on, still served and carried.
	level, _ := f.g.sessions.get(sid).logLevel.Load().(mcp.LoggingLevel)
	return level == ""
}

// handledHere reports whether the SDK would hand a tools/call of name to handleCall: a listed
// tool it has registered, or one unlistedCalls serves.
func (g *Gateway) handledHere(name string) bool {
	t, found := g.Resolve(name)
	if !found {
		return true
	}
	if !t.Hidden && t.Quarantine == "" {
		names := g.servedNames.Load()
		if names == nil || !(*names)[name] {
			return false // the SDK answers "unknown tool"
		}
	}
	return true
}

// toSDK leaves request id of r to the SDK, noting it in flight there until r ends.
func (s *fastSession) toSDK(r *http.Request, id jsonrpc.ID) bool {
	s.mu.Lock()
	if s.sdk == nil {
		s.sdk = map[jsonrpc.ID]int{}
	}
	s.sdk[id]++
	s.mu.Unlock()
	context.AfterFunc(r.Context(), func() {
		s.mu.Lock()
		if s.sdk[id]--; s.sdk[id] <= 0 {
			delete(s.sdk, id)
		}
		s.mu.Unlock()
	})
	return false
}

// cancelled cancels the call served here that notifications/cancelled with params names, as
// the SDK cancels its own: the call's context ends with context.Canceled.
func (s *fastSession) cancelled(params []byte) {
	doc, e := strictjson.Scan(params, cancelKeys)
	if e != nil || doc.Kind != '{' || !doc.Members[0].Seen {
		return
	}
	var raw any
	if json.Unmarshal(params[doc.Members[0].Start:doc.Members[0].End], &raw) != nil {
		return
	}
	id, err := jsonrpc.MakeID(raw)
	if err != nil {
		return
	}
	s.mu.Lock()
	cancel := s.calls[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel(nil) // context.Canceled, as the SDK's
	}
}

var cancelKeys = []string{"requestId"}

// callParams are the params of a tools/call, decoded once.
type callParams struct {
	name  string
	args  json.RawMessage // as they arrived; nil when absent
	token any             // the progress token; nil for none
	// trace are the JSON values of _meta's traceparent, tracestate and baggage as they
	// arrived, nil when absent: decoded only with telemetry on (traceMeta).
	trace [3][]byte
}

// The keys of tools/call params and of their _meta that readCallParams looks for, as the
// SDK reads them: exactly, never ignoring case. metaKeys are the progress token, the
// protocol's keys (metaKeys[1:metaTrace]), then the trace context's.
var (
	callKeys = []string{"name", "arguments", "_meta", "inputResponses", "requestState"}
	metaKeys = []string{"progressToken", mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, upstream.MetaKeyLogLevel, mcp.MetaKeyClientInfo,
		telemetry.KeyTraceparent, telemetry.KeyTracestate, telemetry.KeyBaggage}
)

// metaTrace is the index in metaKeys of the first key of trace context.
const metaTrace = 5

// readCallParams decodes params, which the door found strict JSON, and reports whether they
// are plain enough to serve here.
func readCallParams(params []byte) (callParams, bool) {
	var p callParams
	doc, e := strictjson.Scan(params, callKeys)
	if e != nil || doc.Kind != '{' {
		return p, false
	}
	span := func(d *strictjson.Doc, data []byte, i int) []byte {
		if !d.Members[i].Seen {
			return nil
		}
		return data[d.Members[i].Start:d.Members[i].End]
	}
	if doc.Members[3].Seen || doc.Members[4].Seen {
		return p, false // a multi-round-trip continuation
	}
	name := span(&doc, params, 0)
	if len(name) < 2 || name[0] != '"' || bytes.IndexByte(name, '\\') >= 0 {
		return p, false
	}
	p.name = string(name[1 : len(name)-1])
	p.args = span(&doc, params, 1)
	meta := span(&doc, params, 2)
	if meta == nil || string(meta) == "null" {
		return p, true
	}
	md, e := strictjson.Scan(meta, metaKeys)
	if e != nil || md.Kind != '{' {
		return p, false
	}
	for i := 1; i < metaTrace; i++ {
		if md.Members[i].Seen {
			return p, false // the protocol's own keys change how the call is served
		}
	}
	for i := range p.trace {
		p.trace[i] = span(&md, meta, metaTrace+i)
	}
	token := span(&md, meta, 0)
	switch {
	case token == nil || string(token) == "null":
	case token[0] == '"' && bytes.IndexByte(token, '\\') < 0:
		p.token = string(token[1 : len(token)-1])
	case token[0] == '-' || token[0] >= '0' && token[0] <= '9':
		var n float64
		if json.Unmarshal(token, &n) != nil {
			return p, false
		}
		p.token = n
	default:
		return p, false
	}
	return p, true
}

// traceMeta is the trace context of p's _meta as the SDK's path sees it in params._meta: each
// of traceparent, tracestate and baggage that is a string, decoded; nil when there is none.
// A value that is not a string is left out, as telemetry ignores it there.
func (p *callParams) traceMeta() map[string]any {
	var meta map[string]any
	for i, raw := range p.trace {
		if len(raw) < 2 || raw[0] != '"' {
			continue
		}
		var s string
		if bytes.IndexByte(raw, '\\') < 0 {
			s = string(raw[1 : len(raw)-1]) // the door found it valid UTF-8
		} else if json.Unmarshal(raw, &s) != nil {
			continue
		}
		if meta == nil {
			meta = make(map[string]any, len(p.trace))
		}
		meta[metaKeys[metaTrace+i]] = s
	}
	return meta
}

// serveCall runs the call of request id with params p from session s, in its context ctx that
// cancel ends, and writes its progress and its answer on w as the SDK's streamable transport
// would. It reports false when it handed the request over to the SDK instead (hand).
func (g *Gateway) serveCall(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, r *http.Request, s *fastSession, id jsonrpc.ID, p callParams) bool {
	sid := s.ss.ID()
	left := g.callers.join(cancel, r.Context(), sid)
	principal, roles := callerOfToken(auth.TokenInfoFromContext(r.Context()))
	c := newCall(p.name, p.args, principal, roles)
	c.Session, c.Transport = sid, transportHTTP
	if g.opts.Telemetry != nil {
		c.RequestID = idText(id)
		ctx = g.callContext(ctx, p.traceMeta(), r.Header)
	}
	st := &sseStream{w: w, chunked: r.ProtoMajor == 1 && r.ProtoMinor >= 1}
	hdr := w.Header()
	hdr["Cache-Control"] = streamHeader.cacheControl
	hdr["Content-Type"] = streamHeader.contentType
	hdr["Connection"] = streamHeader.connection
	if st.chunked {
		// The framing the SDK's flushed stream gets, asked for, so that the answer can go
		// unflushed (sseStream.answer) without net/http framing it by a Content-Length.
		hdr["Transfer-Encoding"] = streamHeader.transferEncoding
	}
	if token := p.token; token != nil {
		c.Progress = func(n *mcp.ProgressNotificationParams) { st.notify(progressOf(token, n)) }
	}
	res, err := func() (*mcp.CallToolResult, error) {
		defer func() { // also when the chain panics (net/http recovers it)
			left()
			s.mu.Lock()
			delete(s.calls, id)
			s.mu.Unlock()
		}()
		return g.runCall(ctx, cancel, s.ss, c, g.originFor(ctx, s.ss, nil))
	}()
	if err == nil && res != nil && res.InputRequests != nil && st.handOver() {
		for _, k := range []string{"Cache-Control", "Content-Type", "Connection", "Transfer-Encoding"} {
			hdr.Del(k)
		}
		g.fast.served.Add(^uint64(0))
		g.fast.hand(r, res)
		return s.toSDK(r, id)
	}
	st.answer(id, res, err)
	return true
}

// streamHeader holds the header values of a call's event stream, set as they are (what
// Header.Set would make, without making them on every call). Each has a length equal to its
// capacity, so that an Add to one of them makes a new slice instead of writing into this one;
// net/http only reads them.
var streamHeader = struct{ cacheControl, contentType, connection, transferEncoding []string }{
	cacheControl:     []string{"no-cache, no-transform"}[:1:1],
	contentType:      []string{"text/event-stream"}[:1:1],
	connection:       []string{"keep-alive"}[:1:1],
	transferEncoding: []string{"chunked"}[:1:1],
}

// sseStream writes the messages of one request's event stream; nothing after its answer.
type sseStream struct {
	w     http.ResponseWriter
	mu    sync.Mutex
	wrote bool
	done  bool
	// chunked: HTTP/1.1, with the chunked framing asked for in the headers. The answer, the
	// stream's last event, is then written unflushed: the handler returns right after it, and
	// net/http writes headers (unless a progress event sent them), the event and the stream's
	// end in one write to the connection instead of two (an answer larger than net/http's
	// buffers, a few KB, goes out in more as it is written).
	chunked bool
}

// handOver ends the stream unwritten, for the SDK to answer the request, and reports whether
// it could: not once a message was written.
func (st *sseStream) handOver() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wrote {
		return false
	}
	st.done = true
	return true
}

var eventBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// notify sends a progress notification.
func (st *sseStream) notify(n *mcp.ProgressNotificationParams) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return // the SDK refuses a message for a request it has answered
	}
	b := eventBufs.Get().(*bytes.Buffer)
	defer putBuf(b)
	b.WriteString("event: message\ndata: ")
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/progress","params":`)
	if wirejson.Append(b, n) != nil {
		return
	}
	b.WriteString("}\n\n")
	st.write(b.Bytes())
}

// answer sends the response to request id: res, or the JSON-RPC error err.
func (st *sseStream) answer(id jsonrpc.ID, res *mcp.CallToolResult, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.done = true
	b := eventBufs.Get().(*bytes.Buffer)
	defer putBuf(b)
	b.WriteString("event: message\ndata: ")
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	appendID(b, id)
	if err != nil {
		b.WriteString(`,"error":`)
		if wirejson.Append(b, rpcErrorOf(err)) != nil {
			return
		}
	} else {
		if res != nil && res.Content == nil {
			res.Content = []mcp.Content{} // as the SDK does: no "null"
		}
		b.WriteString(`,"result":`)
		if res == nil || !appendPlainResult(b, res) {
			if wirejson.Append(b, res) != nil {
				return
			}
		}
	}
	b.WriteString("}\n\n")
	if st.chunked {
		st.wrote = true
		_, _ = st.w.Write(b.Bytes())
		return
	}
	st.write(b.Bytes())
}

func (st *sseStream) write(b []byte) {
	st.wrote = true
	_, _ = st.w.Write(b)
	if fl, ok := st.w.(http.Flusher); ok {
		fl.Flush()
	} else {
		_ = http.NewResponseController(st.w).Flush()
	}
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		b.Reset()
		eventBufs.Put(b)
	}
}

// methodNotFoundRaw is the SDK's switch (MCPGODEBUG nomethodnotfoundcodeinerror=1) that
// leaves a method-not-found error as the handler returned it.
var methodNotFoundRaw = strings.Contains(os.Getenv("MCPGODEBUG"), "nomethodnotfoundcodeinerror=1")

// rpcErrorOf is the error object of a JSON-RPC response to a call that returned err, as the
// SDK's jsonrpc2 makes it: a method-not-found error names the method instead.
func rpcErrorOf(err error) *jsonrpc.Error {
	we, ok := err.(*jsonrpc.Error)
	if !ok {
		return &jsonrpc.Error{Message: err.Error()}
	}
	if we.Code == jsonrpc.CodeMethodNotFound && !methodNotFoundRaw {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + strconv.Quote("tools/call")}
	}
	return we
}

// writeDuplicate answers a request whose id is that of a call of its session in flight, as the
// SDK does.
func writeDuplicate(w http.ResponseWriter, id jsonrpc.ID) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-cache, no-transform")
	hdr.Set("Connection", "keep-alive")
	hdr.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	b := eventBufs.Get().(*bytes.Buffer)
	defer putBuf(b)
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	appendID(b, id)
	b.WriteString(`,"error":`)
	if wirejson.Append(b, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("duplicate in-flight request ID %v", id.Raw())}) != nil {
		return
	}
	b.WriteString("}")
	_, _ = w.Write(b.Bytes())
}
