package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/strictjson"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// echoServerEnv makes the test binary run as a deterministic stdio MCP server whose tools
// answer from their arguments alone (runEchoServer).
const echoServerEnv = "GATEWAY_ECHO_SERVER"

// echoRecordEnv names a file the echo server appends every byte it reads to: what the gateway
// sent it, for comparing the upstream traffic of the two paths.
const echoRecordEnv = "GATEWAY_ECHO_RECORD"

// runEchoServer serves:
//   - say: the arguments back, as text and as structured content;
//   - fail: a result with isError, its text the arguments;
//   - rpcerr: the JSON-RPC error {code, message} its arguments name, with data;
//   - tick: three progress notifications (when asked for), then the arguments back;
//   - hold: one progress notification, then waits until the call is cancelled (or 10s);
//   - secret: listed by the server, hidden by the gateway.
func runEchoServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	obj := map[string]any{"type": "object"}
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	srv.AddTool(&mcp.Tool{Name: "say", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text(string(req.Params.Arguments)), StructuredContent: json.RawMessage(req.Params.Arguments)}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: text("failed: " + string(req.Params.Arguments))}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "rpcerr", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		return nil, &jsonrpc.Error{Code: in.Code, Message: in.Message, Data: json.RawMessage(`{"why":"asked <to>"}`)}
	})
	progress := func(ctx context.Context, req *mcp.CallToolRequest, i int, msg string) {
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 3, Message: msg})
		}
	}
	srv.AddTool(&mcp.Tool{Name: "tick", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			progress(ctx, req, i, fmt.Sprintf("step %d — «%s» <&>", i, req.Params.Arguments))
		}
		return &mcp.CallToolResult{Content: text("ticked " + string(req.Params.Arguments))}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		progress(ctx, req, 1, "holding")
		select {
		case <-ctx.Done():
			return &mcp.CallToolResult{Content: text("let go")}, nil
		case <-time.After(10 * time.Second):
			return &mcp.CallToolResult{Content: text("held to the end")}, nil
		}
	})
	srv.AddTool(&mcp.Tool{Name: "secret", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("the secret")}, nil
	})
	var t mcp.Transport = &mcp.StdioTransport{}
	if path := os.Getenv(echoRecordEnv); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "echo server:", err)
			return 1
		}
		defer f.Close()
		t = &mcp.IOTransport{Reader: struct {
			io.Reader
			io.Closer
		}{io.TeeReader(os.Stdin, f), os.Stdin}, Writer: os.Stdout}
	}
	if err := srv.Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "echo server:", err)
	}
	return 0
}

// fastConfig serves the echo server (passthrough, secret hidden) and a test robot whose move
// a policy denies.
const fastConfig = `
gateway:
  fast_path: %v
servers:
  - name: echo
    command: "{{exe}}"
    env: {` + echoServerEnv + `: "1", ` + echoRecordEnv + `: "{{record}}"}
    startup_timeout_sec: 10
    contract: passthrough
    tools: {hidden: [secret]}
%spolicies:
  default: allow
  rules:
    - {id: no-move, effect: deny, when: 'upstream_tool == "move"', reason: the cell is being serviced}
`

// fastGateway starts a gateway of fastConfig with gateway.fast_path fast, with its state file;
// record is the file its echo server records what it reads in.
func fastGateway(tb testing.TB, fast bool) (g *Gateway, st *store.Store, record string) {
	tb.Helper()
	return fastGatewayWith(tb, fast, nil)
}

// fastGatewayWith is fastGateway with telemetry tel (nil: off).
func fastGatewayWith(tb testing.TB, fast bool, tel *telemetry.Provider) (g *Gateway, st *store.Store, record string) {
	tb.Helper()
	return fastGatewayStore(tb, fast, tel, store.Options{})
}

