package upstream

//lint:file-ignore SA1019 the differential test sends the capabilities of a client that samples, deprecated from MCP 2026-07-28 on but still part of the protocol.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// recordEnv names the file the "diff" test server appends every byte it reads to.
const recordEnv = "UPSTREAM_TEST_RECORD"

// runDiffServer is the real SDK server of the differential test: its "gen" tool answers with a
// result drawn from the seed in its arguments, "block" waits to be cancelled. What it reads is
// recorded; what it writes passes through rewrite, which turns marked results into what the
// SDK cannot produce (unknown content types, malformed results).
func runDiffServer() int {
	f, err := os.OpenFile(os.Getenv(recordEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "diff-robot", Version: "1"}, nil)
	srv.AddTool(objectTool("gen"), genTool)
	srv.AddTool(objectTool("block"), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Message: "started", Progress: 1})
		<-ctx.Done()
		return nil, ctx.Err()
	})
	tr := &mcp.IOTransport{
		Reader: struct {
			io.Reader
			io.Closer
		}{io.TeeReader(os.Stdin, f), os.Stdin},
		Writer: &rewriter{w: os.Stdout},
	}
	if err := srv.Run(context.Background(), tr); err != nil {
		fmt.Fprintln(os.Stderr, "diff server:", err)
	}
	return 0
}

// genTool draws its result from the seed of its arguments, after as many progress
// notifications as the seed says when a token came with the call.
func genTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		Seed    float64 `json:"seed"`
		Rewrite *int    `json:"rewrite"`
		Code    int64   `json:"code"` // answer with a JSON-RPC error of this code
		Plant   bool    `json:"plant"`
		Deep    bool    `json:"deep"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
		return nil, err
	}
	if a.Plant {
		return textResult(plantMarker), nil
	}
	if a.Deep {
		return textResult(deepMarker), nil
	}
	if a.Code != 0 {
		return nil, &jsonrpc.Error{Code: a.Code, Message: "answered with this code"}
	}
	r := rand.New(rand.NewPCG(uint64(a.Seed), 17))
	if a.Rewrite != nil {
		return textResult(rewrites[*a.Rewrite].marker), nil
	}
	if token := req.Params.GetProgressToken(); token != nil {
		for i := range r.IntN(4) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i + 1), Total: 3, Message: randText(r, 8)})
		}
	}
	switch n := r.IntN(100); {
	case n < 5:
		// Not -32003 nor -32004: the SDK takes those for its own "closing" errors, and on its
		// path the gateway sends the call again after a restart; the fast path takes them for
		// the server's answer (TestFastPathClosingCodeIsAnAnswer).
		e := &jsonrpc.Error{Code: []int64{-32000, -32001, -32002, -32005, -32602, -32603, 1, 42}[r.IntN(8)], Message: randText(r, 20)}
		if r.IntN(2) == 0 {
			why, _ := json.Marshal(randText(r, 10))
			e.Data = json.RawMessage(`{"why":` + string(why) + `}`)
		}
		return nil, e
	case n < 10:
		return nil, errors.New(randText(r, 12)) // a Go error: the SDK's tool error
	}
	res := &mcp.CallToolResult{IsError: r.IntN(8) == 0}
	for range r.IntN(5) {
		res.Content = append(res.Content, randContent(r))
	}
	if r.IntN(3) == 0 {
		res.StructuredContent = randValue(r, 3)
	}
	if r.IntN(3) == 0 {
		res.Meta = randMeta(r)
	}
	return res, nil
}

func randContent(r *rand.Rand) mcp.Content {
	var ann *mcp.Annotations
	if r.IntN(3) == 0 {
		ann = &mcp.Annotations{Priority: float64(r.IntN(5)) / 4, LastModified: "2025-01-12T15:00:58Z"}
		for range r.IntN(3) {
			ann.Audience = append(ann.Audience, []mcp.Role{"user", "assistant"}[r.IntN(2)])
		}
	}
	var meta mcp.Meta
	if r.IntN(4) == 0 {
		meta = randMeta(r)
	}
	bytes := func() []byte {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	switch r.IntN(6) {
	case 0:
		return &mcp.ImageContent{Data: bytes(), MIMEType: "image/png", Meta: meta, Annotations: ann}
	case 1:
		return &mcp.AudioContent{Data: bytes(), MIMEType: "audio/wav", Meta: meta, Annotations: ann}
	case 2:
		l := &mcp.ResourceLink{URI: "file:///" + randText(r, 6), Name: randText(r, 5), Title: randText(r, 5), Description: randText(r, 10),
			MIMEType: "text/plain", Meta: meta, Annotations: ann}
		if r.IntN(2) == 0 {
			n := r.Int64N(1 << 40)
			l.Size = &n
		}
		if r.IntN(3) == 0 {
			l.Icons = []mcp.Icon{{Source: "data:image/png;base64,AAAA", MIMEType: "image/png", Sizes: []string{"48x48"}, Theme: "dark"}}
		}
		return l
	case 3:
		rc := &mcp.ResourceContents{URI: "mem://" + randText(r, 4), MIMEType: "application/octet-stream"}
		if r.IntN(2) == 0 {
			rc.Text = randText(r, 30)
		} else {
			rc.Blob = bytes()
		}
		if r.IntN(3) == 0 {
			rc.Meta = randMeta(r)
		}
		return &mcp.EmbeddedResource{Resource: rc, Meta: meta, Annotations: ann}
	}
	return &mcp.TextContent{Text: randText(r, 40), Meta: meta, Annotations: ann}
}

func randMeta(r *rand.Rand) mcp.Meta {
	m := mcp.Meta{}
	for range 1 + r.IntN(3) {
		m[randText(r, 6)] = randValue(r, 2)
	}
	return m
}

// runes the random texts are made of: escapes JSON needs, HTML characters, the line
// separators JavaScript does not take in strings, multi-byte and astral characters.
var runes = []rune("aZ09 _-\"\\/<>&\n\r\t\b\f\x00\x1f\x7féü中文😀🤖\u2028\u2029\ufffd")

func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

// randValue is a random JSON value nested up to depth.
func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(7)
	if depth == 0 {
		k %= 4
	}
	switch k {
	case 0:
		return randText(r, 12)
	case 1:
		return []float64{0, -1, 2.5, 1e21, 123456789, -0.125, 3e-7}[r.IntN(7)]
	case 2:
		return r.IntN(2) == 0
	case 3:
		return nil
	case 4, 5:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randText(r, 5)] = randValue(r, depth-1)
		}
		return m
	}
	var a []any
	for range r.IntN(4) {
		a = append(a, randValue(r, depth-1))
	}
	return a
}

// writeJSON writes v as JSON text with random escapes and white space, as a client might.
func writeJSON(r *rand.Rand, b *bytes.Buffer, v any) {
	space := func() {
		for range r.IntN(2) {
			b.WriteString([]string{" ", "\t", "\n", "\r\n"}[r.IntN(4)])
		}
	}
	space()
	switch v := v.(type) {
	case string:
		writeString(r, b, v)
	case float64:
		b.WriteString([]string{strconv.FormatFloat(v, 'g', -1, 64), strconv.FormatFloat(v, 'e', -1, 64)}[r.IntN(2)])
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	case map[string]any:
		b.WriteByte('{')
		first := true
		for k, e := range v {
			if !first {
				b.WriteByte(',')
			}
			first = false
			space()
			writeString(r, b, k)
			space()
			b.WriteByte(':')
			writeJSON(r, b, e)
		}
		space()
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(r, b, e)
		}
		space()
		b.WriteByte(']')
	}
	space()
}

func writeString(r *rand.Rand, b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '/' && r.IntN(2) == 0:
			b.WriteString(`\/`)
		case c < 0x20 || r.IntN(4) == 0:
			if c > 0xffff {
				r1, r2 := utf16Pair(c)
				fmt.Fprintf(b, `\u%04x\u%04X`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04x`, c)
			}
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

