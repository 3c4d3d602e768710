package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// connect is a stdio ⇄ streamable-HTTP bridge for clients that can only launch a command, such
// as most IDEs: it serves one MCP session on stdin/stdout and carries every message to the
// gateway that owns the robot, and back.
//
// It works at the level of JSON-RPC messages, not with SDK sessions. A session on each side
// would end every message in an SDK type and make it anew on the other: ids renumbered,
// fields and methods the SDK does not know dropped, and every new feature of the protocol a
// change here. Here a line from the IDE is sent as the body of a POST byte for byte, and what
// the gateway sends back is passed on as it came, one line per message; the bridge reads only
// the envelope (id, method) and the little it must to speak HTTP for the IDE (below).
//
// It does not use the SDK's streamable client transport either: that transport learns the
// negotiated protocol version and opens its stream for the server's own messages only through
// an unexported hook the SDK's client calls, and it ends the connection at any HTTP refusal
// without a JSON-RPC body (401, 413), where the IDE should get the gateway's reason instead.
//
// What the bridge adds for HTTP:
//   - Mcp-Session-Id, from the answer to initialize, on every later request, and a DELETE of
//     the session at the end;
//   - Mcp-Protocol-Version: the request's own _meta version (MCP 2026-07-28), else the version
//     initialize negotiated; from 2026-07-28 on also Mcp-Method, Mcp-Name and the Mcp-Param-*
//     headers of tools whose input schema asks for them (learnt from tools/list results);
//   - after notifications/initialized (before 2026-07-28), the GET stream on which the gateway
//     sends what belongs to no request (list_changed, resources/updated);
//   - a ping every --keepalive while the session is open, since the gateway ends sessions that
//     send nothing for gateway.session_idle_timeout and this one is open as long as the IDE is;
//   - the bearer token from an environment variable, never from a flag.
//
// notifications/cancelled is sent on, and the POST of the cancelled request is then closed:
// either one reaches the gateway, which cancels the call and tells the robot. When the gateway
// cannot be reached or no longer knows the session, every request in flight is answered with
// an error, and the bridge exits 1 with the reason on stderr.

// defaultTokenEnv is the environment variable connect reads the bearer token from.
const defaultTokenEnv = "MCP_GATEWAY_TOKEN"

// maxMessage bounds one message in either direction: a line from the IDE, a message from the
// gateway. Both peers are the user's own programs and the gateway bounds what it sends
// (max_result_bytes); this only keeps a broken peer from taking the machine's memory.
const maxMessage = 64 << 20

// keepalivePrefix starts the ids of the bridge's own pings, whose answers the IDE never sees.
const keepalivePrefix = "mcp-gateway-connect-keepalive-"

// version20260728 is the first protocol revision without sessions or the GET stream, and with
// the Mcp-Method, Mcp-Name and Mcp-Param-* headers.
const version20260728 = "2026-07-28"

func runConnect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("connect", "connect URL [--token-env NAME] [--keepalive DURATION]", stdout, stderr)
	tokenEnv := fs.String("token-env", defaultTokenEnv, "environment `variable` holding the bearer token when the gateway's auth.tokens needs one")
	keepalive := fs.Duration("keepalive", time.Minute, "ping the gateway this often, so that it keeps the session open (keep it below gateway.session_idle_timeout); 0 for never")
	// The URL may come before or after the flags, as in every command: IDE configs are written
	// both ways.
	positional, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return fs.usageError("give the URL of the gateway's MCP endpoint, for example http://127.0.0.1:8080/mcp")
	}
	endpoint, err := endpointURL(positional[0])
	if err != nil {
		return err
	}
	token := strings.TrimSpace(os.Getenv(*tokenEnv))
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "token-env" })
	if explicit && token == "" {
		return fmt.Errorf("--token-env names %s, which is not set or empty: set it to a bearer token from the gateway's auth.tokens", *tokenEnv)
	}
	b := newBridge(endpoint, token, *tokenEnv, *keepalive, stderr)
	return b.serve(ctx, os.Stdin, stdout)
}

