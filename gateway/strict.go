package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/internal/strictjson"
)

// Strict input at the door (SPEC.md §15 "Strict input", issue 13). The MCP SDK decodes the
// first JSON value of a body and ignores the rest, keeps the last of two equal keys and takes
// invalid UTF-8; a proxy or an audit tap reading the same bytes another way would see another
// call than the one the robot runs. So every message from a client — an HTTP POST body to /mcp,
// a line on stdin with --stdio — is screened before the SDK sees it:
//
//   - it must be strict JSON (internal/strictjson): else -32700 Parse error;
//   - it must be a JSON-RPC 2.0 message read one way only: an object (or a batch of them) with
//     "jsonrpc":"2.0", a string method or an id with one of result and error, an id that is a
//     string or an integer, params that are an object or an array; else -32600 Invalid Request;
//   - a message for the stateful handler without an Mcp-Session-Id header must be initialize
//     (or a ping or server/discover, which the SDK answers before a session): else -32600,
//     where the SDK would open a session only to fail the call with error code 0 and an ERROR
//     log line. In gateway.http_mode auto, messages of MCP 2026-07-28 go to the stateless
//     handler and need none (http.go).
//
// A refusal is a JSON-RPC error response (application/json, HTTP 400), with the request's id
// when it can be read one way only, else null; error.data says the reason, byte and path. Each
// is counted in mcp_gateway_protocol_refusals_total{reason} and logged at WARN at most once
// per reason every refusalLogEvery, with how many were refused since the last line.

// The reasons of a protocol refusal beyond strictjson's: the label values of
// mcp_gateway_protocol_refusals_total, a fixed set.
const (
	refusalInvalidRequest = "invalid_request" // strict JSON, but not a JSON-RPC message read one way only
	refusalNoSession      = "missing_session" // stateful HTTP: a message other than initialize without Mcp-Session-Id
	refusalTooLarge       = "too_large"       // stdio: a line longer than gateway.max_body_bytes
)

// refusalReasons are every label value of mcp_gateway_protocol_refusals_total.
func refusalReasons() []string {
	out := []string{refusalInvalidRequest, refusalNoSession, refusalTooLarge}
	for _, r := range strictjson.Reasons {
		out = append(out, string(r))
	}
	return out
}

// refusalLogEvery is how often each reason of refusal is logged at most.
const refusalLogEvery = 10 * time.Second

// envelopeKeys are the top-level members of a JSON-RPC message, in the order of the m* indexes.
var envelopeKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

const (
	mJSONRPC = iota
	mID
	mMethod
	mParams
	mResult
	mError
)

// refusal is the answer to a message the door does not let through.
type refusal struct {
	reason  string
	code    int64
	id      jsonrpc.ID // zero: null
	message string
	at      *strictjson.Error // where, for a parse error
}

// doorMessage is what the door learnt of a message it lets through.
type doorMessage struct {
	method  string     // of a single request or notification
	id      jsonrpc.ID // of a single request
	params  []byte
	batch   bool
	hasInit bool // a batch holding an initialize request
}

// screen checks one message from a client: the refusal to answer it with, or what it is.
func screen(data []byte) (doorMessage, *refusal) {
	doc, e := strictjson.Scan(data, envelopeKeys)
	if e != nil {
		return doorMessage{}, parseRefusal(data, doc, e)
	}
	switch doc.Kind {
	case '{':
		m, r := envelope(data, &doc)
		return m, r
	case '[':
		return screenBatch(data)
	}
	return doorMessage{}, invalid(jsonrpc.ID{}, "a JSON-RPC message is an object, or a batch of them in an array; this is "+kindName(doc.Kind))
}

// parseRefusal is the -32700 answer to data, which is not strict JSON.
func parseRefusal(data []byte, doc strictjson.Doc, e *strictjson.Error) *refusal {
	var id jsonrpc.ID
	// The id is echoed only when every reader finds the same one: the value's structure was
	// read to its end, it has one id, the problem is not in the id and not a second value.
	if s := doc.Members[mID]; doc.Complete && doc.Kind == '{' && s.Seen && !s.Twice && e.Reason != strictjson.TrailingData &&
		(e.Offset < s.Start || e.Offset >= s.End) {
		id, _ = readID(data[s.Start:s.End])
	}
	return &refusal{reason: string(e.Reason), code: jsonrpc.CodeParseError, id: id, at: e,
		message: "Parse error: " + e.Error() + "; " + parseAdvice[e.Reason]}
}

// parseAdvice is what a client does about each reason of a parse error.
var parseAdvice = map[strictjson.Reason]string{
	strictjson.Syntax:       "send one JSON-RPC message as JSON (RFC 8259)",
	strictjson.TrailingData: "send exactly one JSON-RPC message, with nothing after it",
	strictjson.InvalidUTF8:  "encode text as UTF-8, and a character beyond U+FFFF as a pair of \\u escapes",
	strictjson.DuplicateKey: "give each key once in an object; the gateway does not guess which one is meant",
	strictjson.NumberRange:  "send numbers a 64-bit float holds, and larger integers as strings",
	strictjson.TooDeep:      fmt.Sprintf("nest at most %d arrays and objects", strictjson.MaxDepth),
}