func utf16Pair(c rune) (rune, rune) {
	c -= 0x10000
	return 0xd800 + (c>>10)&0x3ff, 0xdc00 + c&0x3ff
}

// rewrites turn a marked text block, or the whole result it is in, into what the server's SDK
// would never write.
var rewrites = []struct{ marker, block, result string }{
	{marker: "@@unknown@@", block: `{"type":"hologram","text":"x"}`},
	{marker: "@@null-block@@", block: `null`},
	{marker: "@@tool-use@@", block: `{"type":"tool_use","id":"t1","name":"n","input":{"a":[1,"\u00e9"]},"_meta":{"k":1}}`},
	{marker: "@@tool-result@@", block: `{"type":"tool_result","toolUseId":"t1","content":[{"type":"text","text":"in"},{"type":"image","mimeType":"image/png","data":"AAEC"}],"structuredContent":{"a":1},"isError":true}`},
	{marker: "@@tool-result-nested-tool-use@@", block: `{"type":"tool_result","toolUseId":"t1","content":[{"type":"tool_use","id":"x","name":"n"}]}`},
	{marker: "@@text-number@@", block: `{"type":"text","text":5}`},
	{marker: "@@capital-key@@", block: `{"type":"text","Text":"shout","text":"quiet","MimeType":"x"}`},
	{marker: "@@fraction-size@@", block: `{"type":"resource_link","uri":"u","name":"n","size":1.5}`},
	{marker: "@@bad-base64@@", block: `{"type":"image","mimeType":"image/png","data":"!!!"}`},
	{marker: "@@empty-blob@@", block: `{"type":"resource","resource":{"uri":"u","blob":""}}`},
	{marker: "@@text-with-data@@", block: `{"type":"text","text":"t","data":"AAEC","uri":"u"}`},
	{marker: "@@result-null@@", result: `null`},
	{marker: "@@result-array@@", result: `[]`},
	{marker: "@@result-string@@", result: `"done"`},
	{marker: "@@result-empty@@", result: `{}`},
	{marker: "@@content-object@@", result: `{"content":{"type":"text","text":"x"}}`},
	{marker: "@@content-null@@", result: `{"content":null,"isError":null,"_meta":null}`},
	{marker: "@@result-type-partial@@", result: `{"content":[],"resultType":"partial"}`},
	{marker: "@@result-type-input@@", result: `{"resultType":"input_required","requestState":"st"}`},
	{marker: "@@input-requests@@", result: `{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object"}}}},"requestState":"st"}`},
	{marker: "@@is-error-string@@", result: `{"content":[],"isError":"yes"}`},
	{marker: "@@meta-array@@", result: `{"content":[],"_meta":[1]}`},
	{marker: "@@capital-is-error@@", result: `{"content":[],"IsError":true,"StructuredContent":1}`},
	{marker: "@@unknown-members@@", result: `{"content":[{"type":"text","text":"a","extra":{"deep":[1,2]}}],"future":{"x":1},"structuredContent":[1,"2",{"3":null}]}`},
}

var responseID = regexp.MustCompile(`^\{"jsonrpc":"2\.0","id":(\d+),`)

// rewriter applies rewrites to the lines the server writes.
type rewriter struct {
	w   io.WriteCloser
	buf []byte
}

func (rw *rewriter) Write(p []byte) (int, error) {
	rw.buf = append(rw.buf, p...)
	for {
		i := bytes.IndexByte(rw.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(rw.buf[:i])
		rw.buf = rw.buf[i+1:]
		if strings.Contains(line, plantMarker) {
			if err := rw.plant(line); err != nil {
				return 0, err
			}
			continue
		}
		if strings.Contains(line, deepMarker) {
			// An answer nested deeper than any decoder's stack should be asked to go.
			id := responseID.FindStringSubmatch(line)[1]
			line = `{"jsonrpc":"2.0","id":` + id + `,"result":{"_meta":` + strings.Repeat(`{"a":`, deepLevels) + `"x"` +
				strings.Repeat(`}`, deepLevels) + `,"content":[]}}`
		}
		for _, x := range rewrites {
			text := `{"type":"text","text":"` + x.marker + `"}`
			switch {
			case !strings.Contains(line, text):
			case x.block != "":
				line = strings.Replace(line, text, x.block, 1)
			default:
				id := responseID.FindStringSubmatch(line)[1]
				line = `{"jsonrpc":"2.0","id":` + id + `,"result":` + x.result + `}`
			}
		}
		if _, err := io.WriteString(rw.w, line+"\n"); err != nil {
			return 0, err
		}
	}
}

func (rw *rewriter) Close() error { return rw.w.Close() }

// plantMarker in a result makes the rewriter surround its answer with answers nobody asked for:
// one for the next id, before it (the gateway has not sent that request yet), one for the same
// id again, after it, and one for an id never used.
const plantMarker = "@@plant@@"

// deepMarker in a result makes the rewriter answer with a result nested deepLevels deep.
const (
	deepMarker = "@@deep@@"
	deepLevels = 500_000
)

func (rw *rewriter) plant(answer string) error {
	id, err := strconv.ParseInt(responseID.FindStringSubmatch(answer)[1], 10, 64)
	if err != nil {
		return err
	}
	planted := func(id int64, text string) string {
		return `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}` + "\n"
	}
	_, err = io.WriteString(rw.w, planted(id+1, "planted for the next call")+answer+"\n"+
		planted(id, "planted again")+planted(id+1<<20, "planted for no call"))
	return err
}

// record follows the file a diff server records what it reads in.
type record struct {
	path string
	off  int64
}

// waitFor waits until what the server read since the last wait holds s.
func (rec *record) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var seen []byte
	for {
		b, err := os.ReadFile(rec.path)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, b[rec.off:]...)
		rec.off = int64(len(b))
		if bytes.Contains(seen, []byte(s)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not read %s", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// normalizedLines are the lines of a record, with the ids of the client's requests and of the
// cancellations it sent replaced: the only bytes in which the two paths may differ.
func normalizedLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	requestID := regexp.MustCompile(`^\{"jsonrpc":"2\.0","id":\d+,"method":`)
	cancelled := regexp.MustCompile(`^(\{"jsonrpc":"2\.0","method":"notifications/cancelled","params":\{"reason":"[^"]*","requestId":)\d+\}\}$`)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		l = requestID.ReplaceAllString(l, `{"jsonrpc":"2.0","id":ID,"method":`)
		l = cancelled.ReplaceAllString(l, `${1}ID}}`)
		lines = append(lines, l)
	}
	return lines
}