// endpointURL checks the URL connect is given. One without a path gets /mcp, where the gateway
// serves MCP.
func endpointURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not the URL of a gateway's MCP endpoint; give one like http://127.0.0.1:8080/mcp", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// bridge is one MCP session carried between stdin/stdout and the gateway's /mcp.
type bridge struct {
	url       string
	token     string
	tokenEnv  string
	keepalive time.Duration
	hc        *http.Client
	log       *slog.Logger
	out       *lineWriter

	// ctx is the session's: cancelling it closes every request to the gateway.
	ctx    context.Context
	cancel context.CancelFunc
	// calling counts the IDE's requests in flight that the end of stdin waits for.
	calling sync.WaitGroup

	mu         sync.Mutex
	sessionID  string
	negotiated string                    // the version initialize negotiated
	metaVer    string                    // the latest _meta version of a request (MCP 2026-07-28)
	reached    bool                      // the gateway has answered at least once
	calls      map[string]*pending       // requests in flight, by id
	params     map[string][]paramBinding // the Mcp-Param-* headers of tools, by tool name
	listening  bool                      // the GET stream has been started
	pings      int
	err        error         // why the session ended early, once it has
	lost       bool          // err means the session is gone: no DELETE
	done       chan struct{} // closed when err is set
}

// pending is a request in flight to the gateway: one of the IDE's, or the bridge's own ping.
type pending struct {
	id       json.RawMessage
	key      string
	method   string
	internal bool
	cancel   context.CancelFunc
}

func newBridge(endpoint, token, tokenEnv string, keepalive time.Duration, stderr io.Writer) *bridge {
	ctx, cancel := context.WithCancel(context.Background())
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &bridge{
		url:       endpoint,
		token:     token,
		tokenEnv:  tokenEnv,
		keepalive: keepalive,
		// No timeout: a call's stream stays open as long as the call runs, and the GET stream
		// as long as the session.
		hc:     &http.Client{Transport: transport},
		log:    slog.New(slog.NewTextHandler(stderr, nil)),
		ctx:    ctx,
		cancel: cancel,
		calls:  map[string]*pending{},
		params: map[string][]paramBinding{},
		done:   make(chan struct{}),
	}
}

// serve carries the session until the IDE closes stdin (then the requests in flight are
// answered first), ctx ends (a signal), or the gateway is lost: then it returns why.
func (b *bridge) serve(ctx context.Context, in io.Reader, out io.Writer) error {
	b.out = &lineWriter{w: out}
	lines := make(chan []byte)
	inErr := make(chan error, 1)
	go func() { inErr <- b.readLines(in, lines) }()
	var tick <-chan time.Time
	if b.keepalive > 0 {
		t := time.NewTicker(b.keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case line := <-lines:
			b.dispatch(line)
		case <-tick:
			b.ping()
		case <-b.done:
			b.end()
			return b.failure()
		case <-ctx.Done():
			b.end()
			return nil
		case err := <-inErr:
			if err != nil {
				b.end()
				return fmt.Errorf("reading stdin: %w", err)
			}
			// The IDE is done. Its requests in flight still get their answers (each call has
			// the gateway's deadline), unless the IDE stops the bridge first.
			idle := make(chan struct{})
			go func() { b.calling.Wait(); close(idle) }()
			select {
			case <-idle:
			case <-b.done:
			case <-ctx.Done():
			}
			b.end()
			return b.failure()
		}
	}
}

// readLines sends each non-blank line of in to lines until in ends (nil at EOF) or the session
// does. A line over maxMessage is answered here.
func (b *bridge) readLines(in io.Reader, lines chan<- []byte) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := readLine(br, maxMessage)
		if errors.Is(err, errTooLarge) {
			b.answerLocal(nil, codeInvalidRequest, fmt.Sprintf("Invalid Request: a line longer than %d bytes", maxMessage))
			continue
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			select {
			case lines <- line:
			case <-b.ctx.Done():
				return nil
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// JSON-RPC error codes of the answers the bridge makes itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInternalError  = -32603
)

// envelope is what the bridge reads of a message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Error  json.RawMessage `json:"error"`
	Result json.RawMessage `json:"result"`
}

