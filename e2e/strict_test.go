package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/strictjson"
)

// strictConfig fronts the simulated robot, which records every call it runs: the witness that
// a refused body moved nothing.
const strictConfig = `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-record", "{{dir}}/calls.jsonl"]
policies:
  default: allow
`

// rawSession is a streamable HTTP session driven with raw bodies.
type rawSession struct {
	t      *testing.T
	url    string
	id     string
	client *http.Client
}

func openRawSession(t *testing.T, addr string) *rawSession {
	t.Helper()
	s := &rawSession{t: t, url: "http://" + addr + "/mcp", client: &http.Client{Timeout: 30 * time.Second}}
	code, _, header := s.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"strict","version":"1"}}}`)
	if code != 200 || header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: HTTP %d, session %q", code, header.Get("Mcp-Session-Id"))
	}
	s.id = header.Get("Mcp-Session-Id")
	if code, body, _ := s.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: HTTP %d %s", code, body)
	}
	return s
}

func (s *rawSession) post(body string) (int, string, http.Header) {
	s.t.Helper()
	req, err := http.NewRequest("POST", s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("POST %.80q: %v", body, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// rpcError is the error member of a JSON-RPC answer.
type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func recordSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// navigateBody is a tools/call body of robot__navigate_to.
func navigateBody(id int, target string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":%q}}}`, id, target)
}

// ambiguousBodies are bodies that some reader takes as a robot call and that are not strict
// JSON-RPC, with the error code each must get.
var ambiguousBodies = []struct {
	name string
	body string
	code int64
}{
	{"trailing data", navigateBody(11, "shelf") + "}}}garbage]]", -32700},
	{"concatenated objects", `{"jsonrpc":"2.0","id":12,"method":"ping"}` + navigateBody(13, "shelf"), -32700},
	{"duplicate name", `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"robot__get_scene","arguments":{"target":"shelf"},"name":"robot__navigate_to"}}`, -32700},
	{"duplicate argument", `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"table","target":"shelf"}}}`, -32700},
	{"escaped duplicate name", `{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"robot__get_scene","n\u0061me":"robot__navigate_to","arguments":{"target":"shelf"}}}`, -32700},
	{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"tools/call\",\"params\":{\"name\":\"robot__navigate_to\",\"arguments\":{\"target\":\"shelf\xff\"}}}", -32700},
	{"huge number", `{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"shelf","speed":1e999}}}`, -32700},
	{"unsafe integer id", `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"shelf"}}}`, -32700},
	{"deep nesting", `{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"shelf","x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}}`, -32700},
	{"fractional id", `{"jsonrpc":"2.0","id":20.5,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"shelf"}}}`, -32600},
	{"request and response at once", `{"jsonrpc":"2.0","id":21,"method":"tools/call","result":{},"params":{"name":"robot__navigate_to","arguments":{"target":"shelf"}}}`, -32600},
}