// outcome is what one Call gave, for comparing.
type outcome struct {
	result   string
	err      string
	crashed  bool
	canceled bool
	progress []string
}

// callOnce makes call i on u.
func callOnce(u *Upstream, c diffCall) outcome {
	base := c.trace
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithTimeout(base, 20*time.Second)
	defer cancel()
	if c.origin != nil {
		ctx = WithOrigin(ctx, c.origin)
	}
	var mu sync.Mutex
	var out outcome
	var progress func(*mcp.ProgressNotificationParams)
	if c.progress {
		progress = func(p *mcp.ProgressNotificationParams) {
			b, _ := json.Marshal(p)
			mu.Lock()
			out.progress = append(out.progress, string(b))
			mu.Unlock()
			if c.cancel {
				cancel()
			}
		}
	}
	res, err := u.Call(ctx, c.tool, c.args, progress)
	mu.Lock()
	defer mu.Unlock()
	if res != nil {
		b, merr := json.Marshal(res)
		out.result = string(b)
		if merr != nil {
			out.result = "marshal: " + merr.Error()
		}
	}
	if err != nil {
		out.err = err.Error()
		var ce *CallError
		out.crashed = errors.As(err, &ce) && ce.Crashed
		out.canceled = errors.Is(err, context.Canceled)
	}
	return out
}

type diffCall struct {
	tool     string
	args     json.RawMessage
	origin   *Origin
	progress bool
	cancel   bool
	// trace is the context the call is made in, holding the gateway's span, or nil.
	trace context.Context
}

func newDiffCall(r *rand.Rand, i int, rewrite int) diffCall {
	c := diffCall{tool: "gen", progress: r.IntN(3) == 0}
	if r.IntN(50) == 0 {
		c = diffCall{tool: "block", progress: true, cancel: true}
	}
	var b bytes.Buffer
	switch {
	case c.tool == "block" && r.IntN(2) == 0: // no arguments at all
	default:
		args := map[string]any{"seed": float64(i)}
		if rewrite >= 0 {
			args["rewrite"] = float64(rewrite)
		}
		for range r.IntN(4) {
			args[randText(r, 6)+"_"] = randValue(r, 3) // a key that is never one of the above
		}
		writeJSON(r, &b, args)
		c.args = b.Bytes()
	}
	if r.IntN(2) == 0 {
		o := &Origin{}
		switch r.IntN(3) {
		case 0:
			o.Capabilities = &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
		case 1:
			o.Capabilities = json.RawMessage(`{"elicitation":{"form":{}},"x":"<&>"}`)
		}
		if r.IntN(2) == 0 {
			o.LogLevel = "debug"
		}
		if r.IntN(4) == 0 {
			o.RequestState = randText(r, 10)
		}
		c.origin = o
	}
	return c
}

// diffTracestate is the tracestate of some of the client contexts diffTrace makes: characters
// an encoder that escapes HTML would write otherwise.
const diffTracestate = "gw=<a&b>,other=1"

// diffTrace draws the context of a differential call: none, or a span of the gateway's, under a
// client's sampled or unsampled context with tracestate and baggage, or a root.
func diffTrace(r *rand.Rand, tel *telemetry.Provider, tracer trace.Tracer) (context.Context, trace.Span) {
	var parent context.Context
	switch r.IntN(4) {
	case 0:
		return nil, trace.SpanFromContext(context.Background())
	case 1:
		parent = tel.FromMeta(context.Background(), map[string]any{
			telemetry.KeyTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			telemetry.KeyTracestate:  diffTracestate,
			// One member: the OTel SDK writes the members of a baggage in map order, which
			// differs from call to call (and so between the two Upstreams), not between paths.
			telemetry.KeyBaggage: "user=al%20ice%3C%26%3E;p=1",
		})
	case 2:
		parent = tel.FromMeta(context.Background(), map[string]any{
			telemetry.KeyTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", // not sampled
			telemetry.KeyTracestate:  diffTracestate,
		})
	default:
		parent = context.Background()
	}
	return tracer.Start(parent, "tools/call robot__gen")
}

// rewriteFails reports whether the SDK fails to decode what rewrite k makes. Such a failure
// takes the server's connection down (on either path: it is not an answer the gateway can
// tie to anything but a broken server), so those are made only a few times.
func rewriteFails(k int) bool {
	x := rewrites[k]
	res := x.result
	if x.block != "" {
		res = `{"content":[` + x.block + `]}`
	}
	_, err := decodeBySDK([]byte(res))
	return err != nil
}

// diffPair is one server run twice: on the fast path and on the SDK's.
type diffPair struct {
	fast, sdk       *Upstream
	fastRec, sdkRec *record
}

func startDiffPair(t *testing.T, version string, tel *telemetry.Provider) diffPair {
	dir := t.TempDir()
	var p diffPair
	for _, fast := range []bool{true, false} {
		cfg := stdioServer(t, "diff")
		rec := &record{path: filepath.Join(dir, fmt.Sprintf("fast-%v", fast))}
		cfg.Env[recordEnv] = rec.path
		cfg.ProtocolVersion = version
		m, err := startManager(t, []config.Server{cfg}, Options{FastPath: fast, Telemetry: tel})
		if err != nil {
			t.Fatal(err)
		}
		if fast {
			p.fast, p.fastRec = m.All()[0], rec
		} else {
			p.sdk, p.sdkRec = m.All()[0], rec
		}
	}
	return p
}