func (e *envelope) hasID() bool { return len(e.ID) > 0 && string(e.ID) != "null" }

// idKey is a request id as a map key: its JSON, without white space.
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// dispatch sends one line from the IDE on to the gateway.
func (b *bridge) dispatch(line []byte) {
	if !json.Valid(line) {
		b.answerLocal(nil, codeParseError, "Parse error: a line on stdin that is not one JSON value")
		return
	}
	var m envelope
	if line[0] != '{' || json.Unmarshal(line, &m) != nil {
		b.answerLocal(nil, codeInvalidRequest, "Invalid Request: mcp-gateway connect passes on one JSON-RPC message (an object) per line, not batches or other values")
		return
	}
	switch {
	case m.Method != "" && m.hasID():
		b.request(line, &m)
	case m.Method != "":
		b.notify(line, &m)
	default:
		// The IDE's answer to a request of the gateway (sampling, elicitation, roots).
		go b.post(b.ctx, line, &m, nil)
	}
}

// request sends one of the IDE's requests. Each runs on its own, except initialize: its answer
// brings the session id every later message needs.
func (b *bridge) request(line []byte, m *envelope) {
	if v := metaVersion(m.Params); v != "" {
		b.mu.Lock()
		b.metaVer = v
		b.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(b.ctx)
	p := &pending{id: m.ID, key: idKey(m.ID), method: m.Method, cancel: cancel}
	b.mu.Lock()
	failed := b.err
	if failed == nil {
		b.calls[p.key] = p
	}
	b.mu.Unlock()
	if failed != nil {
		cancel()
		b.answerLocal(m.ID, codeInternalError, "mcp-gateway connect: "+failed.Error())
		return
	}
	if m.Method == "initialize" {
		b.post(ctx, line, m, p)
		return
	}
	// subscriptions/listen (MCP 2026-07-28) lasts as long as the session: the end of stdin does
	// not wait for it.
	wait := m.Method != "subscriptions/listen"
	if wait {
		b.calling.Add(1)
	}
	go func() {
		if wait {
			defer b.calling.Done()
		}
		b.post(ctx, line, m, p)
	}()
}

// notify sends one of the IDE's notifications, in order. After notifications/cancelled the
// cancelled request's POST is closed too; after notifications/initialized the GET stream opens.
func (b *bridge) notify(line []byte, m *envelope) {
	b.post(b.ctx, line, m, nil)
	switch m.Method {
	case "notifications/cancelled":
		var params struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &params) != nil || len(params.RequestID) == 0 {
			return
		}
		b.mu.Lock()
		p := b.calls[idKey(params.RequestID)]
		b.mu.Unlock()
		if p != nil {
			p.cancel()
		}
	case "notifications/initialized":
		b.mu.Lock()
		start := !b.listening && b.err == nil && b.negotiated != "" && b.negotiated < version20260728
		b.listening = b.listening || start
		b.mu.Unlock()
		if start {
			go b.listen()
		}
	}
}