func TestStrictJSONAtTheHTTPDoor(t *testing.T) {
	cfg, addr := writeConfig(t, strictConfig)
	record := filepath.Join(cfgDir(cfg), "calls.jsonl")
	p := startGateway(t, cfg, addr)
	s := openRawSession(t, addr)

	for _, tc := range ambiguousBodies {
		before := recordSize(t, record)
		code, body, header := s.post(tc.body)
		var e rpcError
		if code != http.StatusBadRequest || header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil || e.Error == nil {
			t.Errorf("%s: HTTP %d %s %q, want 400 with a JSON-RPC error", tc.name, code, header.Get("Content-Type"), body)
			continue
		}
		if e.Error.Code != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.name, e.Error.Code, e.Error.Message, tc.code)
		}
		if recordSize(t, record) != before {
			t.Errorf("%s: the robot ran a call: %s", tc.name, readFile(t, record))
		}
	}
	// The witness sees what does run.
	if code, body, _ := s.post(navigateBody(30, "table")); code != 200 || !strings.Contains(readFile(t, record), `"target":"table"`) {
		t.Fatalf("a strict call: HTTP %d %s; recorded %q", code, body, readFile(t, record))
	}
	if strings.Contains(readFile(t, record), "shelf") {
		t.Errorf("an ambiguous body reached the robot: %s", readFile(t, record))
	}
	// Refusals are counted by reason and logged at WARN, at most once per reason.
	m := scrape(t, addr)
	for reason, want := range map[string]float64{"trailing_data": 2, "duplicate_key": 3, "invalid_utf8": 1, "number_range": 2, "too_deep": 1, "invalid_request": 2} {
		if v, _ := m.value("mcp_gateway_protocol_refusals_total", "reason="+reason); v != want {
			t.Errorf("refusals of reason %s: %v, want %v", reason, v, want)
		}
	}
	if n := len(lines(p.stderr.String(), `reason=duplicate_key`)); n != 1 {
		t.Errorf("%d log lines of reason duplicate_key for 3 refusals, want 1:\n%s", n, p.stderr.String())
	}

	// A request without a session id, many times: JSON-RPC -32600, not code 0, no ERROR lines.
	noSession := &rawSession{t: t, url: s.url, client: s.client}
	for i := range 300 {
		code, body, _ := noSession.post(navigateBody(100+i, "shelf"))
		var e rpcError
		if code != http.StatusBadRequest || json.Unmarshal([]byte(body), &e) != nil || e.Error == nil || e.Error.Code != -32600 || string(e.ID) != fmt.Sprint(100+i) {
			t.Fatalf("without a session: HTTP %d %s", code, body)
		}
	}
	if n := len(lines(p.stderr.String(), "level=ERROR")); n != 0 {
		t.Errorf("%d ERROR lines:\n%s", n, p.stderr.String())
	}
	if n := len(lines(p.stderr.String(), "reason=missing_session")); n != 1 {
		t.Errorf("%d log lines for 300 requests without a session, want 1", n)
	}
	if strings.Contains(readFile(t, record), "shelf") {
		t.Errorf("a call without a session reached the robot: %s", readFile(t, record))
	}
}

// TestMutatedBodiesNeverMoveTheRobot sends mutations of valid robot__navigate_to calls: a body
// the scanner in this process finds not strict must leave the robot's record as it was, and no
// body gets a 5xx or brings the gateway down.
func TestMutatedBodiesNeverMoveTheRobot(t *testing.T) {
	cfg, addr := writeConfig(t, strictConfig)
	record := filepath.Join(cfgDir(cfg), "calls.jsonl")
	p := startGateway(t, cfg, addr)
	s := openRawSession(t, addr)

	const n = 10000
	rng := rand.New(rand.NewPCG(13, 2026))
	targets := []string{"table", "shelf", "counter", "home", "drawer"}
	var strict, refused, ran int
	start := time.Now()
	for i := range n {
		body := mutate(rng, []byte(navigateBody(i, targets[i%len(targets)])))
		isStrict := strictjson.Validate(body) == nil
		before := recordSize(t, record)
		code, answer, _ := s.post(string(body))
		if code >= 500 {
			t.Fatalf("body %d %q: HTTP %d %s", i, body, code, answer)
		}
		grew := recordSize(t, record) != before
		switch {
		case isStrict:
			strict++
			if grew {
				ran++
			}
		case grew:
			t.Fatalf("body %d is not strict JSON (%v) and the robot ran: %q", i, strictjson.Validate(body), body)
		default:
			refused++
			if code != http.StatusBadRequest {
				t.Fatalf("body %d is not strict JSON (%v) and got HTTP %d: %q", i, strictjson.Validate(body), code, body)
			}
		}
		select {
		case <-p.done:
			t.Fatalf("the gateway exited after body %d: %v", i, p.err)
		default:
		}
	}
	t.Logf("%d bodies in %s: %d not strict (refused), %d strict, of which %d ran on the robot", n, time.Since(start).Round(time.Millisecond), refused, strict, ran)
	if refused < n/2 || ran == 0 {
		t.Errorf("the mutations are too weak or too strong: %d refused, %d ran", refused, ran)
	}
	// Nothing arrives late either.
	final := recordSize(t, record)
	time.Sleep(200 * time.Millisecond)
	if recordSize(t, record) != final {
		t.Error("the robot ran a call after its answer")
	}
	if code, body, _ := s.post(navigateBody(n, "table")); code != 200 {
		t.Fatalf("a strict call after the loop: HTTP %d %s", code, body)
	}
	if strings.Contains(p.stderr.String(), "panic") {
		t.Errorf("the gateway's log holds a panic:\n%s", p.stderr.String())
	}
}