// TestFastPathMatchesTheSDK makes the same randomized calls through an Upstream on the fast
// path and one on the SDK's, each to its own run of the same deterministic SDK server, and
// requires the same results, errors and progress, and the same bytes read by the server, but
// for the ids of requests, which are the one thing the two paths choose differently. Telemetry
// is on, baggage forwarded, and most calls are made in a context holding a span (diffTrace),
// so the trace context in _meta is among the bytes compared.
func TestFastPathMatchesTheSDK(t *testing.T) {
	calls := 10000
	if raceEnabled {
		calls = 4000
	}
	if testing.Short() {
		calls = 500
	}
	var failing, benign []int
	for k := range rewrites {
		if rewriteFails(k) {
			failing = append(failing, k)
		} else {
			benign = append(benign, k)
		}
	}
	t.Logf("%d calls on each path, half on MCP 2026-07-28, half on 2025-06-18", calls)
	for v, version := range []string{"", "2025-06-18"} {
		t.Run("version="+version, func(t *testing.T) {
			t.Parallel()
			tel, tracer := newTracing(t, true)
			p := startDiffPair(t, version, tel)
			r := rand.New(rand.NewPCG(uint64(v), 99))
			n := calls / 2
			crashes := 0
			for i := range n {
				rewrite := -1
				slot := n / len(failing)
				switch j := i / slot; {
				case i%slot == 7 && j < len(failing) && j%2 == v:
					// Each rewrite the SDK fails on, once on one of the two versions.
					rewrite = failing[j]
				case r.IntN(12) == 0:
					rewrite = benign[r.IntN(len(benign))]
				}
				c := newDiffCall(r, i, rewrite)
				var span trace.Span
				c.trace, span = diffTrace(r, tel, tracer)
				start := time.Now()
				var a, b outcome
				var cw sync.WaitGroup
				cw.Add(2)
				go func() { defer cw.Done(); a = callOnce(p.fast, c) }()
				go func() { defer cw.Done(); b = callOnce(p.sdk, c) }()
				cw.Wait()
				span.End()
				if c.cancel {
					// Both sent notifications/cancelled off the caller's path: wait for them,
					// so that the next request follows them on both.
					p.fastRec.waitFor(t, `"method":"notifications/cancelled"`)
					p.sdkRec.waitFor(t, `"method":"notifications/cancelled"`)
				}
				if a.crashed && b.crashed {
					// Progress is promised before an answer; a call whose connection is lost
					// gets what was handled by then.
					a.progress, b.progress = nil, nil
				}
				if fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("call %d (%s %s):\nfast %+v\n sdk %+v", i, c.tool, c.args, a, b)
				}
				if c.cancel && !a.canceled {
					t.Errorf("call %d: cancelled call gave %+v", i, a)
				}
				if a.crashed {
					crashes++
					if rewrite < 0 || !rewriteFails(rewrite) {
						t.Errorf("call %d (rewrite %d) crashed: %+v", i, rewrite, a)
					}
				}
				if d := time.Since(start); d > 100*time.Millisecond {
					t.Logf("call %d (%s) took %s: %+v", i, c.tool, d, a)
				}
			}
			fl, sl := normalizedLines(t, p.fastRec.path), normalizedLines(t, p.sdkRec.path)
			if len(fl) != len(sl) {
				t.Errorf("the server read %d lines on the fast path, %d on the SDK's", len(fl), len(sl))
			}
			for i := range min(len(fl), len(sl)) {
				if fl[i] != sl[i] {
					t.Fatalf("line %d the server read differs:\nfast %s\n sdk %s", i, fl[i], sl[i])
				}
			}
			traced := 0
			for _, l := range fl {
				if strings.Contains(l, `,"traceparent":"00-`) {
					traced++
				}
			}
			for _, s := range []string{diffTracestate, `"baggage":"user=`} {
				if traced == 0 || !slices.ContainsFunc(fl, func(l string) bool { return strings.Contains(l, s) }) {
					t.Errorf("%d requests the server read carried a traceparent, none %s", traced, s)
				}
			}
			if got := fastCount(p.fast); got == 0 {
				t.Errorf("no call took the fast path")
			}
			if got := fastCount(p.sdk); got != 0 {
				t.Errorf("%d calls took the fast path with it off", got)
			}
			t.Logf("%d calls, %d lines read by the server, the same on both paths but for ids, %d with trace context; %d calls lost their connection on both", n, len(fl), traced, crashes)
		})
	}
}

// fastCount is how many calls took the fast path on u's current connection.
func fastCount(u *Upstream) int64 {
	s := u.ready.Load()
	if s == nil {
		return 0
	}
	c := s.conn.(*stdioConn)
	c.fast.mu.Lock()
	defer c.fast.mu.Unlock()
	return c.fast.next
}

