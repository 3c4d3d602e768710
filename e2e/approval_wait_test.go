package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls held for an operator's approval, with clients that wait as agent frameworks do: with a
// request timeout far shorter than an operator takes, kept alive by the gateway's progress
// notifications; and clients that leave before the operator answers, whose calls are
// withdrawn and never reach the robot. The simulated robot's -record file is the witness.

// tsClient runs e2e/node/approval-wait-client.mjs (the TypeScript SDK's client) against addr,
// calling robot__wait with args; it skips the test when the SDK is not installed.
func tsClient(t *testing.T, addr string, args map[string]any, timeoutMs, mode string) *tsRun {
	t.Helper()
	if _, err := os.Stat("node/node_modules/@modelcontextprotocol/sdk/package.json"); err != nil {
		t.Skip("the TypeScript MCP SDK (@modelcontextprotocol/sdk) is not installed in e2e/node: add it to e2e/node/package.json and run `make node-deps`")
	}
	script, err := filepath.Abs("node/approval-wait-client.mjs")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, "node", script, "http://"+addr+"/mcp", "robot__wait", mustJSON(args), timeoutMs, mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &tsRun{stderr: &syncBuffer{}, lines: make(chan tsLine, 100), done: make(chan struct{})}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l tsLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l.Unparsed = sc.Text()
			}
			r.lines <- l
		}
	}()
	go func() { r.err = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("TypeScript client stderr:\n%s", r.stderr.String())
		}
	})
	return r
}

// tsRun is a running approval-wait-client.mjs.
type tsRun struct {
	stderr *syncBuffer
	lines  chan tsLine // closed when its stdout ends
	done   chan struct{}
	err    error
}

// tsLine is one line the client printed.
type tsLine struct {
	Progress *struct {
		Progress, Total float64
		Message         string
	}
	Result *struct {
		IsError           bool
		StructuredContent map[string]any
	}
	Error *struct {
		Code    int
		Message string
	}
	ElapsedMs float64 `json:"elapsed_ms"`
	Left      string
	Unparsed  string `json:"-"`
}

// outcome reads the client's lines up to its outcome, within d.
func (r *tsRun) outcome(t *testing.T, d time.Duration) (progress []tsLine, last tsLine) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-r.lines:
			switch {
			case !ok:
				<-r.done
				t.Fatalf("the TypeScript client printed no outcome (%v):\n%s", r.err, r.stderr.String())
			case l.Progress != nil:
				progress = append(progress, l)
			case l.Result != nil || l.Error != nil:
				return progress, l
			case l.Unparsed != "":
				t.Logf("TypeScript client: %s", l.Unparsed)
			}
		case <-timeout:
			t.Fatalf("the TypeScript client had no outcome within %s:\n%s", d, r.stderr.String())
		}
	}
}

// approvalID reads the client's lines up to its first progress notification, which names the
// request its call waits for.
func (r *tsRun) approvalID(t *testing.T) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				<-r.done
				t.Fatalf("the TypeScript client heard no progress (%v):\n%s", r.err, r.stderr.String())
			}
			if l.Progress != nil {
				if id := approvalID.FindString(l.Progress.Message); id != "" {
					return id
				}
			}
			if l.Result != nil || l.Error != nil {
				t.Fatalf("the TypeScript client got %s before any progress", mustJSON(l))
			}
		case <-timeout:
			t.Fatalf("the TypeScript client heard no progress within 30s:\n%s", r.stderr.String())
		}
	}
}

// robotWaits counts the wait calls the simulated robot recorded.
func robotWaits(cfg string) int {
	b, _ := os.ReadFile(filepath.Join(cfgDir(cfg), "calls.jsonl"))
	return strings.Count(string(b), `"tool":"wait"`)
}