// fastGatewayStore is fastGatewayWith with its state file opened with opts.
func fastGatewayStore(tb testing.TB, fast bool, tel *telemetry.Provider, opts store.Options) (g *Gateway, st *store.Store, record string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	record = filepath.Join(tb.TempDir(), "echo-input")
	yaml := strings.NewReplacer("{{exe}}", exe, "{{record}}", record).Replace(fmt.Sprintf(fastConfig, fast, server("robot", "")))
	cfg, err := config.Parse(filepath.Join(tb.TempDir(), "gateway.yaml"), []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	engine, err := CompilePolicies(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	st, err = store.Open(tb.TempDir(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	g, err = New(cfg, Options{Store: st, Policies: engine, Telemetry: tel})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	return g, st, record
}

// rawSession is a session opened by initialize over raw HTTP.
type rawSession struct {
	url, id string
	hc      *http.Client
}

const fastVersion = "2025-06-18"

func openRaw(tb testing.TB, hc *http.Client, url string) *rawSession {
	tb.Helper()
	s := &rawSession{url: url, hc: hc}
	resp := s.post(tb, context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+fastVersion+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s.id = resp.Header.Get("Mcp-Session-Id"); resp.StatusCode != 200 || s.id == "" {
		tb.Fatalf("initialize: %d, session %q", resp.StatusCode, s.id)
	}
	resp = s.post(tb, context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return s
}

func (s *rawSession) post(tb testing.TB, ctx context.Context, body string) *http.Response {
	return s.postWith(tb, ctx, body, nil)
}

// postWith is post with the headers extra added.
func (s *rawSession) postWith(tb testing.TB, ctx context.Context, body string, extra http.Header) *http.Response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", fastVersion)
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		tb.Fatal(err)
	}
	return resp
}

// exchange is what a client saw of one request.
type exchange struct {
	Status  int
	Headers string
	Body    string
}

// relevantHeaders are the response headers compared: every one but Date.
var relevantHeaders = []string{"Cache-Control", "Connection", "Content-Length", "Content-Type", "Mcp-Session-Id", "Transfer-Encoding", "X-Content-Type-Options"}

func describe(resp *http.Response, body []byte) exchange {
	var h strings.Builder
	for _, k := range relevantHeaders {
		fmt.Fprintf(&h, "%s=%q ", k, resp.Header.Values(k))
	}
	fmt.Fprintf(&h, "te=%q", resp.TransferEncoding)
	return exchange{Status: resp.StatusCode, Headers: h.String(), Body: string(body)}
}

// call is one randomized request of the differential test.
type call struct {
	body   string
	id     string // the request's id, as JSON
	cancel int    // 0: no; 1: notifications/cancelled after the first progress; 2: close the stream then
}

// randomCalls are n randomized tools/call requests, the same for the same seed.
func randomCalls(n int, seed uint64) []call {
	r := rand.New(rand.NewPCG(seed, 17))
	strs := []string{"", "plain", "ünïcødé ✓ 日本", `quote " and \ backslash`, "tab\tnew\nline", "<html>&amp;</html>", "\u2028\u2029", "emoji 🤖", "\x01ctl"}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(8); {
		case k == 0:
			return r.IntN(2000) - 1000
		case k == 1:
			return r.Float64()*1e6 - 5e5
		case k == 2:
			return r.IntN(2) == 0
		case k == 3:
			return nil
		case k <= 5 || depth > 3:
			return strs[r.IntN(len(strs))]
		case k == 6:
			var a []any
			for range r.IntN(4) {
				a = append(a, value(depth+1))
			}
			return a
		default:
			m := map[string]any{}
			for range r.IntN(4) {
				m[strs[r.IntN(len(strs))]+fmt.Sprint(r.IntN(9))] = value(depth + 1)
			}
			return m
		}
	}
	args := func() string {
		m := map[string]any{}
		for range r.IntN(5) {
			m[fmt.Sprintf("k%d%s", r.IntN(20), strs[r.IntN(3)])] = value(0)
		}
		b, _ := json.Marshal(m)
		switch r.IntN(10) {
		case 0:
			return `{ "spaced" : [ 1 , 2 ] ,"esc":"\u00e9\/\"" }`
		case 1:
			return "[1,2]" // refused by the argument check
		}
		return string(b)
	}
	var out []call
	for i := range n {
		id := fmt.Sprint(i + 1)
		if r.IntN(3) == 0 {
			id = fmt.Sprintf(`"req-%d"`, i+1)
		}
		tool := []string{"echo__say", "echo__say", "echo__fail", "echo__tick", "robot__move", "robot__scan", "echo__secret", "nope__tool", "echo__rpcerr", "echo__hold"}[r.IntN(10)]
		a := args()
		if tool == "echo__rpcerr" {
			a = fmt.Sprintf(`{"code":%d,"message":"no <%d> ✗"}`, []int{-32000, -32602, -32601, 0}[r.IntN(4)], i)
		}
		c := call{id: id}
		var meta string
		switch k := r.IntN(4); {
		case tool == "echo__hold":
			meta = fmt.Sprintf(`,"_meta":{"progressToken":"hold-%d"}`, i)
			c.cancel = 1 + r.IntN(2)
		case k == 0:
			meta = fmt.Sprintf(`,"_meta":{"progressToken":%d}`, i)
		case k == 1:
			meta = fmt.Sprintf(`,"_meta":{"progressToken":"tok-%d ✓","other":1}`, i)
		case k == 2 && i%2 == 0:
			meta = fmt.Sprintf(`,"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-%016x-01","tracestate":"v=%d","baggage":"k=%d"}`, i, i, i)
		}
		params := fmt.Sprintf(`{"name":%q,"arguments":%s%s}`, tool, a, meta)
		if r.IntN(20) == 0 {
			params = fmt.Sprintf(`{"name":%q%s}`, tool, meta) // no arguments
		}
		c.body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}`, id, params)
		out = append(out, c)
	}
	return out
}

// do sends c on s and returns what the client saw; for a call to cancel, it cancels it once
// the first event (its progress) arrived.
func (s *rawSession) do(tb testing.TB, c call) exchange {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	resp := s.post(tb, ctx, c.body)
	defer resp.Body.Close()
	if c.cancel == 0 {
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			tb.Fatal(err)
		}
		return describe(resp, body)
	}
	br := bufio.NewReader(resp.Body)
	var got bytes.Buffer
	for { // the progress event: the call is in flight at the upstream
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			tb.Fatalf("no progress before the end of the stream: %v: %q", err, got.String())
		}
		if line == "\n" {
			break
		}
	}
	if c.cancel == 2 {
		stop() // closes the connection: the gateway cancels the call itself
		return describe(resp, got.Bytes())
	}
	n := s.post(tb, context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"changed my mind"}}`, c.id))
	_, _ = io.Copy(io.Discard, n.Body)
	n.Body.Close()
	rest, err := io.ReadAll(br)
	if err != nil {
		tb.Fatal(err)
	}
	got.Write(rest)
	return describe(resp, got.Bytes())
}

var callIDPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9]+`)

// auditOf is the call records of st, normalized: no time, duration, sequence, hash or call id,
// sessions by the order their calls were sent in (sessions).
func auditOf(t *testing.T, st *store.Store, sessions map[string]string, want int) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := st.Audit().Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		out = out[:0]
		err := st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool {
			// The digest of the arguments is keyed per state file; the arguments are compared.
			r.Seq, r.Time, r.DurationMS, r.Prev, r.Hash, r.ArgsDigest = 0, time.Time{}, 0, "", "", ""
			r.CallID = callIDPattern.ReplaceAllString(r.CallID, "CALL")
			r.Session = sessions[r.Session]
			b, _ := json.Marshal(r)
			out = append(out, callIDPattern.ReplaceAllString(string(b), "CALL"))
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(out)
	return out
}

// TestFastPathAnswersAsTheSDK sends the same randomized tools/call requests over raw HTTP to a
// gateway with gateway.fast_path on and one with it off, in front of the same deterministic
// upstreams, and finds the same status, headers and bytes for each, and the same audit records.
// What legitimately differs between two gateways is normalized: session ids (each gateway
// issues its own; they appear in no call's answer, only in the audit, where they are mapped
// to the worker that used them), call ids (random per gateway) and the audit's keyed digests
// of arguments (the key is per state file), besides times, durations and the hash chain.
func TestFastPathAnswersAsTheSDK(t *testing.T) {
	n := 10000
	if raceEnabled {
		n = 3000
	}
	on, onStore, onRecord := fastGateway(t, true)
	off, offStore, offRecord := fastGateway(t, false)
	onSrv, offSrv := httptest.NewServer(on.Handler(nil)), httptest.NewServer(off.Handler(nil))
	t.Cleanup(onSrv.Close)
	t.Cleanup(offSrv.Close)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	calls := randomCalls(n, 1)
	const workers = 8
	sessions := [2]map[string]string{{}, {}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var diffs []string
	start := time.Now()
	for w := range workers {
		a, b := openRaw(t, hc, onSrv.URL+"/mcp"), openRaw(t, hc, offSrv.URL+"/mcp")
		sessions[0][a.id], sessions[1][b.id] = fmt.Sprint("worker-", w), fmt.Sprint("worker-", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(calls); i += workers {
				x, y := a.do(t, calls[i]), b.do(t, calls[i])
				if x != y {
					mu.Lock()
					diffs = append(diffs, fmt.Sprintf("request %s\n fast: %+v\n  sdk: %+v", calls[i].body, x, y))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls to each gateway in %v", n, time.Since(start).Round(time.Millisecond))
	for i, d := range diffs {
		if i == 5 {
			t.Errorf("… and %d more", len(diffs)-5)
			break
		}
		t.Error(d)
	}
	if served := on.fast.served.Load(); served < uint64(n)*9/10 {
		t.Errorf("the fast path served %d of %d calls", served, n)
	}
	if served := off.fast.served.Load(); served != 0 {
		t.Errorf("with gateway.fast_path off, the fast path served %d calls", served)
	}
	x, y := auditOf(t, onStore, sessions[0], n), auditOf(t, offStore, sessions[1], n)
	if len(x) != n || len(y) != n {
		t.Errorf("audit records: %d with the fast path, %d without, of %d calls", len(x), len(y), n)
	}
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			t.Fatalf("audit records differ:\n fast: %s\n  sdk: %s", x[i], y[i])
		}
	}
	// The same messages reached the upstream, byte for byte but for what each gateway numbers
	// itself (request ids, progress tokens, the ids cancellations name). The workers run
	// concurrently, so they are compared in sorted order.
	u, v := upstreamInput(t, onRecord), upstreamInput(t, offRecord)
	sent := 0
	for _, l := range u {
		if strings.Contains(l, `"method":"tools/call"`) {
			sent++
		}
	}
	if t.Logf("%d tools/call requests reached the upstream", sent); sent < n/2 {
		t.Errorf("only %d of %d calls reached the upstream: the comparison of its traffic says little", sent, n)
	}
	if len(u) != len(v) {
		t.Errorf("the upstream read %d messages from the gateway with the fast path, %d from the one without", len(u), len(v))
	}
	for i := range min(len(u), len(v)) {
		if u[i] != v[i] {
			t.Fatalf("upstream traffic differs (sorted, normalized):\n fast: %s\n  sdk: %s", u[i], v[i])
		}
	}
}

// upstreamInput is what an echo server read, one message a line, with what each gateway numbers
// itself replaced, sorted.
func upstreamInput(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	requestID := regexp.MustCompile(`^\{"jsonrpc":"2\.0","id":\d+,`)
	token := regexp.MustCompile(`"progressToken":("[^"]*"|-?\d+)`)
	cancelled := regexp.MustCompile(`"requestId":\d+`)
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		l = requestID.ReplaceAllString(l, `{"jsonrpc":"2.0","id":ID,`)
		l = token.ReplaceAllString(l, `"progressToken":TOKEN`)
		l = cancelled.ReplaceAllString(l, `"requestId":ID`)
		lines = append(lines, l)
	}
	slices.Sort(lines)
	return lines
}