// TestFastPathDecodesLikeTheSDK decodes results the server's SDK never writes, and results
// with every content type, both ways.
// decodeCases are results decoded both ways; the seeds of FuzzFastPathDecodesLikeTheSDK.
var decodeCases = []string{
	``, `null`, `{}`, `[]`, `1`, `"x"`, `{"content":[]}`,
	// _meta as servers of MCP 2025-11-25 and later send it, and its edges.
	`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo-server","version":"0.1.0"}},"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`,
	`{"_meta": { "a" : "b" , "c" : { } } ,"content":[]}`, `{"_meta":{},"content":[]}`, `{"_meta":null,"content":[]}`,
	`{"_meta":{"a":"x"},"_meta":{"b":"y"},"content":[]}`, `{"_meta":{"a":"x"},"_meta":null,"content":[]}`,
	`{"_meta":{"a":"x","a":{"b":"c"}},"content":[]}`, `{"_meta":{"a":"\u00e9"},"content":[]}`, `{"_meta":{"b":"é"},"content":[]}`, `{"_meta":{"c":"\\"},"content":[]}`,
	`{"_meta":{"a":"x",},"content":[]}`, `{"_meta":{"a":"x"}}}`, `{"_meta":[],"content":[]}`, `{"_meta":"x","content":[]}`,
	`{"_meta":{"a":1,"b":true,"c":null,"d":[{"e":"f"}]},"content":[]}`,
	`{"_meta":` + strings.Repeat(`{"a":`, 16) + `"x"` + strings.Repeat(`}`, 16) + `,"content":[]}`,
	`{"_meta":` + strings.Repeat(`{"a":`, 17) + `"x"` + strings.Repeat(`}`, 17) + `,"content":[]}`,
	`{"_meta":` + strings.Repeat(`{"a":`, 1001) + `"x"` + strings.Repeat(`}`, 1001) + `,"content":[]}`, // the SDK's depth limit
	`{"content":[{"type":"text","text":"a","annotations":{"audience":["user"],"priority":0.5,"lastModified":"t"},"_meta":{"k":[1,{"a":null}]}}]}`,
	`{"content":[{"type":"image","data":"AAEC","mimeType":"image/png"},{"type":"audio","data":"","mimeType":"audio/wav"}]}`,
	`{"content":[{"type":"resource_link","uri":"u","name":"n","title":"t","description":"d","mimeType":"m","size":12,"icons":[{"src":"s","sizes":["1x1"],"theme":"light"}]}]}`,
	`{"content":[{"type":"resource","resource":{"uri":"u","text":"t","_meta":{"x":1}}},{"type":"resource","resource":{"uri":"u","blob":"AAEC"}}]}`,
	`{"content":[{"type":"resource","resource":null}]}`,
	`{"content":[{"type":"tool_use","id":"1","name":"n","input":{"a":1}}]}`,
	`{"content":[{"type":"tool_result","toolUseId":"1","content":[]}]}`,
	`{"content":[{"type":"tool_result","toolUseId":"1","content":[{"type":"tool_result"}]}]}`,
	`{"content":[{"type":"Text","text":"a"}]}`,
	`{"content":[{"type":"text","text":"a","annotations":{"priority":"high"}}]}`,
	`{"content":[{"type":"text","text":"a","annotations":{"Priority":1}}]}`,
	`{"content":[{"type":"resource_link","uri":"u","size":-1}]}`,
	`{"content":[{"type":"resource_link","uri":"u","size":1e3}]}`,
	`{"content":[{"type":"text"}],"structuredContent":null,"resultType":"complete"}`,
	`{"content":[],"resultType":"input_required"}`,
	`{"content":[],"resultType":""}`,
	`{"content":[],"resultType":5}`,
	`{"content":[],"requestState":5}`,
	`{"content":[],"structuredContent":{"n":1.000000000000000000001,"e":"\ud83d\ude00\u2028"}}`,
	`{"content":[],"structuredContent":"\ud800"}`,
	`{"content":[],"inputRequests":null}`,
	`{"content":[],"inputRequests":{}}`,
	` {"content":[]} `,
	// Text results, the ones plainTextResult takes, and their near misses.
	`{"content":[{"type":"text","text":"hello"}]}`,
	`{"content":[{"text":"hello","type":"text"}],"isError":true}`,
	` { "isError" : false , "content" : [ { "type" : "text" , "text" : "" } , {"type":"text","text":"b"} ] } `,
	`{"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}]}`,
	`{"content":[{"type":"text","text":"\u00e9\u2028\ud83d\ude00 \b\f\n\r\t\/\\ é😀"}]}`,
	`{"content":[{"type":"text","text":"\ud83d"}]}`,
	`{"content":[{"type":"text","text":"\ude00\ud83d"}]}`,
	`{"content":[{"type":"text","text":"\ud83d\u0041"}]}`,
	`{"content":[{"type":"text","text":"\u12"}]}`,
	`{"content":[{"type":"text","text":"\x"}]}`,
	"{\"content\":[{\"type\":\"text\",\"text\":\"a\x00b\"}]}",
	"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}]}",
	"{\"content\":[{\"type\":\"text\",\"text\":\"\\n\xff\"}]}",
	`{"content":[{"type":"text","text":"a","text":"b"}]}`,
	`{"content":[{"type":"text","type":"text","text":"b"}]}`,
	`{"content":[{"type":"text"}]}`,
	`{"content":[{"text":"a"}]}`,
	`{"content":[{"type":"text","text":5}]}`,
	`{"content":[{"type":"text","text":null}]}`,
	`{"content":[{"type":"text","text":"a"}],"content":[]}`,
	`{"content":[{"type":"text","text":"a"}],"isError":1}`,
	`{"content":[{"type":"text","text":"a"}],"isError":null}`,
	`{"content":[{"type":"text","text":"a"}],"isError":true,"isError":false}`,
	`{"content":[{"type":"text","text":"a"}],"_meta":{"io.x/server":{"name":"n","version":"1"}}}`,
	`{"_meta":{"a":"b"},"content":[{"type":"text","text":"a"}],"_meta":{}}`,
	`{"content":[{"type":"text","text":"a"}],"Content":[]}`,
	`{"content":[{"type":"text","text":"a"}]} x`,
	`{"content":[{"type":"text","text":"a"},]}`,
	`{"content":[{"type":"text","text":"a"}],}`,
	`{"content":[{"type":"text","text":"a"}]`,
	`{"content":[{"type":"text","text":"a}]}`,
	`{"isError":true}`,
	`{}`,
	`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo","version":"1"}},"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}],"structuredContent":{"target":"shelf","speed":0.5},"resultType":"complete"}`,
	`{"content":[],"resultType":"input_required","requestState":"s1","structuredContent":[1,"a",null,{"b":[true,1e400]}]}`,
	`{"content":[],"structuredContent":{"a":1,"a":2,"\u00e9":"\ud800"}}`,
	`{"content":[],"structuredContent":1,"structuredContent":2}`,
	`{"content":[],"requestState":"a\nb","resultType":"complete","isError":false}`,
	`{"content":[],"structuredContent":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
	`{"content":[],"structuredContent":` + strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000) + `}`,
	`{"content":[],"structuredContent":` + strings.Repeat("[", 511) + `"]]]\"[[["` + strings.Repeat("]", 511) + `}`,
}

func TestFastPathDecodesLikeTheSDK(t *testing.T) {
	for _, c := range decodeCases {
		decodesLikeTheSDK(t, c)
	}
}

// FuzzFastPathDecodesLikeTheSDK: whatever a server sends as a result, the fast path decodes it
// to what the SDK decodes it to, or fails with the SDK's error.
func FuzzFastPathDecodesLikeTheSDK(f *testing.F) {
	for _, c := range decodeCases {
		f.Add(c)
	}
	f.Fuzz(decodesLikeTheSDK)
}

// decodesLikeTheSDK checks the fast path's decoding of result c against the SDK's.
func decodesLikeTheSDK(t *testing.T, c string) {
	fast, ferr := decodeCallToolResult([]byte(c))
	sdk, serr := decodeBySDK([]byte(c))
	var want mcp.CallToolResult
	werr := errors.New("empty")
	if c != "" {
		werr = json.Unmarshal([]byte(c), &want) // the SDK's own, through UnmarshalJSON
	}
	if fmt.Sprint(ferr) != fmt.Sprint(serr) {
		t.Errorf("%s: error fast %v, sdk %v", c, ferr, serr)
		return
	}
	if ferr != nil {
		return
	}
	fb, _ := json.Marshal(fast)
	sb, _ := json.Marshal(sdk)
	if string(fb) != string(sb) {
		t.Errorf("%s:\nfast %s\n sdk %s", c, fb, sb)
	}
	if werr == nil && firstByte([]byte(c)) == '{' {
		wb, _ := json.Marshal(&want)
		if string(wb) != string(fb) {
			t.Errorf("%s: fast %s, UnmarshalJSON %s", c, fb, wb)
		}
	}
	if plain, ok := plainTextResult([]byte(c)); ok && !reflect.DeepEqual(plain, sdk) {
		t.Errorf("%s: plainTextResult %#v, sdk %#v", c, plain, sdk)
	}
	if fast.NeedsInput() != sdk.NeedsInput() {
		t.Errorf("%s: NeedsInput fast %v, sdk %v", c, fast.NeedsInput(), sdk.NeedsInput())
	}
}

// TestFastPathCrashMidCall: the server dies while a fast-path call is in flight.
func TestFastPathCrashMidCall(t *testing.T) {
	checkGoroutines(t)
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{FastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	u := m.All()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := u.Call(ctx, "crash", nil, nil); done <- err }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return after the server crashed")
	}
	var ce *CallError
	if !errors.As(err, &ce) || !ce.Crashed {
		t.Fatalf("err = %v, want a CallError with Crashed", err)
	}
	if res, err := u.Call(ctx, "echo", json.RawMessage(`{"after":"crash"}`), nil); err != nil || resultText(t, res) != `{"after":"crash"}` {
		t.Fatalf("after the restart: %v, %v", res, err)
	}
	if s := u.ready.Load(); s == nil || s.conn.(*stdioConn).fast.next == 0 {
		t.Fatal("the call after the restart did not take the fast path")
	}
}

// TestFastPathConnectionClosedMidCall: closing the connection (teardown) fails a call in
// flight at once, and a call made after it is not sent.
func TestFastPathConnectionClosedMidCall(t *testing.T) {
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{FastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	u := m.All()[0]
	s := u.ready.Load()
	c := s.conn.(*stdioConn)
	done := make(chan error, 1)
	go func() {
		_, _, err := c.callTool(context.Background(), s, &mcp.CallToolParams{Name: "slow", Arguments: json.RawMessage(`{"ms":5000}`), Meta: (*Origin)(nil).meta()})
		done <- err
	}()
	eventually(t, 5*time.Second, "the call is in flight", func() bool {
		c.fast.mu.Lock()
		defer c.fast.mu.Unlock()
		return len(c.fast.waiting) == 1
	})
	_ = c.Close()
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call hung after the connection closed")
	}
	if !errors.Is(err, io.EOF) || !transportFailed(err) || notSent(err) {
		t.Fatalf("err = %v, want the connection's end, as the SDK gives it", err)
	}
	_, _, err = c.callTool(context.Background(), s, &mcp.CallToolParams{Name: "echo", Meta: (*Origin)(nil).meta()})
	if !notSent(err) {
		t.Fatalf("a call on a closed connection: %v, want one not sent", err)
	}
}

// TestFastPathCancelSendsCancelled: a fast-path call whose ctx ends sends
// notifications/cancelled with its id, and returns ctx's error.
func TestFastPathCancelSendsCancelled(t *testing.T) {
	logs := &logBuffer{}
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{FastPath: true, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	u := m.All()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = callSlow(u, ctx, "fast-cancel", 5000)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	// The server's tool sees its ctx end only through notifications/cancelled.
	eventually(t, 5*time.Second, "the server cancelled the call", func() bool { return logs.contains("slow fast-cancel: cancelled") })
	if s := u.ready.Load(); s == nil || s.conn.(*stdioConn).fast.next == 0 {
		t.Fatal("the call did not take the fast path")
	}
}

// TestFastPathProgressAndOrder: progress for a fast-path call reaches its callback before
// Call returns.
func TestFastPathProgressAndOrder(t *testing.T) {
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{FastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	u := m.All()[0]
	for i := range 5 {
		var got []float64
		var mu sync.Mutex
		res, err := u.Call(context.Background(), "echo", json.RawMessage(`{"i":`+strconv.Itoa(i)+`}`), func(p *mcp.ProgressNotificationParams) {
			mu.Lock()
			got = append(got, p.Progress)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n != 2 || resultText(t, res) != `{"i":`+strconv.Itoa(i)+`}` {
			t.Fatalf("progress %v before the result %v, want 2", got, res)
		}
	}
}

// TestFastPathRefusedAnswerFailsItsCall: an answer over max_result_bytes fails only its call,
// with the *OutputError, on the fast path as on the SDK's.
func TestFastPathRefusedAnswerFailsItsCall(t *testing.T) {
	for _, fast := range []bool{true, false} {
		cfg := stdioServer(t, "tools")
		cfg.MaxResultBytes = 1000
		m, err := startManager(t, []config.Server{cfg}, Options{FastPath: fast})
		if err != nil {
			t.Fatal(err)
		}
		u := m.All()[0]
		_, err = u.Call(context.Background(), "echo", json.RawMessage(`{"x":"`+strings.Repeat("y", 2000)+`"}`), nil)
		var oe *OutputError
		var ce *CallError
		if !errors.As(err, &oe) || oe.Reason != OutputTooLarge || !errors.As(err, &ce) || ce.Crashed {
			t.Fatalf("fast %v: err = %v, want a too-large OutputError", fast, err)
		}
		if _, err := u.Call(context.Background(), "echo", json.RawMessage(`{}`), nil); err != nil {
			t.Fatalf("fast %v: the next call: %v", fast, err)
		}
	}
}

// TestFastPathClosingCodeIsAnAnswer: a server that answers a call with the code of the SDK's own
// "client/server is closing" errors has answered it. The call is not sent again (a robot that
// acted and then answered so would act twice), and the server is not restarted.
//
// On the SDK's path (gateway.fast_path: false, and every HTTP server) the SDK reports such an
// answer as the connection closing; the gateway takes it as sent, its outcome unknown
// (closingAnswered), and still never sends it again.
func TestFastPathClosingCodeIsAnAnswer(t *testing.T) {
	for _, fast := range []bool{true, false} {
		for _, code := range []int64{-32003, -32004} {
			t.Run(fmt.Sprintf("fast=%v/%d", fast, code), func(t *testing.T) {
				closingCodeAnswer(t, fast, code)
			})
		}
	}
}

func closingCodeAnswer(t *testing.T, fast bool, code int64) {
	cfg := stdioServer(t, "diff")
	rec := filepath.Join(t.TempDir(), "record")
	cfg.Env[recordEnv] = rec
	m, err := startManager(t, []config.Server{cfg}, Options{FastPath: fast})
	if err != nil {
		t.Fatal(err)
	}
	u := m.All()[0]
	before := u.ready.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = u.Call(ctx, "gen", json.RawMessage(`{"seed":1,"code":`+strconv.FormatInt(code, 10)+`}`), nil)
	var ce *CallError
	var rpc *jsonrpc.Error
	switch {
	case fast && (!errors.As(err, &ce) || ce.Crashed || !errors.As(err, &rpc) || rpc.Code != code):
		t.Fatalf("err = %v, want the server's JSON-RPC error %d as a CallError, not a crash", err, code)
	case !fast && (!errors.As(err, &ce) || errors.Is(err, ErrUnavailable)):
		t.Fatalf("err = %v, want a CallError of a call that was sent", err)
	}
	// A second call flushes the record (and, on the fast path, shows the connection is still
	// the first one).
	if _, err := u.Call(ctx, "gen", json.RawMessage(`{"seed":2}`), nil); err != nil {
		t.Fatal(err)
	}
	if fast && u.ready.Load() != before {
		t.Fatal("the server was restarted after it answered")
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"code":`+strconv.FormatInt(code, 10)); n != 1 {
		t.Fatalf("the server read the call %d times, want once:\n%s", n, b)
	}
	if fast && fastCount(u) == 0 {
		t.Fatal("the call did not take the fast path")
	}
}