// envelope checks the JSON-RPC message data, which is strict JSON and an object.
func envelope(data []byte, doc *strictjson.Doc) (doorMessage, *refusal) {
	part := func(m int) []byte { return data[doc.Members[m].Start:doc.Members[m].End] }
	has := func(m int) bool { return doc.Members[m].Seen }
	var id jsonrpc.ID
	if has(mID) {
		var err error
		if id, err = readID(part(mID)); err != nil {
			return doorMessage{}, invalid(jsonrpc.ID{}, err.Error())
		}
	}
	if !has(mJSONRPC) || !isString(part(mJSONRPC), "2.0") {
		return doorMessage{}, invalid(id, `a JSON-RPC 2.0 message needs "jsonrpc": "2.0"`)
	}
	if !has(mMethod) {
		if !id.IsValid() || has(mResult) == has(mError) {
			return doorMessage{}, invalid(id, `a message needs a string "method" (a request or notification), or an "id" with one of "result" and "error" (a response)`)
		}
		return doorMessage{}, nil
	}
	method, ok := plainString(part(mMethod))
	if !ok {
		if err := json.Unmarshal(part(mMethod), &method); err != nil {
			return doorMessage{}, invalid(id, `"method" must be a string`)
		}
	}
	if has(mResult) || has(mError) {
		return doorMessage{}, invalid(id, `a request carries no "result" or "error"; send a request or a response, not both`)
	}
	var params []byte
	if has(mParams) {
		params = part(mParams)
		if c := params[0]; c != '{' && c != '[' && c != 'n' {
			return doorMessage{}, invalid(id, `"params" must be an object or an array`)
		}
	}
	return doorMessage{method: method, id: id, params: params}, nil
}

// screenBatch checks a batch (JSON-RPC batching, before MCP 2025-06-18; the SDK refuses it
// for later revisions): every element a message. A batch is answered as a whole, so a refusal
// carries no id.
func screenBatch(data []byte) (doorMessage, *refusal) {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return doorMessage{}, invalid(jsonrpc.ID{}, "the batch is not an array of messages: "+err.Error())
	}
	if len(elems) == 0 {
		return doorMessage{}, invalid(jsonrpc.ID{}, "an empty batch; send at least one message")
	}
	out := doorMessage{batch: true}
	for i, el := range elems {
		doc, e := strictjson.Scan(el, envelopeKeys)
		if e != nil || doc.Kind != '{' {
			return doorMessage{}, invalid(jsonrpc.ID{}, fmt.Sprintf("element %d of the batch is not a JSON-RPC message object", i))
		}
		m, r := envelope(el, &doc)
		if r != nil {
			r.id = jsonrpc.ID{}
			r.message = fmt.Sprintf("element %d of the batch: %s", i, r.message)
			return doorMessage{}, r
		}
		if m.method == "initialize" {
			out.hasInit = true
		}
	}
	return out, nil
}

func invalid(id jsonrpc.ID, why string) *refusal {
	return &refusal{reason: refusalInvalidRequest, code: jsonrpc.CodeInvalidRequest, id: id, message: "Invalid Request: " + why}
}

// readID reads a JSON-RPC id: a string or an integer. The SDK would read null as no id (a
// notification) and truncate 1.5 to 1, so neither is taken. The ids clients send (a string
// without escapes, a small integer) are read without a JSON decoder, to the same ID
// (TestReadIDAsDecoded).
func readID(raw []byte) (jsonrpc.ID, error) {
	if s, ok := plainString(raw); ok {
		return jsonrpc.MakeID(s)
	}
	if n, ok := plainInt(raw); ok {
		return jsonrpc.MakeID(float64(n))
	}
	return readIDDecoded(raw)
}

// readIDDecoded is readID by encoding/json, for every id.
func readIDDecoded(raw []byte) (jsonrpc.ID, error) {
	var v any
	if json.Unmarshal(raw, &v) == nil {
		switch x := v.(type) {
		case string:
			return jsonrpc.MakeID(x)
		case float64:
			if x == float64(int64(x)) && !bytes.ContainsAny(raw, ".eE") {
				return jsonrpc.MakeID(x)
			}
		}
	}
	return jsonrpc.ID{}, fmt.Errorf(`"id" must be a string or an integer, not %s; leave it out for a notification`, clipBytes(raw))
}

// plainString is the JSON string raw when it is one with nothing to unescape: quoted, no
// backslash, no control character or quote inside, valid UTF-8 (what encoding/json decodes to
// exactly its bytes).
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// plainInt is the JSON integer raw when it is one of at most 15 digits without a sign or with
// a minus (exact as a float64, as encoding/json reads it), and not -0.
func plainInt(raw []byte) (int64, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(raw) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if raw[0] == '-' {
		n = -n
	}
	return n, true
}

