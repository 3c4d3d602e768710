package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// idleConfig fronts the simulated robot with a short session_idle_timeout; {{tools}} is what a
// reload changes, so that every session is sent a list_changed.
const idleConfig = `
gateway: {listen: "{{listen}}", session_idle_timeout: {{idle}}}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
{{tools}}
`

func writeIdleConfig(t *testing.T, cfg, addr, idle, tools string) {
	t.Helper()
	text := strings.NewReplacer("{{listen}}", addr, "{{sim}}", simRobotBin, "{{marker}}", marker(t),
		"{{idle}}", idle, "{{tools}}", tools).Replace(idleConfig)
	if err := writeFile(cfg, text); err != nil {
		t.Fatal(err)
	}
}

// rss reads the resident set size of process pid (VmRSS), in bytes.
func rss(t *testing.T, pid int) int64 { return procStatusBytes(t, pid, "VmRSS") }

// abandonedSession opens a session as a client that then goes away without DELETE:
// initialize, notifications/initialized, a tools/list, and, with stream, a GET stream whose
// connection is then dropped, as when a client's process dies. It returns the session id.
func abandonedSession(t *testing.T, addr string, stream bool) string {
	code, id, body := initialize(t, addr)
	if code != http.StatusOK || id == "" {
		t.Errorf("initialize: %d %q", code, body)
		return ""
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		if code, body := inSession(t, addr, id, msg); code != http.StatusOK && code != http.StatusAccepted {
			t.Errorf("%s: %d %q", msg, code, body)
		}
	}
	if stream {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		// A connection of its own, closed with the stream.
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
	}
	return id
}

// inSession posts msg in session id and returns the status and body.
func inSession(t *testing.T, addr, id, msg string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// openAbandoned opens n abandoned sessions, 8 at a time, every other one with a stream dropped.
func openAbandoned(t *testing.T, addr string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				ids[i] = abandonedSession(t, addr, i%2 == 0)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// sessionsGauge is mcp_gateway_http_sessions now.
func sessionsGauge(t *testing.T, addr string) float64 {
	t.Helper()
	v, ok := scrape(t, addr).value("mcp_gateway_http_sessions")
	if !ok {
		t.Fatal("/metrics has no mcp_gateway_http_sessions")
	}
	return v
}

// TestIdleSessionsEndAndFreeTheirMemory: 200 sessions opened and abandoned (half of them after
// a GET stream whose connection dropped) are ended after gateway.session_idle_timeout; the
// mcp_gateway_http_sessions gauge drops back to the one client still there, whose session,
// idle but listening on its stream, is kept; the gateway's resident memory returns near what it
// was before; and a reload that changes the tool list afterwards logs no warning per session,
// while the client still there is told.
func TestIdleSessionsEndAndFreeTheirMemory(t *testing.T) {
	const idle = 3 * time.Second
	cfg, addr := writeConfig(t, "{}")
	writeIdleConfig(t, cfg, addr, idle.String(), "")
	gw := startGateway(t, cfg, addr)
	pid := gw.cmd.Process.Pid

	changed := make(chan struct{}, 16)
	listening := connectHTTPAt(t, addr, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}}, "2025-11-25")
	if _, env := call(t, listening, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("get_scene: %v", env)
	}

	// The baseline: after a first round of abandoned sessions has come and gone, so that what
	// the runtime keeps of its first growth is in it.
	openAbandoned(t, addr, 50)
	waitFor(t, idle+15*time.Second, "the first abandoned sessions to end", func() bool { return sessionsGauge(t, addr) == 1 })
	time.Sleep(2 * time.Second) // and their memory given back, a second after they ended
	baseline := rss(t, pid)

	ids := openAbandoned(t, addr, 200)
	if n := sessionsGauge(t, addr); n != 201 {
		t.Fatalf("mcp_gateway_http_sessions is %v with 200 abandoned sessions and one client, want 201", n)
	}
	grown := rss(t, pid)
	t.Logf("resident memory: %d KiB before, %d KiB with 200 more sessions", baseline>>10, grown>>10)

	start := time.Now()
	waitFor(t, idle+15*time.Second, "mcp_gateway_http_sessions to drop back to 1", func() bool { return sessionsGauge(t, addr) == 1 })
	if took := time.Since(start); took < idle-time.Second {
		t.Errorf("the sessions ended %s after they were opened, before gateway.session_idle_timeout (%s)", took, idle)
	}
	for _, id := range ids[:5] {
		if code, body := inSession(t, addr, id, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); code != http.StatusNotFound {
			t.Errorf("an ended session: %d %q", code, body)
		}
	}
	// Idle, but listening on its stream: the client still there keeps its session.
	if _, env := call(t, listening, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("the listening client's call after the timeout: %v", env)
	}

	// What 200 sessions held is given back: within a quarter of their growth over the baseline.
	limit := baseline + max(grown-baseline, 0)/4 + 2<<20
	if pollFor(30*time.Second, func() bool { return rss(t, pid) <= limit }) {
		t.Logf("resident memory: %d KiB after they ended", rss(t, pid)>>10)
	} else {
		t.Errorf("resident memory %d KiB after the sessions ended, over %d KiB (baseline %d KiB, %d KiB with them)",
			rss(t, pid)>>10, limit>>10, baseline>>10, grown>>10)
	}

	// A reload that hides a tool: list_changed goes to every session; the client still there
	// hears it, and no session that is gone makes a line.
	writeIdleConfig(t, cfg, addr, idle.String(), "    tools: {exclude: [navigate_to]}")
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the listening client was not told the tool list changed")
	}
	time.Sleep(2 * time.Second) // past the summary's second
	log := gw.stderr.String()
	for _, s := range []string{"calling notifications/", "rejected by transport", "not delivered"} {
		if n := len(lines(log, s)); n > 0 {
			t.Errorf("after the reload the log has %d lines with %q:\n%s", n, s, strings.Join(lines(log, s), "\n"))
		}
	}
}

// TestListChangedToSessionsWithoutAStreamIsOneLine: sessions that read no GET stream cannot be
// sent a list_changed; a reload that changes the tool list logs that in one line with their
// number, not one warning each.
func TestListChangedToSessionsWithoutAStreamIsOneLine(t *testing.T) {
	cfg, addr := writeConfig(t, "{}")
	writeIdleConfig(t, cfg, addr, "1m", "")
	gw := startGateway(t, cfg, addr)
	openAbandoned(t, addr, 20)
	writeIdleConfig(t, cfg, addr, "1m", "    tools: {exclude: [navigate_to]}")
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the line of undelivered notifications", func() bool {
		return len(lines(gw.stderr.String(), "not delivered")) > 0
	})
	time.Sleep(2 * time.Second)
	log := gw.stderr.String()
	summary := lines(log, "not delivered")
	if len(summary) != 1 || !strings.Contains(summary[0], "undelivered=20") || !strings.Contains(summary[0], "notifications/tools/list_changed") {
		t.Errorf("the summary: %q", summary)
	}
	if n := len(lines(log, "rejected by transport")); n != 1 {
		t.Errorf("%d lines say rejected by transport, want the summary alone", n)
	}
}