// TestFastPathIgnoresAnswersItDidNotAsk: a server that sends answers for calls the gateway has
// not made (the next id, before the gateway sent it), answers a call twice, or answers an id
// never used: each call gets its own answer, nothing hangs, and the connection stays up.
func TestFastPathIgnoresAnswersItDidNotAsk(t *testing.T) {
	cfg := stdioServer(t, "diff")
	cfg.Env[recordEnv] = filepath.Join(t.TempDir(), "record")
	m, err := startManager(t, []config.Server{cfg}, Options{FastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	u := m.All()[0]
	before := u.ready.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := u.Call(ctx, "gen", json.RawMessage(`{"seed":1,"plant":true}`), nil)
	if err != nil || resultText(t, res) != plantMarker {
		t.Fatalf("the planting call: %v, %v", res, err)
	}
	for seed := 2; seed < 5; seed++ {
		res, err := u.Call(ctx, "gen", json.RawMessage(fmt.Sprintf(`{"seed":%d}`, seed)), nil)
		if err != nil {
			var rpc *jsonrpc.Error
			if errors.As(err, &rpc) {
				continue // gen's own error for this seed
			}
			t.Fatalf("call %d after the planted answers: %v", seed, err)
		}
		if b, _ := json.Marshal(res); strings.Contains(string(b), "planted") {
			t.Fatalf("call %d got an answer the server planted: %s", seed, b)
		}
	}
	if u.ready.Load() != before {
		t.Fatal("the connection was restarted")
	}
	if fastCount(u) == 0 {
		t.Fatal("the calls did not take the fast path")
	}
}

// TestFastPathStopGoesBehindCancellations: a stop call made after a call in flight was given up
// reaches the server behind that call's notifications/cancelled, even when the call's own
// goroutine has not yet woken to write it. With one processor the goroutine that cancels runs
// on into the stop call before the cancelled call's goroutine runs at all.
func TestFastPathStopGoesBehindCancellations(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	u, c, path := recordedFastServer(t)
	rec := &record{path: path}
	for round := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := u.Call(ctx, "block", json.RawMessage(`{}`), nil)
			done <- err
		}()
		rec.waitFor(t, `"name":"block"`)
		cancel()
		stop := fmt.Sprintf(`{"seed":%d}`, round)
		// gen answers some seeds with an error of its own: an answer all the same.
		if _, err := u.Call(WithStop(context.Background()), "gen", json.RawMessage(stop), nil); err != nil && transportFailed(err) {
			t.Fatalf("round %d: the stop call: %v", round, err)
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: the cancelled call: %v", round, err)
		}
		lines := normalizedLines(t, rec.path)
		cancelled, stopAt := -1, -1
		for i, l := range lines {
			switch {
			case strings.Contains(l, `"notifications/cancelled"`):
				cancelled = i
			case strings.Contains(l, `"arguments":`+stop):
				stopAt = i
			}
		}
		if cancelled < 0 || stopAt < cancelled {
			t.Fatalf("round %d: the server read the stop at line %d and the last cancellation at %d, want the cancellation first:\n%s",
				round, stopAt, cancelled, strings.Join(lines, "\n"))
		}
	}
	c.fast.mu.Lock()
	defer c.fast.mu.Unlock()
	if len(c.fast.waiting)+len(c.fast.owed)+len(c.fast.told) != 0 {
		t.Errorf("after the rounds: waiting %d, owed %d, told %d; want nothing kept", len(c.fast.waiting), len(c.fast.owed), len(c.fast.told))
	}
}