// ping asks the gateway whether it is there, so that it keeps an idle session open, and finds
// out that it is gone while the IDE sends nothing.
func (b *bridge) ping() {
	b.mu.Lock()
	if b.sessionID == "" || b.err != nil {
		b.mu.Unlock()
		return
	}
	b.pings++
	id, _ := json.Marshal(fmt.Sprintf("%s%d", keepalivePrefix, b.pings))
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	p := &pending{id: id, key: idKey(id), method: "ping", internal: true, cancel: cancel}
	b.calls[p.key] = p
	b.mu.Unlock()
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"method":"ping"}`, id)
	go b.post(ctx, body, &envelope{ID: id, Method: "ping"}, p)
}

// post sends one message. For a request (p set) it passes on what the gateway sends back until
// the answer, and makes sure the IDE gets an answer unless the request was cancelled.
func (b *bridge) post(ctx context.Context, body []byte, m *envelope, p *pending) {
	if p != nil {
		defer b.forget(p)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	if err != nil {
		b.fail(err, true)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	b.setHeaders(req.Header, m)
	resp, err := b.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			b.fail(b.unreachable(err), true)
		}
		return
	}
	defer resp.Body.Close()
	b.answered(resp)
	if err := b.fatalStatus(resp); err != nil {
		b.fail(err, true)
		return
	}
	if resp.StatusCode/100 != 2 {
		b.refused(resp, m, p)
		return
	}
	if p == nil {
		return // a notification or an answer, accepted
	}
	var done bool
	switch media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media {
	case "application/json":
		data, err := readAtMost(resp.Body, maxMessage)
		if err != nil {
			break
		}
		done = b.toIDE(data) == p.key
	case "text/event-stream":
		err = readEvents(resp.Body, func(data []byte) bool {
			done = b.toIDE(data) == p.key
			return !done
		})
	default:
		b.answerError(p, fmt.Sprintf("the gateway answered with Content-Type %q, not application/json or text/event-stream", resp.Header.Get("Content-Type")))
		return
	}
	if done || ctx.Err() != nil {
		return
	}
	switch {
	case errors.Is(err, errTooLarge):
		b.answerError(p, fmt.Sprintf("the gateway sent a message larger than %d bytes", maxMessage))
	case b.gatewayGone():
		b.fail(b.unreachable(err), true)
	default:
		// The gateway keeps no event store, so a stream cut short cannot be resumed.
		b.answerError(p, "the gateway ended the stream of this request without answering it")
	}
}

// listen is the GET stream of a session before MCP 2026-07-28: what the gateway sends outside
// any request. It is opened again when it ends while the gateway is there; a gateway that is
// gone ends the session.
func (b *bridge) listen() {
	const attempts = 5
	failures := 0
	for b.ctx.Err() == nil {
		req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.url, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		b.setHeaders(req.Header, nil)
		resp, err := b.hc.Do(req)
		switch {
		case err != nil && b.ctx.Err() != nil:
			return
		case err != nil:
			b.fail(b.unreachable(err), true)
			return
		}
		if ferr := b.fatalStatus(resp); ferr != nil {
			resp.Body.Close()
			b.fail(ferr, true)
			return
		}
		if resp.StatusCode == http.StatusMethodNotAllowed {
			resp.Body.Close()
			return // the gateway offers no such stream
		}
		if resp.StatusCode/100 != 2 {
			data, _ := readAtMost(resp.Body, 4<<10)
			resp.Body.Close()
			b.log.Warn("the gateway refused the stream of its own notifications; list_changed and other notifications outside a request will not arrive",
				"status", resp.StatusCode, "reason", refusalReason(data))
			return
		}
		got := false
		_ = readEvents(resp.Body, func(data []byte) bool {
			got = true
			b.toIDE(data)
			return true
		})
		resp.Body.Close()
		if b.ctx.Err() != nil {
			return
		}
		if b.gatewayGone() {
			b.fail(b.unreachable(errors.New("it closed the session's stream and no longer accepts connections")), true)
			return
		}
		if got {
			failures = 0
		}
		if failures++; failures > attempts {
			b.log.Warn("the gateway keeps closing the stream of its own notifications; list_changed and other notifications outside a request will not arrive")
			return
		}
		select {
		case <-time.After(time.Duration(failures) * time.Second):
		case <-b.ctx.Done():
		}
	}
}

// setHeaders sets the headers of a message to the gateway (m nil for the GET stream and the
// DELETE).
func (b *bridge) setHeaders(h http.Header, m *envelope) {
	if b.token != "" {
		h.Set("Authorization", "Bearer "+b.token)
	}
	b.mu.Lock()
	sid, version := b.sessionID, b.negotiated
	if version == "" {
		version = b.metaVer
	}
	var bindings []paramBinding
	var call toolParams
	if m != nil && m.Method == "tools/call" {
		_ = json.Unmarshal(m.Params, &call)
		bindings = b.params[call.Name]
	}
	b.mu.Unlock()
	if sid != "" {
		h.Set("Mcp-Session-Id", sid)
	}
	if m != nil {
		if v := metaVersion(m.Params); v != "" {
			version = v
		}
		if m.Method == "initialize" {
			version = "" // initialize negotiates the version in its body
		}
	}
	if version != "" {
		h.Set("Mcp-Protocol-Version", version)
	}
	if version < version20260728 || m == nil || m.Method == "" {
		return
	}
	h.Set("Mcp-Method", m.Method)
	if name, ok := requestName(m); ok && validHeaderValue(name) {
		h.Set("Mcp-Name", name)
	}
	for k, v := range paramHeaders(bindings, call.Arguments) {
		h.Set(k, v)
	}
}

// answered notes what an answer of the gateway tells: that it is there, and the session id.
func (b *bridge) answered(resp *http.Response) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reached = true
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && b.sessionID == "" {
		b.sessionID = sid
	}
}

// fatalStatus is the error of an HTTP status that ends the session: 401 (no token or a wrong
// one) and 404 (no MCP here, or a session the gateway no longer knows).
func (b *bridge) fatalStatus(resp *http.Response) error {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		data, _ := readAtMost(resp.Body, 4<<10)
		said := refusalReason(data)
		if b.token == "" {
			return fmt.Errorf("the gateway at %s needs a bearer token (HTTP 401: %s): set the environment variable %s to a token from the gateway's auth.tokens, or name another variable with --token-env",
				b.url, said, b.tokenEnv)
		}
		return fmt.Errorf("the gateway at %s refused the bearer token in the environment variable %s (HTTP 401: %s): set it to a token from the gateway's auth.tokens",
			b.url, b.tokenEnv, said)
	case http.StatusNotFound:
		b.mu.Lock()
		sid := b.sessionID
		b.mu.Unlock()
		if sid != "" {
			return fmt.Errorf("the gateway at %s no longer knows this session (it restarted, or ended the session): restart this MCP server in the IDE to open a new one", b.url)
		}
		return fmt.Errorf("nothing serves MCP at %s (HTTP 404): the gateway serves it at /mcp on its gateway.listen address", b.url)
	}
	return nil
}

// refused passes on a refusal of the gateway other than those that end the session: its
// JSON-RPC error to a request as it came (with the request's id if it has none), otherwise its
// reason as a JSON-RPC error; a refused notification or answer is logged.
func (b *bridge) refused(resp *http.Response, m *envelope, p *pending) {
	data, _ := readAtMost(resp.Body, 1<<20)
	if p == nil {
		b.log.Warn("the gateway refused a message from the IDE", "method", m.Method, "status", resp.StatusCode, "reason", refusalReason(data))
		return
	}
	var r envelope
	if json.Unmarshal(data, &r) == nil && len(r.Error) > 0 {
		if !r.hasID() {
			data = withID(data, p.id)
		}
		if b.toIDE(data) == p.key {
			return
		}
	}
	b.answerError(p, fmt.Sprintf("the gateway refused the request (HTTP %d): %s", resp.StatusCode, refusalReason(data)))
}

// toIDE writes one message of the gateway to stdout, on one line, and returns the key of the
// request it answers ("" if it answers none). After the session failed it writes nothing: the
// requests in flight have had their answers.
func (b *bridge) toIDE(data []byte) string {
	var line bytes.Buffer
	if err := json.Compact(&line, data); err != nil {
		b.log.Warn("dropped a message from the gateway that is not JSON", "error", err)
		return ""
	}
	var m envelope
	_ = json.Unmarshal(line.Bytes(), &m)
	key := ""
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return ""
	}
	var p *pending
	if m.Method == "" && m.hasID() {
		key = idKey(m.ID)
		if p = b.calls[key]; p != nil {
			delete(b.calls, key)
			b.learn(p, &m)
		}
	}
	b.mu.Unlock()
	if p != nil && p.internal {
		return key
	}
	if err := b.out.write(line.Bytes()); err != nil {
		b.fail(fmt.Errorf("writing to stdout: %w", err), false)
	}
	return key
}

// learn takes from an answer what later messages need; b.mu is held.
func (b *bridge) learn(p *pending, m *envelope) {
	switch p.method {
	case "initialize":
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(m.Result, &r) == nil && r.ProtocolVersion != "" {
			b.negotiated = r.ProtocolVersion
		}
	case "tools/list":
		var r struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if json.Unmarshal(m.Result, &r) != nil {
			return
		}
		for _, t := range r.Tools {
			if bs := paramBindings(t.InputSchema); len(bs) > 0 {
				b.params[t.Name] = bs
			} else {
				delete(b.params, t.Name)
			}
		}
	}
}

// forget drops a request that has ended without an answer (cancelled, or answered by fail).
func (b *bridge) forget(p *pending) {
	p.cancel()
	b.mu.Lock()
	if b.calls[p.key] == p {
		delete(b.calls, p.key)
	}
	b.mu.Unlock()
}

// answerError answers a request in flight with an error of the bridge's, unless it has been
// answered.
func (b *bridge) answerError(p *pending, msg string) {
	b.mu.Lock()
	mine := b.err == nil && b.calls[p.key] == p
	if mine {
		delete(b.calls, p.key)
	}
	b.mu.Unlock()
	if mine && !p.internal {
		b.answerLocal(p.id, codeInternalError, "mcp-gateway connect: "+msg)
	}
}

// answerLocal writes an error response of the bridge's own; id nil is null.
func (b *bridge) answerLocal(id json.RawMessage, code int, msg string) {
	if err := b.out.write(errorResponse(id, code, msg)); err != nil {
		b.fail(fmt.Errorf("writing to stdout: %w", err), false)
	}
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg}})
	return out
}

// withID is a JSON-RPC response with its id set.
func withID(data []byte, id json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	m["id"] = id
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}

// fail ends the session early: every request in flight gets err as its answer, and serve
// returns err. lost says that the session is gone with it, so that no DELETE is sent.
func (b *bridge) fail(err error, lost bool) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return
	}
	b.err, b.lost = err, lost
	calls := b.calls
	b.calls = map[string]*pending{}
	b.mu.Unlock()
	for _, p := range calls {
		if !p.internal {
			_ = b.out.write(errorResponse(p.id, codeInternalError, "mcp-gateway connect: "+err.Error()))
		}
		p.cancel()
	}
	close(b.done)
}

func (b *bridge) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// unreachable is the error of a gateway that cannot be reached: never reached, or gone.
func (b *bridge) unreachable(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // the method and URL are said already
	}
	b.mu.Lock()
	reached := b.reached
	b.mu.Unlock()
	if !reached {
		return fmt.Errorf("cannot reach the gateway at %s: %v; is `mcp-gateway serve` running and serving HTTP there?", b.url, err)
	}
	return fmt.Errorf("lost the gateway at %s: %v; restart this MCP server in the IDE once the gateway is back", b.url, err)
}

// gatewayGone tells a gateway that stopped (nothing accepts connections at its address) from a
// stream that ended while it runs.
func (b *bridge) gatewayGone() bool {
	u, err := url.Parse(b.url)
	if err != nil {
		return false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), 2*time.Second)
	if err != nil {
		return true
	}
	conn.Close()
	return false
}

// end closes what is left of the session: every request still open, and the session itself
// (DELETE) unless it is gone already.
func (b *bridge) end() {
	b.cancel()
	b.mu.Lock()
	sid, lost := b.sessionID, b.lost
	b.mu.Unlock()
	if sid == "" || lost {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.url, nil)
	if err != nil {
		return
	}
	b.setHeaders(req.Header, nil)
	if resp, err := b.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// lineWriter is stdout: one message per line, written whole.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) write(msg []byte) error {
	line := make([]byte, 0, len(msg)+1)
	line = append(append(line, msg...), '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(line)
	return err
}

// heldStateAdvice is what `serve --stdio` says when a running gateway holds the state file: the
// client that launched it (an IDE) should reach that gateway with connect instead of starting a
// second driver for the same robot.
func heldStateAdvice(cfg *config.Config, locked *store.LockedError) string {
	o := locked.Owner
	if o == nil || locked.Stale || len(o.Command) < 2 || o.Command[1] != "serve" {
		return fmt.Sprintf("mcp-gateway serve --stdio: %v\n", locked)
	}
	who := fmt.Sprintf("a running gateway (pid %d, since %s)", o.PID, o.Started.Local().Format(time.RFC3339))
	local := "127.0.0.1"
	if host, _ := os.Hostname(); o.Hostname != "" && o.Hostname != host {
		who = fmt.Sprintf("a gateway on host %s (pid %d, since %s)", o.Hostname, o.PID, o.Started.Local().Format(time.RFC3339))
		local = o.Hostname
	}
	head := fmt.Sprintf("mcp-gateway serve --stdio: the state file %s is held by %s, and only the gateway that owns it may drive the robot.\n", locked.Path, who)
	u := runningGatewayURL(cfg, o.Command, local)
	if u == "" {
		return head + "  That gateway serves no HTTP (it was started with --stdio, or gateway.listen is empty), so nothing can connect to it.\n" +
			"  Restart it serving HTTP (without --stdio), then let this client launch `mcp-gateway connect http://HOST:PORT/mcp` instead.\n"
	}
	return head + fmt.Sprintf("  To use that gateway from this client (an IDE's MCP server entry), launch instead:\n"+
		"    %s connect %s\n"+
		"  with the bearer token in the environment variable %s if the gateway's auth.tokens needs one.\n",
		shellWord(invokedAs()), u, defaultTokenEnv)
}