// TestApprovalWaitTypeScriptClientKeepsWaiting: the TypeScript SDK's client gives up on a
// request after 3 s without news; the operator approves after about 8 s. The gateway's progress
// notifications keep the client waiting, it gets the result, and the robot ran the call once.
func TestApprovalWaitTypeScriptClientKeepsWaiting(t *testing.T) {
	cfg, addr := writeConfig(t, withTimeout("60s"))
	startGateway(t, cfg, addr)
	start := time.Now()
	ts := tsClient(t, addr, map[string]any{"timeout_sec": 0.1}, "3000", "reset")
	id := pendingApproval(t, cfg)
	time.Sleep(time.Until(start.Add(8 * time.Second)))
	if n := robotWaits(cfg); n != 0 {
		t.Fatalf("a call waiting for approval reached the robot %d times", n)
	}
	cliOK(t, "approvals", "approve", id, "-c", cfg, "--operator", "alice", "--reason", "cell is clear")

	progress, last := ts.outcome(t, 30*time.Second)
	if last.Result == nil || last.Result.IsError || last.Result.StructuredContent["success"] != true {
		t.Fatalf("the TypeScript client got %s", mustJSON(last))
	}
	if last.ElapsedMs < 6000 {
		t.Errorf("the call returned after %v ms, before the operator approved it", last.ElapsedMs)
	}
	// One at once and one every 2 s for the ~8 s the call waited, then the robot's own, the
	// progress increasing throughout.
	waiting := 0
	for i, p := range progress {
		if strings.HasPrefix(p.Progress.Message, "waiting for an operator's approval") {
			waiting++
			if !strings.HasPrefix(p.Progress.Message, "waiting for an operator's approval "+id+"; ") ||
				!strings.HasSuffix(p.Progress.Message, " s left") || p.Progress.Total != 60 || i != waiting-1 {
				t.Errorf("progress notification %d: %s", i, mustJSON(p.Progress))
			}
		}
		if i > 0 && p.Progress.Progress <= progress[i-1].Progress.Progress {
			t.Errorf("progress went from %v to %v", progress[i-1].Progress.Progress, p.Progress.Progress)
		}
	}
	if waiting < 4 {
		t.Fatalf("%d progress notifications in 8 s of waiting: %s", waiting, mustJSON(progress))
	}
	if n := robotWaits(cfg); n != 1 {
		t.Errorf("the robot ran the approved call %d times, want once", n)
	}
}

// TestApprovalWaitGoClientSeesProgress: a Go SDK client that gives a progress token hears from
// its held call at once and then every 2 s, with the request's id and the time left.
func TestApprovalWaitGoClientSeesProgress(t *testing.T) {
	cfg, addr := writeConfig(t, withTimeout("60s"))
	startGateway(t, cfg, addr)
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connectHTTP(t, addr, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, req.Params)
		mu.Unlock()
	}})
	received := func() []*mcp.ProgressNotificationParams {
		mu.Lock()
		defer mu.Unlock()
		return append([]*mcp.ProgressNotificationParams(nil), got...)
	}
	var res *mcp.CallToolResult
	var callErr error
	called := make(chan struct{})
	go func() {
		defer close(called)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		params := &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 0.1}}
		params.SetProgressToken("held-call")
		res, callErr = cs.CallTool(ctx, params)
	}()
	id := pendingApproval(t, cfg)
	for deadline := time.Now().Add(20 * time.Second); len(received()) < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	cliOK(t, "approvals", "approve", id, "-c", cfg, "--operator", "alice")
	<-called
	if callErr != nil || res.IsError {
		t.Fatalf("approved call: %v %s", callErr, mustJSON(res))
	}
	progress := received()
	waiting := 0
	for i, p := range progress {
		if strings.HasPrefix(p.Message, "waiting for an operator's approval") {
			waiting++
			if !strings.HasPrefix(p.Message, "waiting for an operator's approval "+id+"; ") || !strings.HasSuffix(p.Message, " s left") ||
				p.Total != 60 || i != waiting-1 {
				t.Errorf("progress notification %d: %s", i, mustJSON(p))
			}
		}
		if p.ProgressToken != "held-call" || (i > 0 && p.Progress <= progress[i-1].Progress) {
			t.Errorf("progress notification %d after %v: %s", i, progress[max(i-1, 0)].Progress, mustJSON(p))
		}
	}
	if waiting < 3 {
		t.Fatalf("%d progress notifications while waiting: %s", waiting, mustJSON(progress))
	}
	if n := robotWaits(cfg); n != 1 {
		t.Errorf("the robot ran the approved call %d times, want once", n)
	}
}