// recordedFastServer starts a diff server on the fast path; path is the file it records what it
// reads in.
func recordedFastServer(t *testing.T) (u *Upstream, c *stdioConn, path string) {
	t.Helper()
	cfg := stdioServer(t, "diff")
	path = filepath.Join(t.TempDir(), "read")
	cfg.Env[recordEnv] = path
	m, err := startManager(t, []config.Server{cfg}, Options{FastPath: true})
	if err != nil {
		t.Fatal(err)
	}
	u = m.All()[0]
	return u, u.ready.Load().conn.(*stdioConn), path
}

// requestsAndCancellations reads the record of a diff server: for each id, the line of its
// tools/call request whose arguments match args, and the lines of the cancellations naming it.
func requestsAndCancellations(t *testing.T, path string, args *regexp.Regexp) (requests map[string]int, cancels map[string][]int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	request := regexp.MustCompile(`^\{"jsonrpc":"2\.0","id":(\d+),"method":"tools/call"`)
	cancel := regexp.MustCompile(`"method":"notifications/cancelled".*"requestId":(\d+)\}`)
	requests, cancels = map[string]int{}, map[string][]int{}
	for i, l := range strings.Split(string(b), "\n") {
		if m := request.FindStringSubmatch(l); m != nil && args.MatchString(l) {
			requests[m[1]] = i
		}
		if m := cancel.FindStringSubmatch(l); m != nil {
			cancels[m[1]] = append(cancels[m[1]], i)
		}
	}
	return requests, cancels
}

// TestFastPathNoRequestBehindItsCancellation: a call whose context ends while it waits for the
// connection, behind a stop call that takes the connection first, is not written after the
// cancellation the stop wrote for it (the server would ignore that cancellation and run the
// call to its end); it is not written at all. Found by an outside reviewer: the stop took every
// call with an ended context for one on the wire.
func TestFastPathNoRequestBehindItsCancellation(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	u, c, rec := recordedFastServer(t)
	for round := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		c.writeMu.Lock() // another writer holds the pipe
		done := make(chan error, 1)
		go func() {
			_, err := u.Call(ctx, "block", json.RawMessage(fmt.Sprintf(`{"round":%d}`, round)), nil)
			done <- err
		}()
		eventually(t, 5*time.Second, "the call to wait for the pipe", func() bool {
			c.fast.mu.Lock()
			defer c.fast.mu.Unlock()
			return len(c.fast.waiting) == 1
		})
		time.Sleep(5 * time.Millisecond) // past its check of the context, at the lock
		cancel()
		c.writeMu.Unlock()
		if _, err := u.Call(WithStop(context.Background()), "gen", json.RawMessage(fmt.Sprintf(`{"seed":%d}`, round)), nil); err != nil && transportFailed(err) {
			t.Fatalf("round %d: the stop call: %v", round, err)
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: the cancelled call: %v", round, err)
		}
		rec := &record{path: rec}
		rec.waitFor(t, fmt.Sprintf(`"arguments":{"seed":%d}`, round))
		requests, cancels := requestsAndCancellations(t, rec.path, regexp.MustCompile(fmt.Sprintf(`"arguments":\{"round":%d\}`, round)))
		for id, at := range requests {
			if cs := cancels[id]; len(cs) == 0 || cs[len(cs)-1] < at {
				t.Errorf("round %d: the server read call %s's request at line %d, after its cancellations %v: it would run on", round, id, at, cs)
			}
		}
	}
}

// TestFastPathCancellationsExactlyOnce: calls cancelled at staggered moments beside stop calls:
// every request the server read gets exactly one cancellation, after the request, and nothing
// is kept once they are done.
func TestFastPathCancellationsExactlyOnce(t *testing.T) {
	u, c, rec := recordedFastServer(t)
	for round := range 30 {
		var wg sync.WaitGroup
		for k := range 8 {
			ctx, cancel := context.WithCancel(context.Background())
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, _ = u.Call(ctx, "block", json.RawMessage(fmt.Sprintf(`{"r":%d,"k":%d}`, round, k)), nil)
			}()
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(k*50) * time.Microsecond)
				cancel()
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(200 * time.Microsecond)
			_, _ = u.Call(WithStop(context.Background()), "gen", json.RawMessage(fmt.Sprintf(`{"seed":%d}`, round)), nil)
		}()
		wg.Wait()
	}
	eventually(t, 5*time.Second, "every cancellation owed to be written", func() bool {
		c.fast.mu.Lock()
		defer c.fast.mu.Unlock()
		return len(c.fast.waiting)+len(c.fast.owed)+len(c.fast.told) == 0
	})
	(&record{path: rec}).waitFor(t, `"arguments":{"seed":29}`)
	time.Sleep(100 * time.Millisecond) // the last cancellations reach the record
	requests, cancels := requestsAndCancellations(t, rec, regexp.MustCompile(`"arguments":\{"r":`))
	if len(requests) == 0 {
		t.Fatal("the server read no request")
	}
	for id, at := range requests {
		if cs := cancels[id]; len(cs) != 1 || cs[0] < at {
			t.Errorf("call %s: request at line %d, cancellations at %v; want one, after it", id, at, cs)
		}
	}
	// A call given up before its request was written is not cancelled either.
	all, _ := requestsAndCancellations(t, rec, regexp.MustCompile(`.`))
	for id, cs := range cancels {
		if _, ok := all[id]; !ok {
			t.Errorf("a cancellation of call %s at lines %v, whose request the server never read", id, cs)
		}
	}
}