// Fragments a mutation inserts: structure, keys that change the call, bytes that are not UTF-8.
var fragments = []string{"}", "]", "{", "[", ",", ":", `"`, `\`, `,"name":"robot__navigate_to"`, `,"target":"shelf"`,
	`"n\u0061me"`, "\xff", "\xc3", "\x00", "1e999", "9007199254740993", `\ud800`, "garbage", " ", "\n", `{"jsonrpc":"2.0"}`}

// mutate changes a body one to three times: a byte flipped or replaced, a byte or fragment
// inserted, the body cut short, a piece of it repeated, garbage appended.
func mutate(rng *rand.Rand, b []byte) []byte {
	for range 1 + rng.IntN(3) {
		if len(b) == 0 {
			b = append(b, '{')
		}
		at := rng.IntN(len(b) + 1)
		switch rng.IntN(6) {
		case 0:
			if at < len(b) {
				b[at] ^= 1 << rng.IntN(8)
			}
		case 1:
			if at < len(b) {
				b[at] = byte(rng.IntN(256))
			}
		case 2:
			b = slicesInsert(b, at, []byte(fragments[rng.IntN(len(fragments))]))
		case 3:
			b = b[:at]
		case 4:
			from := rng.IntN(len(b))
			to := from + rng.IntN(len(b)-from) + 1
			b = slicesInsert(b, at, bytes.Clone(b[from:to]))
		case 5:
			b = append(b, fragments[rng.IntN(len(fragments))]...)
		}
	}
	return b
}

func slicesInsert(b []byte, at int, ins []byte) []byte {
	out := make([]byte, 0, len(b)+len(ins))
	out = append(out, b[:at]...)
	out = append(out, ins...)
	return append(out, b[at:]...)
}

// TestStrictJSONOverStdio drives `serve --stdio` with raw lines: each ambiguous line gets its
// JSON-RPC error on stdout and runs nothing; the session goes on and a strict call runs.
func TestStrictJSONOverStdio(t *testing.T) {
	cfg, _ := writeConfig(t, strings.Replace(strictConfig, `listen: "{{listen}}"`, `listen: ""`, 1))
	record := filepath.Join(cfgDir(cfg), "calls.jsonl")
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--stdio")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", stderr.String())
		}
	})
	answers := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			answers <- sc.Text()
		}
		close(answers)
	}()
	send := func(line string) string {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case a, ok := <-answers:
			if !ok {
				t.Fatalf("stdout closed after %.80q", line)
			}
			return a
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer to %.80q", line)
		}
		return ""
	}
	if a := send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"strict","version":"1"}}}`); !strings.Contains(a, `"result"`) {
		t.Fatalf("initialize: %s", a)
	}
	if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range ambiguousBodies {
		a := send(tc.body)
		var e rpcError
		if json.Unmarshal([]byte(a), &e) != nil || e.Error == nil || e.Error.Code != tc.code {
			t.Errorf("%s: answered %s, want code %d", tc.name, a, tc.code)
		}
	}
	if a := send("not json at all"); !strings.Contains(a, `"code":-32700`) || !strings.Contains(a, `"id":null`) {
		t.Errorf("a line of text: %s", a)
	}
	if recordSize(t, record) != 0 {
		t.Fatalf("the robot ran a call: %s", readFile(t, record))
	}
	if a := send(navigateBody(40, "table")); !strings.Contains(a, `"id":40`) || !strings.Contains(a, `"result"`) {
		t.Fatalf("a strict call after the refusals: %s", a)
	}
	if got := readFile(t, record); !strings.Contains(got, `"target":"table"`) || strings.Contains(got, "shelf") {
		t.Errorf("recorded %q, want the one strict call", got)
	}
}