// TestApprovalWaitWithdrawnWhenTheClientLeaves: a client that cancels its held call, gives up
// on it, ends its session or loses its connection, at each protocol revision, has the call
// withdrawn: its request leaves the pending list and shows as withdrawn with the cause,
// `approvals approve` refuses it saying nothing was run, the audit log records the withdrawal,
// and the robot never sees it.
func TestApprovalWaitWithdrawnWhenTheClientLeaves(t *testing.T) {
	cfg, addr := writeConfig(t, withTimeout("60s"))
	startGateway(t, cfg, addr)
	const (
		cancelled  = "the caller cancelled it or closed its connection"
		closed     = "the caller closed the connection of its request"
		endSession = "the caller ended its session"
	)

	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run("Go client cancels at "+version, func(t *testing.T) {
			cs := connectHTTPAt(t, addr, nil, version)
			ctx, cancel := context.WithCancel(context.Background())
			called := make(chan error)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 0.2}})
				called <- err
			}()
			id := pendingApproval(t, cfg)
			cancel() // notifications/cancelled, and the POST's stream closes
			if err := <-called; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call returned %v", err)
			}
			checkWithdrawn(t, cfg, id, cancelled, closed)
		})

		t.Run("Go client loses its connection at "+version, func(t *testing.T) {
			conns := &severableDialer{}
			cs := connectHTTPVia(t, addr, version, &http.Client{Transport: &http.Transport{DialContext: conns.DialContext}})
			called := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 0.5}})
				called <- err
			}()
			id := pendingApproval(t, cfg)
			conns.sever()
			checkWithdrawn(t, cfg, id, closed, cancelled)
			if err := <-called; err == nil {
				t.Error("the call whose connection was cut returned no error")
			}
		})
	}

	t.Run("TypeScript client gives up", func(t *testing.T) {
		// No reset on progress: the SDK gives up after 3 s and sends notifications/cancelled,
		// as the MCP Inspector does at its timeout.
		ts := tsClient(t, addr, map[string]any{"timeout_sec": 0.3}, "3000", "noreset")
		id := pendingApproval(t, cfg)
		_, last := ts.outcome(t, 30*time.Second)
		if last.Error == nil || !strings.Contains(last.Error.Message, "timed out") {
			t.Fatalf("the TypeScript client got %s", mustJSON(last))
		}
		checkWithdrawn(t, cfg, id, cancelled)
	})

	t.Run("TypeScript client ends its session", func(t *testing.T) {
		// It ends its session on the first progress notification, which names the request.
		ts := tsClient(t, addr, map[string]any{"timeout_sec": 0.4}, "3000", "terminate")
		id := ts.approvalID(t)
		checkWithdrawn(t, cfg, id, endSession)
		ts.outcome(t, 30*time.Second)
	})

	t.Run("TypeScript client closes", func(t *testing.T) {
		ts := tsClient(t, addr, map[string]any{"timeout_sec": 0.6}, "3000", "close")
		id := ts.approvalID(t)
		checkWithdrawn(t, cfg, id, closed)
		ts.outcome(t, 30*time.Second)
	})
}

// connectHTTPVia connects a Go SDK client at protocol version over hc, which it never retries.
func connectHTTPVia(t *testing.T, addr, version string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc, MaxRetries: -1}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect over HTTP at %s: %v", version, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("connected at %s, not %s", got, version)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// checkWithdrawn waits until the request id is withdrawn for one of whys (the first is the
// likeliest; which one a client's leaving is seen as first can depend on timing), and checks
// every way it shows.
func checkWithdrawn(t *testing.T, cfg, id string, whys ...string) {
	t.Helper()
	var got []struct {
		ID, State      string
		WithdrawReason string `json:"withdraw_reason"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := cliOK(t, "approvals", "list", "--state", "withdrawn", "-o", "json", "-c", cfg)
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("approvals list -o json: %v\n%s", err, out)
		}
		if len(got) > 0 && got[len(got)-1].ID == id {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approval %s was not withdrawn within 10s: %s", id, out)
		}
	}
	w := got[len(got)-1]
	why := ""
	for _, want := range whys {
		if w.WithdrawReason == want+"; nothing was run" {
			why = want
		}
	}
	if w.State != "withdrawn" || why == "" {
		t.Fatalf("withdrawn request: %+v, want the reason to be one of %q", w, whys)
	}
	if out, _ := cliOK(t, "approvals", "list", "-c", cfg); strings.Contains(out, id) {
		t.Errorf("approvals list still shows %s as pending:\n%s", id, out)
	}
	out, _ := cliOK(t, "approvals", "list", "--state", "all", "-c", cfg)
	if row := lineWith(out, id); !strings.Contains(row, "withdrawn") || !strings.Contains(row, why) {
		t.Errorf("approvals list --state all shows %s as:\n%s", id, out)
	}
	_, stderr, code := cli(t, "approvals", "approve", id, "-c", cfg, "--operator", "alice")
	if code != 1 || !strings.Contains(stderr, "withdrawn at") || !strings.Contains(stderr, why+"; nothing was run") {
		t.Errorf("approve of a withdrawn request: exit %d: %s", code, stderr)
	}
	recs := auditJSONL(t, "-c", cfg, "--type", "approval")
	if findRecord(recs, func(r auditRecord) bool {
		return r.Action == "withdraw" && r.Detail["approval"] == id && strings.Contains(r.Reason, why)
	}) == nil {
		t.Errorf("no audit record of the withdrawal of %s: %+v", id, recs)
	}
	if n := robotWaits(cfg); n != 0 {
		t.Errorf("a withdrawn call reached the robot (%d waits)", n)
	}
}

// lineWith is the first line of s that contains sub.
func lineWith(s, sub string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// severableDialer dials TCP connections that sever closes all at once; it dials none after.
type severableDialer struct {
	mu      sync.Mutex
	conns   []net.Conn
	severed bool
}

func (d *severableDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.severed {
		return nil, errors.New("the test cut this client's connections")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *severableDialer) sever() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.severed = true
	for _, c := range d.conns {
		c.Close()
	}
}
