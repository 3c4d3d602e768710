package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// wireError is a JSON-RPC error response as the door writes it.
type wireError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
			Offset *int   `json:"offset"`
			Path   string `json:"path"`
		} `json:"data"`
	} `json:"error"`
}

func decodeRefusal(t *testing.T, b []byte) wireError {
	t.Helper()
	var w wireError
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("the refusal %q is not JSON: %v", b, err)
	}
	if w.JSONRPC != "2.0" || w.ID == nil {
		t.Errorf("the refusal %s lacks jsonrpc 2.0 or an id member", b)
	}
	return w
}

const navigate = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"shelf"}}}`

func TestScreen(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		code    int64 // 0: let through
		reason  string
		id      string // the id echoed, as JSON
		message string
	}{
		{name: "a call", in: navigate},
		{name: "a notification", in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "a response", in: `{"jsonrpc":"2.0","id":"s-1","result":{}}`},
		{name: "an error response", in: `{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}`},
		{name: "a batch", in: `[` + navigate + `,{"jsonrpc":"2.0","method":"notifications/initialized"}]`},
		{name: "escaped version", in: `{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`},

		{name: "trailing garbage", in: navigate + `}}}garbage]]`, code: -32700, reason: "trailing_data", id: "null", message: "exactly one JSON-RPC message"},
		{name: "two objects", in: navigate + navigate, code: -32700, reason: "trailing_data", id: "null"},
		{name: "duplicate name", in: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"robot__get_scene","name":"robot__navigate_to"}}`,
			code: -32700, reason: "duplicate_key", id: "7", message: `duplicate key "name" at $.params (byte 82)`},
		{name: "escaped duplicate", in: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"robot__get_scene","n\u0061me":"robot__navigate_to"}}`,
			code: -32700, reason: "duplicate_key", id: "7"},
		{name: "duplicate id", in: `{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}`, code: -32700, reason: "duplicate_key", id: "null"},
		{name: "invalid utf8", in: "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"robot__navigate_to\",\"arguments\":{\"target\":\"sh\xffelf\"}}}",
			code: -32700, reason: "invalid_utf8", id: `"a"`, message: "UTF-8"},
		{name: "invalid utf8 in the id", in: "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}", code: -32700, reason: "invalid_utf8", id: "null"},
		{name: "huge number", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"speed":1e999}}}`, code: -32700, reason: "number_range", id: "1"},
		{name: "deep", in: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, code: -32700, reason: "too_deep", id: "null"},
		{name: "broken", in: `{"jsonrpc":"2.0","id":1,`, code: -32700, reason: "syntax", id: "null"},
		{name: "empty", in: ``, code: -32700, reason: "syntax", id: "null", message: "empty"},

		{name: "not an object", in: `"tools/call"`, code: -32600, reason: "invalid_request", id: "null", message: "this is a string"},
		{name: "no version", in: `{"id":1,"method":"ping"}`, code: -32600, reason: "invalid_request", id: "1", message: `"jsonrpc": "2.0"`},
		{name: "version 1", in: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, code: -32600, reason: "invalid_request", id: "1"},
		{name: "method not a string", in: `{"jsonrpc":"2.0","id":1,"method":7}`, code: -32600, reason: "invalid_request", id: "1"},
		{name: "null id", in: `{"jsonrpc":"2.0","id":null,"method":"tools/call"}`, code: -32600, reason: "invalid_request", id: "null", message: "string or an integer"},
		{name: "fractional id", in: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, code: -32600, reason: "invalid_request", id: "null"},
		{name: "object id", in: `{"jsonrpc":"2.0","id":{},"method":"ping"}`, code: -32600, reason: "invalid_request", id: "null"},
		{name: "request and response", in: `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, code: -32600, reason: "invalid_request", id: "1"},
		{name: "neither", in: `{"jsonrpc":"2.0","id":1}`, code: -32600, reason: "invalid_request", id: "1"},
		{name: "scalar params", in: `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, code: -32600, reason: "invalid_request", id: "1"},
		{name: "empty batch", in: `[]`, code: -32600, reason: "invalid_request", id: "null"},
		{name: "bad batch element", in: `[` + navigate + `,3]`, code: -32600, reason: "invalid_request", id: "null", message: "element 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ref := screen([]byte(tt.in))
			if tt.code == 0 {
				if ref != nil {
					t.Fatalf("refused: %s", ref.message)
				}
				return
			}
			if ref == nil {
				t.Fatal("let through")
			}
			w := decodeRefusal(t, ref.encode())
			if w.Error.Code != tt.code || w.Error.Data.Reason != tt.reason || string(w.ID) != tt.id || !strings.Contains(w.Error.Message, tt.message) {
				t.Errorf("got %s, want code %d reason %s id %s with %q", ref.encode(), tt.code, tt.reason, tt.id, tt.message)
			}
		})
	}
}