// benchWriter is a ResponseWriter reused across the iterations of a benchmark.
type benchWriter struct {
	h    http.Header
	body bytes.Buffer
	code int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *benchWriter) WriteHeader(code int)        { w.code = code }
func (w *benchWriter) Flush()                      {}

func (w *benchWriter) reset() {
	clear(w.h)
	w.body.Reset()
	w.code = 0
}

// rewindBody is a request body read again from its start each iteration.
type rewindBody struct {
	data []byte
	at   int
}

func (b *rewindBody) Read(p []byte) (int, error) {
	if b.at >= len(b.data) {
		return 0, io.EOF
	}
	n := copy(p, b.data[b.at:])
	b.at += n
	return n, nil
}

func (b *rewindBody) Close() error { return nil }

// BenchmarkHotPath is one tools/call through the gateway's handler in process, on a session,
// to a real stdio upstream (the echo server): the door's read and screen, the decode, the
// chain with its audit record, the write to the upstream and the decode of its result, and the
// encoding of the answer. fast is gateway.fast_path.
func BenchmarkHotPath(b *testing.B) {
	for _, fast := range []bool{true, false} {
		b.Run(fmt.Sprintf("fast_path=%v", fast), func(b *testing.B) {
			g, _, _ := fastGateway(b, fast)
			call, w := benchSession(b, g.Handler(nil))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				call()
			}
			b.StopTimer()
			if !strings.Contains(w.body.String(), benchWant) {
				b.Fatalf("answer: %d %s", w.code, w.body.String())
			}
			if served := g.fast.served.Load(); fast != (served > 0) {
				b.Fatalf("fast_path=%v, and the fast path served %d calls", fast, served)
			}
		})
	}
}