// isString reports whether raw is the JSON string want.
func isString(raw []byte, want string) bool {
	if len(raw) == len(want)+2 && string(raw[1:len(raw)-1]) == want {
		return true
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

func kindName(k byte) string {
	switch k {
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func clipBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// encode is the JSON-RPC error response of r, with a newline.
func (r *refusal) encode() []byte {
	type errorData struct {
		Reason string `json:"reason"`
		Offset *int   `json:"offset,omitempty"`
		Path   string `json:"path,omitempty"`
	}
	data := errorData{Reason: r.reason}
	if r.at != nil {
		data.Offset, data.Path = &r.at.Offset, r.at.Path
	}
	out, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   any    `json:"error"`
	}{"2.0", r.id.Raw(), struct {
		Code    int64     `json:"code"`
		Message string    `json:"message"`
		Data    errorData `json:"data"`
	}{r.code, r.message, data}})
	return append(out, '\n')
}

// door counts and logs the refusals of one transport.
type door struct {
	transport string // "http" or "stdio", for the log
	refusals  *prometheus.CounterVec
	log       *slog.Logger
	now       func() time.Time

	mu   sync.Mutex
	last map[string]time.Time // when each reason was last logged
	held map[string]int       // refusals of each reason since
}

func newDoor(transport string, reg prometheus.Registerer, log *slog.Logger) *door {
	c := registered(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: governor.Namespace, Name: "protocol_refusals_total",
		Help: "Client messages refused before the MCP SDK saw them, by reason: not strict JSON (syntax, trailing_data, invalid_utf8, duplicate_key, number_range, too_deep), " +
			"not a JSON-RPC message read one way only (invalid_request), no Mcp-Session-Id (missing_session), a stdio line too long (too_large).",
	}, []string{"reason"}))
	for _, r := range refusalReasons() {
		c.WithLabelValues(r)
	}
	return &door{transport: transport, refusals: c, log: log, now: time.Now, last: map[string]time.Time{}, held: map[string]int{}}
}

// refused counts r and logs it, at most once per reason every refusalLogEvery.
func (d *door) refused(r *refusal) {
	d.refusals.WithLabelValues(r.reason).Inc()
	now := d.now()
	d.mu.Lock()
	d.held[r.reason]++
	n := d.held[r.reason]
	logIt := now.Sub(d.last[r.reason]) >= refusalLogEvery
	if logIt {
		d.last[r.reason] = now
		d.held[r.reason] = 0
	}
	d.mu.Unlock()
	if logIt {
		d.log.Warn("refused a client message before it could become a call: "+r.message,
			"transport", d.transport, "reason", r.reason, "code", r.code,
			"refused", n, "refused_over", "since the last line of this reason, at most "+refusalLogEvery.String()+" apart")
	}
}

// strictBody is readBody's screen for /mcp in gateway.http_mode mode: a POST body must be a
// message screen lets through, and without an Mcp-Session-Id, when the stateful handler is to
// serve it, an initialize. In auto mode it chooses the handler as it reads the message
// (statelessRevision, http.go). It answers a refusal itself and reports whether the request
// goes on. A message it lets through is offered to serve, when not nil, which reports whether
// it answered it itself (fastcall.go); then it goes no further either.
func (d *door) strictBody(mode string, serve func(http.ResponseWriter, *http.Request, doorMessage) bool) func(http.ResponseWriter, *http.Request, []byte) bool {
	return func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method != http.MethodPost {
			return true
		}
		m, ref := screen(body)
		if ref == nil {
			stateless := mode == config.HTTPModeStateless
			if mode != config.HTTPModeStateful && !stateless {
				stateless = statelessRevision(r, m)
				noteRoute(r, stateless)
			}
			if !stateless && r.Header.Get("Mcp-Session-Id") == "" {
				ref = needsSession(r, m)
			}
		}
		if ref == nil {
			return serve == nil || !serve(w, r, m)
		}
		d.refused(ref)
		answer := ref.encode()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(answer)
		return false
	}
}

// beforeSession are the requests the SDK answers on a stateful connection without a session.
var beforeSession = map[string]bool{"initialize": true, "ping": true, "server/discover": true}

// needsSession refuses a message that needs a session and names none. Messages of protocol
// revision 2026-07-28 and later (by header or _meta) are left to the SDK: gateway.http_mode
// auto serves them statelessly, and a stateful-only gateway answers them with the SDK's
// JSON-RPC error that lists the revisions it serves.
func needsSession(r *http.Request, m doorMessage) *refusal {
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= revision20260728 {
		return nil
	}
	if m.batch && m.hasInit || !m.batch && beforeSession[m.method] || !m.batch && metaVersion(m.params) {
		return nil
	}
	return &refusal{reason: refusalNoSession, code: jsonrpc.CodeInvalidRequest, id: m.id,
		message: "Invalid Request: no Mcp-Session-Id header; begin with initialize, then send the Mcp-Session-Id its answer carries with every request"}
}

// metaVersion reports whether params carry the protocol version in _meta, as requests of MCP
// 2026-07-28 and later do.
func metaVersion(params []byte) bool {
	if len(params) == 0 || params[0] != '{' {
		return false
	}
	var top, meta map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil || json.Unmarshal(top["_meta"], &meta) != nil {
		return false
	}
	_, ok := meta[mcp.MetaKeyProtocolVersion]
	return ok
}