func TestMCPRefusesWhatIsNotStrictJSONRPC(t *testing.T) {
	srv, _ := authServer(t, "servers: [{name: arm, command: arm}]\n")
	for _, tc := range []struct {
		name, body string
		header     map[string]string
		code       int64
		id         string
	}{
		{"trailing garbage", navigate + "}}}garbage]]", nil, -32700, "null"},
		{"duplicate name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","name":"b"}}`, nil, -32700, "7"},
		{"empty body", "", nil, -32700, "null"},
		{"a call without a session", navigate, nil, -32600, "7"},
		{"a notification without a session", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, -32600, "null"},
		{"a call with an unknown session", `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"a":1,"a":2}}`, map[string]string{"Mcp-Session-Id": "nope"}, -32700, "7"},
	} {
		a := send(t, "POST", srv.URL+"/mcp", mcpHeader(tc.header), tc.body)
		if a.code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d %q, want 400", tc.name, a.code, a.body)
			continue
		}
		w := decodeRefusal(t, []byte(a.body))
		if w.Error.Code != tc.code || string(w.ID) != tc.id {
			t.Errorf("%s: %s, want code %d id %s", tc.name, a.body, tc.code, tc.id)
		}
	}
	req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(navigate+"x"))
	for k, v := range mcpHeader(nil) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("a parse error is answered as %q, want application/json", ct)
	}
	// What is strict goes on to the SDK: initialize without a session, ping without one.
	for _, body := range []string{initialize, `{"jsonrpc":"2.0","id":2,"method":"ping"}`} {
		if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), body); a.code != 200 {
			t.Errorf("%s: HTTP %d %q", body, a.code, a.body)
		}
	}
}

func TestStatelessNeedsNoSession(t *testing.T) {
	srv, _ := authServer(t, "gateway: {http_mode: stateless}\nservers: [{name: arm, command: arm}]\n")
	a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	if a.code == http.StatusBadRequest && strings.Contains(a.body, "Mcp-Session-Id") {
		t.Errorf("a stateless gateway asks for a session: %s", a.body)
	}
	if a := send(t, "POST", srv.URL+"/mcp", mcpHeader(nil), `{"jsonrpc":"2.0","id":3,"method":"tools/list"} x`); a.code != 400 || !strings.Contains(a.body, "-32700") {
		t.Errorf("stateless, trailing data: HTTP %d %q", a.code, a.body)
	}
}

func TestDoorCountsAndLogsAtMostOncePerReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	d := newDoor("http", reg, slog.New(slog.NewJSONHandler(&logs, nil)))
	now := time.Unix(1000, 0)
	d.now = func() time.Time { return now }
	_, dup := screen([]byte(`{"a":1,"a":2}`))
	_, trail := screen([]byte(`{} x`))
	for range 3000 {
		d.refused(dup)
	}
	d.refused(trail)
	if got := strings.Count(logs.String(), "\n"); got != 2 {
		t.Fatalf("%d log lines for 3001 refusals of two reasons, want 2:\n%s", got, logs.String())
	}
	now = now.Add(refusalLogEvery)
	d.refused(dup)
	var last struct {
		Level   string
		Reason  string
		Refused int
		Msg     string
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || last.Level != "WARN" || last.Reason != "duplicate_key" || last.Refused != 3000 || !strings.Contains(last.Msg, `duplicate key "a"`) {
		t.Errorf("after %s: %d lines, last %+v", refusalLogEvery, len(lines), last)
	}
	if v := testutil.ToFloat64(d.refusals.WithLabelValues("duplicate_key")); v != 3001 {
		t.Errorf("duplicate_key refusals %v, want 3001", v)
	}
	if v := testutil.ToFloat64(d.refusals.WithLabelValues("trailing_data")); v != 1 {
		t.Errorf("trailing_data refusals %v, want 1", v)
	}
	if n := testutil.CollectAndCount(d.refusals); n != len(refusalReasons()) {
		t.Errorf("%d series, want one per reason (%d) from the start", n, len(refusalReasons()))
	}
}

func TestStdioLinesAreScreened(t *testing.T) {
	in := strings.Join([]string{
		navigate,
		"",
		navigate + "}}}garbage]]",
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"a","n\u0061me":"b"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}",
		`{"jsonrpc":"2.0","id":10,"method":"ping","params":{"pad":"` + strings.Repeat("x", 300) + `"}}`,
		`{"jsonrpc":"2.0","id":11,"method":"ping"}` + "\r",
		`{"jsonrpc":"2.0","id":12,"method":"ping"}`, // the last, without a newline
	}, "\n")
	var out bytes.Buffer
	d := newDoor("stdio", nil, slog.New(slog.DiscardHandler))
	s := &screenedLines{in: io.NopCloser(nil), br: bufio.NewReaderSize(strings.NewReader(in), 64), out: &out, limit: 256, door: d}
	passed, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	want := navigate + "\n" + `{"jsonrpc":"2.0","id":11,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":12,"method":"ping"}` + "\n"
	if string(passed) != want {
		t.Errorf("passed on:\n%s\nwant:\n%s", passed, want)
	}
	answers := strings.Split(strings.TrimSpace(out.String()), "\n")
	wantAnswers := []struct {
		code   int64
		id     string
		reason string
	}{{-32700, "null", "trailing_data"}, {-32700, "8", "duplicate_key"}, {-32700, "9", "invalid_utf8"}, {-32600, "null", "too_large"}}
	if len(answers) != len(wantAnswers) {
		t.Fatalf("answers:\n%s\nwant %d", out.String(), len(wantAnswers))
	}
	for i, w := range wantAnswers {
		got := decodeRefusal(t, []byte(answers[i]))
		if got.Error.Code != w.code || string(got.ID) != w.id || got.Error.Data.Reason != w.reason {
			t.Errorf("answer %d: %s, want %d %s %s", i, answers[i], w.code, w.id, w.reason)
		}
	}
}

func BenchmarkScreen(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		var body bytes.Buffer
		body.WriteString(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"table","waypoints":[`)
		for i := 0; body.Len() < size-64; i++ {
			if i > 0 {
				body.WriteByte(',')
			}
			body.WriteString(`{"x":1.25,"y":-3,"label":"point \u00e9","tags":["a","b"],"ok":true}`)
		}
		body.WriteString(`]}}}`)
		data := body.Bytes()
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ref := screen(data); ref != nil {
					b.Fatal(ref.message)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(data))/1024), "ns/KB")
		})
	}
}