// benchWant is in the answer to benchSession's call.
const benchWant = `"id":7,"result":{"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}]`

// benchSession opens a session on h as a client does (initialize, then initialized) and returns
// call, which serves that session's tools/call of echo__say again, and the writer its answer is
// in until the next call.
func benchSession(tb testing.TB, h http.Handler) (call func(), w *benchWriter) {
	tb.Helper()
	w = &benchWriter{h: http.Header{}}
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", fastVersion)
	send := func(body string) {
		req.Body, req.ContentLength = &rewindBody{data: []byte(body)}, int64(len(body))
		w.reset()
		h.ServeHTTP(w, req)
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + fastVersion + `","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	sid := w.h.Get("Mcp-Session-Id")
	if sid == "" {
		tb.Fatalf("initialize: %d %s", w.code, w.body.String())
	}
	req.Header.Set("Mcp-Session-Id", sid)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	body := &rewindBody{data: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo__say","arguments":{"target":"shelf","speed":0.5}}}`)}
	req.ContentLength = int64(len(body.data))
	return func() {
		body.at = 0
		req.Body = body
		w.reset()
		h.ServeHTTP(w, req)
	}, w
}

// BenchmarkHotPathParallel is BenchmarkHotPath's fast path with eight callers at once, each in
// a session of its own, the state file where the test's temporary folder is (on disk unless
// TMPDIR says otherwise): what the audit's group commit does under load. records/commit is how
// many calls shared a sync.
func BenchmarkHotPathParallel(b *testing.B) {
	var commits, records atomic.Int64
	g, _, _ := fastGatewayStore(b, true, nil, store.Options{OnAuditCommit: func(n int, _ time.Duration) {
		commits.Add(1)
		records.Add(int64(n))
	}})
	h := g.Handler(nil)
	var wrong atomic.Value
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	c0, r0 := commits.Load(), records.Load()
	b.RunParallel(func(pb *testing.PB) {
		call, w := benchSession(b, h)
		for pb.Next() {
			call()
			if !strings.Contains(w.body.String(), benchWant) {
				wrong.CompareAndSwap(nil, fmt.Sprintf("%d %s", w.code, w.body.String()))
			}
		}
	})
	b.StopTimer()
	if bad := wrong.Load(); bad != nil {
		b.Fatalf("answer: %s", bad)
	}
	if n := commits.Load() - c0; n > 0 {
		b.ReportMetric(float64(records.Load()-r0)/float64(n), "records/commit")
	}
}