// TestDeepAnswerFailsOnlyItsCall: an answer nested half a million levels deep (3.5 MB, under
// max_result_bytes), which would overflow the stack of a recursive decoder, is refused by the
// strict check of every line before any decoder reads it: its call fails with the reason, on
// either path, and the next call on the same connection is answered.
func TestDeepAnswerFailsOnlyItsCall(t *testing.T) {
	for _, fast := range []bool{true, false} {
		cfg := stdioServer(t, "diff")
		cfg.Env[recordEnv] = filepath.Join(t.TempDir(), "read")
		m, err := startManager(t, []config.Server{cfg}, Options{FastPath: fast})
		if err != nil {
			t.Fatal(err)
		}
		u := m.All()[0]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = u.Call(ctx, "gen", json.RawMessage(`{"deep":true}`), nil)
		cancel()
		var refused *OutputError
		if !errors.As(err, &refused) || refused.Reason != OutputNotJSONRPC || !strings.Contains(refused.Detail, "more than 128 arrays and objects") {
			t.Fatalf("fast path %v: the deep answer gave %v, want it refused as too deep", fast, err)
		}
		if res, err := u.Call(context.Background(), "gen", json.RawMessage(`{"seed":1}`), nil); err != nil && transportFailed(err) || err == nil && res == nil {
			t.Fatalf("fast path %v: the call after the deep answer: %v, %v", fast, res, err)
		}
	}
}

// TestPlainTextResultTakesTextResults: the text results of most tools are decoded by
// plainTextResult (decodesLikeTheSDK checks it gives the SDK's value), and what it cannot read as
// the SDK's library does goes on to that library.
func TestPlainTextResultTakesTextResults(t *testing.T) {
	takes := []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"content":[{"text":"hello","type":"text"}],"isError":true}`,
		` { "isError" : false , "content" : [ { "type" : "text" , "text" : "" } , {"type":"text","text":"b"} ] } `,
		`{"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}]}`,
		`{"content":[{"type":"text","text":"\u00e9\u2028\ud83d\ude00 \b\f\n\r\t\/\\ é😀"}]}`,
		`{"content":[{"type":"text","text":"a"}],"_meta":{"io.x/server":{"name":"n","version":"1"}}}`,
		`{"content":[]}`,
		`{"content":[{"type":"text","text":"a"}],"structuredContent":{}}`,
		`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo","version":"1"}},"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}],"structuredContent":{"target":"shelf","speed":0.5},"resultType":"complete"}`,
		`{"content":[],"resultType":"input_required","requestState":"s1","structuredContent":[1,"a",null,{"b":[true,1e300]}]}`,
	}
	for _, c := range takes {
		if _, ok := plainTextResult([]byte(c)); !ok {
			t.Errorf("plainTextResult left %s to the SDK's library", c)
		}
	}
	leaves := []string{
		`{"content":[{"type":"text","text":"\ud83d"}]}`,
		`{"content":[{"type":"text","text":"\ude00\ud83d"}]}`,
		"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}]}",
		"{\"content\":[{\"type\":\"text\",\"text\":\"a\x00b\"}]}",
		`{"content":[{"type":"text","text":"a","text":"b"}]}`,
		`{"content":[{"type":"text","text":"a"}],"isError":true,"isError":false}`,
		`{"content":[{"type":"text","text":"a","annotations":{}}]}`,
		`{"content":[{"type":"image","data":"","mimeType":"x"}]}`,
		`{"content":[{"type":"text","text":"a"}]} x`,
		`{"isError":true}`,
		`{"content":[],"resultType":"other"}`,
		`{"content":[],"resultType":""}`,
		`{"content":[],"structuredContent":{"a":}}`,
		`{"content":[],"structuredContent":1,"structuredContent":2}`,
		`{"content":[],"inputRequests":{}}`,
	}
	for _, c := range leaves {
		if res, ok := plainTextResult([]byte(c)); ok {
			t.Errorf("plainTextResult took %s (as %#v)", c, res)
		}
	}
}

// plainIDCases are ids of answers; the seeds of FuzzPlainIDIsEncodingJSON.
var plainIDCases = []string{
	"0", "7", "00", "01", "-1", "1.0", "1e3", "123456789012345", "999999999999999", "1234567890123456",
	"9007199254740993", "1125899906842625", "9007199254740991", "9007199254740992", "12345678901234567",
	`""`, `"a"`, `"a\"b"`, `"é"`, `"\u0041"`, `"a b"`, `"a`, `a"`, " 7", "7 ", "null", "true",
}

// FuzzPlainIDIsEncodingJSON: the ids plainID decodes, it decodes to what encoding/json gives an
// any.
func FuzzPlainIDIsEncodingJSON(f *testing.F) {
	for _, c := range plainIDCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		got, ok := plainID([]byte(c))
		if !ok {
			return
		}
		var want any
		if err := json.Unmarshal([]byte(c), &want); err != nil {
			t.Fatalf("plainID(%s) = %#v; encoding/json: %v", c, got, err)
		}
		if got != want {
			t.Fatalf("plainID(%s) = %#v; encoding/json %#v", c, got, want)
		}
	})
}

// TestPlainIDTakesTheGatewaysIDs: the ids of the gateway's own calls, as fastCalls numbers them,
// and the SDK's, are read without encoding/json; numbers it could not hold exactly, or written
// another way, are left to it.
func TestPlainIDTakesTheGatewaysIDs(t *testing.T) {
	ids := []string{"0", "7", "999999999999999", `"a"`, `"req-12"`}
	for _, n := range []int64{1, 2, 1 << 20, 1<<53 - 1 - fastIDBase} {
		ids = append(ids, strconv.FormatInt(fastIDBase+n, 10))
	}
	for _, c := range ids {
		if _, ok := plainID([]byte(c)); !ok {
			t.Errorf("plainID left %s to encoding/json", c)
		}
	}
	for _, c := range []string{"00", "-1", "1.0", "1e3", "9007199254740992", "12345678901234567", `"\u0041"`, `"é"`, " 7"} {
		if v, ok := plainID([]byte(c)); ok {
			t.Errorf("plainID took %s as %#v", c, v)
		}
	}
}

// BenchmarkDecodeResult: a text result decoded by plainTextResult, and by the SDK's library as
// every result was before it (the wire form, then the SDK's types).
func BenchmarkDecodeResult(b *testing.B) {
	for _, c := range []struct{ name, data string }{
		{"text", `{"content":[{"type":"text","text":"hello, robot"}]}`},
		{"json_text", `{"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}],"_meta":{"io.x/server":{"name":"echo","version":"1"}}}`},
	} {
		data := []byte(c.data)
		b.Run(c.name+"/plain", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeCallToolResult(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/wire_form", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var w wireResult
				if _, err := segjson.Parse(data, &w, sdkParseFlags); err != nil {
					b.Fatal(err)
				}
				if _, ok := w.result(); !ok {
					b.Fatal("not decoded")
				}
			}
		})
	}
}
