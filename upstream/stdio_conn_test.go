package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// lockedBuffer collects what the connection writes to the server.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Close() error { return nil }

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// response is a JSON-RPC response with a result of exactly size bytes in all.
func response(id string, size int) string {
	start := `{"jsonrpc":"2.0","id":` + id + `,"result":{"text":"`
	end := `"}}`
	return start + strings.Repeat("x", size-len(start)-len(end)) + end
}

// readResults is what readAll saw.
type readResults struct {
	msgs  []jsonrpc.Message
	log   string
	wrote string
	stats *outputStats
}

// readAll feeds pieces (written one by one) to a stdio connection with the given limit and
// returns every message it reads, what it logged and wrote back, and the final error.
func readAll(t *testing.T, limit int64, pieces ...string) (readResults, error) {
	t.Helper()
	r, w := io.Pipe()
	var logs, back lockedBuffer
	stats := &outputStats{}
	tr := &stdioTransport{server: "robot", limit: limit, log: slog.New(slog.NewTextHandler(&logs, nil)), stats: stats, r: r, w: &back}
	conn, cerr := tr.Connect(context.Background())
	if cerr != nil {
		t.Fatal(cerr)
	}
	go func() {
		for _, p := range pieces {
			if _, err := w.Write([]byte(p)); err != nil {
				return
			}
		}
		w.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var msgs []jsonrpc.Message
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			conn.Close()
			return readResults{msgs: msgs, log: logs.String(), wrote: back.String(), stats: stats}, err
		}
		msgs = append(msgs, msg)
	}
}

func refusal(t *testing.T, m jsonrpc.Message) *OutputError {
	t.Helper()
	resp, ok := m.(*jsonrpc.Response)
	if !ok {
		t.Fatalf("got %T, want a response", m)
	}
	var e *OutputError
	if !errors.As(resp.Error, &e) {
		t.Fatalf("response error %v, want an *OutputError", resp.Error)
	}
	return e
}