// readCallParamsSeeds are tools/call params; the seeds of FuzzReadCallParams.
var readCallParamsSeeds = []string{
	`{"name":"echo__say","arguments":{"a":1}}`,
	`{"name":"echo__say"}`,
	`{"name":"echo__say","arguments":null,"_meta":null}`,
	`{"name":"echo__say","arguments":[1,2],"_meta":{"progressToken":"t-1"}}`,
	`{"name":"echo__say","arguments":"x","_meta":{"progressToken":-7.25e2,"other":{"k":true}}}`,
	`{"name":"echo__say","_meta":{"progressToken":1e400}}`,
	`{"name":"echo__say","_meta":{"progressToken":{"a":1}}}`,
	`{"name":"echo\u005fsay","arguments":{}}`,
	`{"Name":"echo__say","arguments":{}}`,
	`{"name":"echo__say","requestState":"s"}`,
	`{"name":"echo__say","_meta":{"io.modelcontextprotocol/logLevel":"info"}}`,
	` { "name" : "é—\u2028" , "arguments" : { "x" : [ ] } } `,
	`{"name":"echo__say","_meta":{"progressToken":3,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"v=1","baggage":"k=v"}}`,
	`{"name":"echo__say","_meta":{"trace\u0070arent":"00-\u0030af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","baggage":7}}`,
	`{"name":"echo__say","_meta":{"tracestate":"\ud800 lone","baggage":null,"traceparent":{"x":1}}}`,
}