// runningGatewayURL is the /mcp URL of the gateway whose command line is argv: its --listen,
// else cfg's gateway.listen; "" when it serves no HTTP. An unspecified host (0.0.0.0, [::], "")
// is reached on local.
func runningGatewayURL(cfg *config.Config, argv []string, local string) string {
	addr := cfg.Gateway.Listen
	if l, ok := flagValue(argv, "listen", false); ok {
		addr = l
	} else if v, ok := flagValue(argv, "stdio", true); ok && v != "false" {
		addr = ""
	}
	if addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = local
	}
	scheme := "http"
	if cfg.Gateway.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/mcp"
}

// flagValue finds -name or --name in a command line and returns its value: "-name=V", or
// "-name V" unless the flag is boolean (then "true").
func flagValue(argv []string, name string, boolean bool) (string, bool) {
	for i, a := range argv {
		a, ok := strings.CutPrefix(a, "-")
		if !ok {
			continue
		}
		a = strings.TrimPrefix(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		switch {
		case a != name:
		case boolean:
			return "true", true
		case i+1 < len(argv):
			return argv[i+1], true
		}
	}
	return "", false
}

// invokedAs is this binary as the user invoked it, absolute when it was invoked by a path, so
// that a command printed for them runs as printed.
func invokedAs() string {
	arg0 := os.Args[0]
	if strings.ContainsRune(arg0, filepath.Separator) {
		if abs, err := filepath.Abs(arg0); err == nil {
			return abs
		}
	}
	return arg0
}

// shellWord quotes s for a POSIX shell when it needs it.
func shellWord(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,=@%", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