func TestStdioConnBoundsAndNamesWhatTheServerWrites(t *testing.T) {
	const limit = 1000
	init := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	for _, tt := range []struct {
		name   string
		limit  int64 // 0: limit
		pieces []string
		check  func(t *testing.T, msgs []jsonrpc.Message, err error, log, wrote string, stats *outputStats)
	}{
		{"exactly the limit", 0, []string{response("7", limit) + "\n"}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).Error != nil || len(msgs[0].(*jsonrpc.Response).Result) != limit-len(`{"jsonrpc":"2.0","id":7,"result":}`) || !errors.Is(err, io.EOF) {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
		}},
		{"one byte over", 0, []string{response("7", limit+1) + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, log, _ string, stats *outputStats) {
			if len(msgs) != 2 {
				t.Fatalf("msgs %v, err %v: want the refusal and the next message", msgs, err)
			}
			e := refusal(t, msgs[0])
			if e.Reason != OutputTooLarge || e.Size != limit+1 || e.Limit != limit || e.Fatal || msgs[0].(*jsonrpc.Response).ID.Raw() != int64(7) {
				t.Errorf("refusal %+v", e)
			}
			want := "server robot answered the call to robot__get_scene with a message of 1001 bytes, over its max_result_bytes of 1000; the result was discarded. Ask for less, or raise servers[].max_result_bytes."
			if got := e.Explain("robot__get_scene"); got != want {
				t.Errorf("Explain:\n got %s\nwant %s", got, want)
			}
			if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "over its max_result_bytes of 1000") || stats.counts[0].Load() != 1 {
				t.Errorf("log %q, counts %v", log, stats.counts[0].Load())
			}
		}},
		{"a line split across reads", 0, []string{`{"jsonrpc":"2.0",`, `"id":3,"res`, `ult":{"a":1}}`, "\r\n" + init}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if len(msgs) != 2 || string(msgs[0].(*jsonrpc.Response).Result) != `{"a":1}` {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
		}},
		{"a line longer than a read chunk, within the limit", 4 * readChunk, []string{response("4", 3*readChunk+17) + "\n"}, nil},
		{"no trailing newline", 0, []string{`{"jsonrpc":"2.0","id":5,"result":{}}`}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).ID.Raw() != int64(5) || !errors.Is(err, io.EOF) {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
		}},
		{"invalid UTF-8", 0, []string{`{"jsonrpc":"2.0","id":6,"result":{"t":"caf` + "\xe9" + `"}}` + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if len(msgs) != 2 {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
			e := refusal(t, msgs[0])
			if e.Reason != OutputInvalidUTF8 || !strings.Contains(e.Detail, "byte 0xe9 at offset 42") || !strings.Contains(e.Quote, `caf\xe9`) {
				t.Errorf("refusal %+v", e)
			}
		}},
		{"a banner before initialize", 0, []string{"Starting driver… v1.2\n\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, log, _ string, stats *outputStats) {
			if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).ID.Raw() != int64(1) {
				t.Fatalf("msgs %v, err %v: the banner must be skipped", msgs, err)
			}
			if !strings.Contains(log, "level=WARN") || !strings.Contains(log, `server robot wrote a line to stdout that is not JSON-RPC: 'Starting driver… v1.2'`) ||
				!strings.Contains(stats.sessionNote(), "1 line(s)") || stats.counts[3].Load() != 1 {
				t.Errorf("log %q, note %q", log, stats.sessionNote())
			}
		}},
		{"a long banner is quoted in part", 0, []string{strings.Repeat("b", 10*readChunk) + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, log, _ string, _ *outputStats) {
			if len(msgs) != 1 || !strings.Contains(log, "'"+strings.Repeat("b", quoteBytes)+"'…") || strings.Contains(log, strings.Repeat("b", quoteBytes+1)) {
				t.Fatalf("msgs %v, err %v, log %q", msgs, err, log)
			}
		}},
		{"JSON that is not JSON-RPC, with an id", 0, []string{`{"id":8,"result":1` + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if e := refusal(t, msgs[0]); e.Reason != OutputNotJSONRPC || !strings.HasPrefix(e.Detail, "not strict JSON: the document ends inside an object") {
				t.Errorf("refusal %+v", e)
			}
		}},
		{"a JSON log line is skipped", 0, []string{`{"level":"info","msg":"ready"}` + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, log, _ string, _ *outputStats) {
			if len(msgs) != 1 || !strings.Contains(log, "not valid JSON-RPC") {
				t.Fatalf("msgs %v, err %v, log %q", msgs, err, log)
			}
		}},
		{"over the limit with its id last", 0, []string{`{"result":{"t":"` + strings.Repeat("y", 3*limit) + `"},"jsonrpc":"2.0","id":"k-9"}` + "\n"}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).ID.Raw() != "k-9" || refusal(t, msgs[0]).Reason != OutputTooLarge {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
		}},
		{"over the limit without an id fails the connection", 0, []string{`{"jsonrpc":"2.0","result":"` + strings.Repeat("z", 2*limit) + `"}` + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			var e *OutputError
			if len(msgs) != 0 || !errors.As(err, &e) || !e.Fatal || e.Reason != OutputTooLarge {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
		}},
		{"a request from the server over the limit is answered", 0, []string{`{"jsonrpc":"2.0","id":12,"method":"sampling/createMessage","params":{"p":"` + strings.Repeat("s", 2*limit) + `"}}` + "\n", init}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, wrote string, _ *outputStats) {
			if len(msgs) != 1 || !strings.Contains(wrote, `"id":12,"error":{"code":-32600`) || !strings.Contains(wrote, "max_result_bytes") {
				t.Fatalf("msgs %v, err %v, wrote %q", msgs, err, wrote)
			}
		}},
		{"a duplicate member is refused", 0, []string{`{"jsonrpc":"2.0","id":2,"result":{},"result":{"x":1}}` + "\n"}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if e := refusal(t, msgs[0]); e.Reason != OutputNotJSONRPC || !strings.Contains(e.Detail, `duplicate key "result" at $ (byte 36)`) {
				t.Errorf("refusal %+v", e)
			}
		}},
		{"a duplicate key deep in a result fails its call", 0, []string{`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a","t\u0065xt":"b"}]}}` + "\n"}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).ID.Raw() != int64(3) {
				t.Fatalf("msgs %v, err %v", msgs, err)
			}
			if e := refusal(t, msgs[0]); e.Reason != OutputNotJSONRPC || !strings.Contains(e.Detail, `duplicate key "text" at $.result.content[0]`) {
				t.Errorf("refusal %+v", e)
			}
		}},
		{"a second value after a result fails its call", 0, []string{`{"jsonrpc":"2.0","id":4,"result":{}} {"jsonrpc":"2.0","id":4,"result":{"x":1}}` + "\n"}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if e := refusal(t, msgs[0]); e.Reason != OutputNotJSONRPC || !strings.Contains(e.Detail, "data after the end of the JSON value") {
				t.Errorf("refusal %+v", e)
			}
		}},
		{"a number a float64 does not hold fails its call", 0, []string{`{"jsonrpc":"2.0","id":5,"result":{"v":1e400}}` + "\n"}, func(t *testing.T, msgs []jsonrpc.Message, err error, _, _ string, _ *outputStats) {
			if e := refusal(t, msgs[0]); e.Reason != OutputNotJSONRPC || !strings.Contains(e.Detail, "64-bit float") {
				t.Errorf("refusal %+v", e)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.limit
			if l == 0 {
				l = limit
			}
			got, err := readAll(t, l, tt.pieces...)
			msgs, log, wrote, stats := got.msgs, got.log, got.wrote, got.stats
			if tt.check == nil {
				if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).Error != nil {
					t.Fatalf("msgs %v, err %v, log %q", msgs, err, log)
				}
				return
			}
			tt.check(t, msgs, err, log, wrote, stats)
		})
	}
}