// FuzzReadCallParams: whatever params a client sends, when the fast path takes them as plain,
// the SDK reads the same name, arguments and progress token from them, and nothing that would
// make it serve the call otherwise.
func FuzzReadCallParams(f *testing.F) {
	for _, s := range readCallParamsSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		if strictjson.Validate([]byte(params)) != nil {
			return // the door refuses it before the fast path sees it
		}
		p, ok := readCallParams([]byte(params))
		if !ok {
			return // served by the SDK
		}
		var sdk mcp.CallToolParamsRaw
		if _, err := segjson.Parse([]byte(params), &sdk, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
			t.Fatalf("%s: taken as plain, but the SDK cannot read it: %v", params, err)
		}
		if sdk.Name != p.name {
			t.Errorf("%s: name %q, the SDK reads %q", params, p.name, sdk.Name)
		}
		if !bytes.Equal(bytes.TrimSpace(sdk.Arguments), bytes.TrimSpace(p.args)) {
			t.Errorf("%s: arguments %s, the SDK reads %s", params, p.args, sdk.Arguments)
		}
		if got, want := fmt.Sprintf("%#v", p.token), fmt.Sprintf("%#v", sdk.GetProgressToken()); got != want {
			t.Errorf("%s: progress token %s, the SDK reads %s", params, got, want)
		}
		if sdk.InputResponses != nil || sdk.RequestState != "" {
			t.Errorf("%s: taken as plain, but it continues a multi-round-trip call", params)
		}
		for _, k := range metaKeys[1:metaTrace] {
			if _, has := sdk.Meta[k]; has {
				t.Errorf("%s: taken as plain, but its _meta has %s", params, k)
			}
		}
		// The trace context is the SDK's: the same strings, and nothing that is not one.
		trace := p.traceMeta()
		for _, k := range metaKeys[metaTrace:] {
			v, isString := sdk.Meta[k].(string)
			got, has := trace[k]
			if isString != has || has && got != v {
				t.Errorf("%s: %s is %#v, the SDK reads %#v", params, k, got, sdk.Meta[k])
			}
		}
	})
}

// writeCounter counts the writes to the connections of a listener.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, n: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// TestFastPathAnswerIsOneWrite: an answer the fast path serves with no progress before it goes
// to the connection in one write (headers, the event, the end of the stream), chunked as the
// SDK's is; with progress, each progress event is flushed before it, and the stream still ends
// with the answer.
func TestFastPathAnswerIsOneWrite(t *testing.T) {
	g, _, _ := fastGateway(t, true)
	srv := httptest.NewUnstartedServer(g.Handler(nil))
	lis := &writeCounter{Listener: srv.Listener}
	srv.Listener = lis
	srv.Start()
	t.Cleanup(srv.Close)
	s := openRaw(t, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}, srv.URL+"/mcp")
	for i, c := range []struct {
		params       string
		writes, body int // the writes of the answer; the events it holds
	}{
		{`{"name":"echo__say","arguments":{"text":"hi"}}`, 1, 1},
		{`{"name":"echo__tick","arguments":{},"_meta":{"progressToken":"t"}}`, -1, 4},
	} {
		before := lis.writes.Load()
		served := g.fast.served.Load()
		resp := s.post(t, context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i+1, c.params))
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		writes := lis.writes.Load() - before
		if g.fast.served.Load() != served+1 {
			t.Fatalf("call %d was not served by the fast path", i+1)
		}
		if resp.StatusCode != 200 || !slices.Equal(resp.TransferEncoding, []string{"chunked"}) || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Errorf("call %d: status %d, transfer encoding %q, content type %q; want 200, chunked, text/event-stream",
				i+1, resp.StatusCode, resp.TransferEncoding, resp.Header.Get("Content-Type"))
		}
		events := strings.Count(string(body), "event: message\n")
		if events < c.body || !strings.Contains(string(body), fmt.Sprintf(`"id":%d,"result"`, i+1)) {
			t.Errorf("call %d: %d events, want at least %d ending with the answer:\n%s", i+1, events, c.body, body)
		}
		if c.writes > 0 && writes != int64(c.writes) {
			t.Errorf("call %d: the answer took %d writes to the connection, want %d", i+1, writes, c.writes)
		}
		if c.writes < 0 && writes < int64(events) {
			t.Errorf("call %d: %d writes for %d events, want each progress event flushed on its own", i+1, writes, events)
		}
	}
}
