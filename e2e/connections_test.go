package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounded connections (SPEC.md §15, issue 12), tried from outside: raw connections that trickle
// a body, send nothing or carry no token, against the real binary, with the gateway's open
// files counted in /proc and a real MCP client that must be served meanwhile.

// connsConfig has a 2 s body deadline; {{extra}} adds gateway settings.
const connsConfig = `
gateway:
  listen: "{{listen}}"
  body_read_timeout: 2s
  log_level: debug
{{extra}}servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`

const bodyDeadline = 2 * time.Second

func connsGateway(t *testing.T, extra string) (*gatewayProc, string) {
	t.Helper()
	cfg, addr := writeConfig(t, strings.Replace(connsConfig, "{{extra}}", extra, 1))
	return startGateway(t, cfg, addr), cfg
}

// openFiles counts the open files of process pid.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("cannot count open files in /proc (%v); this test needs Linux", err)
	}
	return len(entries)
}

// slowBody is a raw connection that sent the headers of a POST /mcp announcing a 1000-byte
// body and then sends one byte of it per second. closed is when the gateway closed it (zero
// while open), status the status line it answered with, if one arrived before the close.
type slowBody struct {
	conn   net.Conn
	sent   time.Time
	closed time.Time
	status string
}

// trickle opens n slowBody connections to addr with extra header lines, each writing until the
// gateway closes it or ctx ends; wait returns when every one of them has stopped.
func trickle(t *testing.T, ctx context.Context, addr string, n int, header string) (conns []*slowBody, wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		t.Cleanup(func() { c.Close() })
		s := &slowBody{conn: c, sent: time.Now()}
		if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\n"+header+"Content-Length: 1000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, s)
		wg.Add(2)
		go func() { // the body, a byte a second
			defer wg.Done()
			for i := 0; i < 999; i++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		go func() { // what the gateway answers, and when it closes
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			r := bufio.NewReader(c)
			if line, err := r.ReadString('\n'); err == nil {
				s.status = strings.TrimSpace(line)
			}
			_, err := io.Copy(io.Discard, r)
			if !errors.Is(err, os.ErrDeadlineExceeded) { // EOF, or a reset after unread bytes of ours
				s.closed = time.Now()
			}
			c.Close()
		}()
	}
	return conns, wg.Wait
}

// served connects an MCP client, lists the tools and calls one, all within limit.
func served(t *testing.T, addr, token string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	cs := connectHTTPAs(t, addr, token, nil)
	if _, ok := toolNames(t, cs)["robot__get_scene"]; !ok {
		t.Fatal("robot__get_scene is not listed")
	}
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Fatalf("robot__get_scene: %s", textOf(res))
	}
	took := time.Since(start)
	if took > limit {
		t.Errorf("the MCP client took %s to connect, list and call; want under %s", took, limit)
	}
	return took
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func TestConnectionsSlowBodiesAreClosedAtTheirDeadline(t *testing.T) {
	p, _ := connsGateway(t, "")
	pid := p.cmd.Process.Pid
	base := openFiles(t, pid)
	baseRoutines, _ := scrape(t, p.addr).value("go_goroutines")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns, wait := trickle(t, ctx, p.addr, 100, "")
	time.Sleep(200 * time.Millisecond)
	during := openFiles(t, pid)
	routines, _ := scrape(t, p.addr).value("go_goroutines")
	if routines > baseRoutines+100+20 {
		t.Errorf("the gateway ran %v goroutines with 100 slow bodies, %v before: more than one per connection", routines, baseRoutines)
	}
	took := served(t, p.addr, "", 2*time.Second)

	wait() // every connection closed (or read for 30 s)
	var after []time.Duration
	timeouts := 0
	for i, s := range conns {
		if s.closed.IsZero() {
			t.Fatalf("connection %d was still open 30 s after its headers", i)
		}
		d := s.closed.Sub(s.sent)
		after = append(after, d)
		if d < bodyDeadline-100*time.Millisecond || d > bodyDeadline+1500*time.Millisecond {
			t.Errorf("connection %d closed %s after its headers; want %s (body_read_timeout) plus little", i, d, bodyDeadline)
		}
		if strings.Contains(s.status, " 408 ") {
			timeouts++
		}
	}
	slices.Sort(after)
	t.Logf("100 slow bodies: closed after median %s, max %s (%d read the 408 before the close); MCP client served in %s; "+
		"gateway files %d before, %d during; goroutines %v before, %v during",
		median(after), after[len(after)-1], timeouts, took, base, during, baseRoutines, routines)
	if during > base+100+20 {
		t.Errorf("the gateway held %d files during the flood, %d before: more than a file per connection", during, base)
	}
	if now := openFiles(t, pid); now > base+10 {
		t.Errorf("the gateway holds %d files after the slow connections closed, %d before", now, base)
	}
	m := scrape(t, p.addr)
	if v, _ := m.value("mcp_gateway_http_body_timeouts_total"); v != 100 {
		t.Errorf("mcp_gateway_http_body_timeouts_total = %v, want 100", v)
	}
	if n := len(lines(p.stderr.String(), "request body did not arrive within gateway.body_read_timeout")); n != 100 {
		t.Errorf("%d debug lines about bodies that did not arrive, want 100", n)
	}
}

func TestConnectionsUnauthenticatedSlowBodiesAreRefusedAtOnce(t *testing.T) {
	t.Setenv("E2E_OPERATOR_TOKEN", operatorToken)
	cfg, addr := writeConfig(t, strings.Replace(connsConfig, "{{extra}}", "", 1)+
		"auth:\n  tokens:\n    - {principal: operator, roles: [admin], token_env: E2E_OPERATOR_TOKEN}\n")
	startGateway(t, cfg, addr)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns, wait := trickle(t, ctx, addr, 100, "")
	authed, waitAuthed := trickle(t, ctx, addr, 1, "Authorization: Bearer "+operatorToken+"\r\n")
	took := served(t, addr, operatorToken, 2*time.Second)
	wait()
	waitAuthed()
	var after []time.Duration
	for i, s := range conns {
		if s.closed.IsZero() {
			t.Fatalf("unauthenticated connection %d was still open 30 s after its headers", i)
		}
		if !strings.Contains(s.status, " 401 ") {
			t.Errorf("unauthenticated connection %d got %q, want 401", i, s.status)
		}
		d := s.closed.Sub(s.sent)
		after = append(after, d)
		if d > bodyDeadline/2 {
			t.Errorf("unauthenticated connection %d was answered and closed after %s: the gateway waited for a body it refuses", i, d)
		}
	}
	slices.Sort(after)
	// A token holder's body is still bounded by the deadline.
	if d := authed[0].closed.Sub(authed[0].sent); authed[0].closed.IsZero() || d < bodyDeadline-100*time.Millisecond || d > bodyDeadline+1500*time.Millisecond {
		t.Errorf("an authenticated slow body was closed after %s (status %q); want %s plus little", d, authed[0].status, bodyDeadline)
	}
	t.Logf("100 unauthenticated slow bodies: 401 and closed after median %s, max %s; MCP client served in %s",
		median(after), after[len(after)-1], took)
}

func TestConnectionsSilentOnesMakeRoomAtTheCap(t *testing.T) {
	p, _ := connsGateway(t, "  max_connections: 20\n")
	pid := p.cmd.Process.Pid
	base := openFiles(t, pid)

	// 50 connections that send nothing: past the cap, each new one takes the place of the
	// one silent longest.
	var silent []net.Conn
	for range 50 {
		c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		silent = append(silent, c)
	}
	time.Sleep(300 * time.Millisecond)
	during := openFiles(t, pid)
	took := served(t, p.addr, "", 2*time.Second)
	if during > base+20+2 {
		t.Errorf("the gateway held %d files with 50 silent connections and max_connections 20, %d before", during, base)
	}
	closed := 0
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			closed++
		}
	}
	if closed < 30 {
		t.Errorf("%d of 50 silent connections were closed; at a cap of 20 at least 30 must be", closed)
	}
	m := scrape(t, p.addr)
	open, _ := m.value("mcp_gateway_http_connections")
	evicted, _ := m.value("mcp_gateway_http_connections_evicted_total")
	limit, _ := m.value("mcp_gateway_http_connections_limit")
	if open > 20 || evicted < 30 || limit != 20 {
		t.Errorf("http_connections %v (want ≤ 20), evicted_total %v (want ≥ 30), limit %v (want 20)", open, evicted, limit)
	}
	t.Logf("50 silent connections at max_connections 20: %d closed, gateway files %d before, %d during; MCP client served in %s",
		closed, base, during, took)
}

func TestConnectionsBusyAtTheCapAreRefusedQuickly(t *testing.T) {
	p, _ := connsGateway(t, "  max_connections: 20\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The readiness probe's kept-alive connection goes; then 20 connections inside a request
	// (their bodies trickle) fill every place, and none is idle to make room with.
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	busy, wait := trickle(t, ctx, p.addr, 20, "")
	time.Sleep(300 * time.Millisecond)
	for i, s := range busy {
		if s.status != "" || !s.closed.IsZero() {
			t.Fatalf("busy connection %d was answered %q before its body's deadline", i, s.status)
		}
	}
	start := time.Now()
	fresh := &http.Client{Transport: &http.Transport{}} // a new connection, not a kept one
	resp, err := fresh.Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatalf("a request at the cap: %v; want a 503 that says why", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	refusedIn := time.Since(start)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "gateway.max_connections") {
		t.Fatalf("at the cap: %d %q, want 503 naming gateway.max_connections", resp.StatusCode, body)
	}
	if refusedIn > 500*time.Millisecond {
		t.Errorf("refused after %s; want at once", refusedIn)
	}
	wait() // the bodies' deadline frees every place
	took := served(t, p.addr, "", 2*time.Second)
	if v, _ := scrape(t, p.addr).value("mcp_gateway_http_connections_refused_total"); v < 1 {
		t.Errorf("mcp_gateway_http_connections_refused_total = %v, want ≥ 1", v)
	}
	t.Logf("at the cap with every connection busy: 503 in %s; after the body deadline the MCP client was served in %s", refusedIn, took)
}

// TestConnectionsUnderAFileLimit is the case reported in issue 12: with 256 open files allowed,
// 400 connections trickling bodies locked a legitimate client out. The gateway now serves at
// most what the limit leaves room for, keeps its own files, and the client is served as soon as
// the slow bodies' deadline has passed.
func TestConnectionsUnderAFileLimit(t *testing.T) {
	cfg, addr := writeConfig(t, strings.Replace(connsConfig, "{{extra}}", "", 1))
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, gatewayBin, "serve", "-c", cfg)
	p := &gatewayProc{cmd: cmd, addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", p.stderr.String())
		}
	})
	p.waitReady(t, 30*time.Second)
	// The warning is read off the gateway's stderr pipe, which may lag the readiness check.
	if !pollFor(5*time.Second, func() bool { return strings.Contains(p.stderr.String(), "serving_at_most=192") }) {
		t.Fatalf("the gateway did not lower its connection cap to the file limit:\n%s", p.stderr.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, wait := trickle(t, ctx, addr, 400, "")
	flooded := time.Since(start)
	during := openFiles(t, cmd.Process.Pid)
	// A client that retries, as a person would after a 503.
	var took time.Duration
	for attempt := 0; ; attempt++ {
		cctx, ccancel := context.WithTimeout(context.Background(), 2*time.Second)
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, nil)
		cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
		if err == nil {
			_, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "robot__get_scene", Arguments: map[string]any{}})
			cs.Close()
		}
		ccancel()
		if err == nil {
			took = time.Since(start)
			break
		}
		if time.Since(start) > bodyDeadline+flooded+3*time.Second {
			t.Fatalf("the client was not served within %s of the flood (attempt %d): %v", time.Since(start), attempt, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wait()
	if strings.Contains(p.stderr.String(), "too many open files") {
		t.Errorf("the gateway ran out of files:\n%s", p.stderr.String())
	}
	if during > 256 {
		t.Errorf("the gateway held %d files under a limit of 256", during)
	}
	// Still whole: a fresh client is served at once.
	again := served(t, addr, "", 2*time.Second)
	t.Logf("400 slow bodies under 256 open files: gateway files during it %d; the retrying client was served %s after the flood began (flood took %s to open); afterwards in %s",
		during, took, flooded, again)
}

// TestConnectionsALongCallOutlivesTheBodyDeadline: the deadline bounds reading a body, not the
// call it carries, nor the stream its progress comes back on.
func TestConnectionsALongCallOutlivesTheBodyDeadline(t *testing.T) {
	cfg, addr := writeConfig(t, strings.Replace(connsConfig, "{{extra}}", "", 1)+"    physical: true\n")
	p := startGateway(t, cfg, addr)
	var mu sync.Mutex
	var progress []time.Duration
	start := time.Now()
	cs := connectHTTP(t, addr, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, time.Since(start))
		mu.Unlock()
	}})
	params := &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 3 * bodyDeadline.Seconds()}}
	params.SetProgressToken("long")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	took := time.Since(start)
	if err != nil || res.IsError {
		t.Fatalf("a %s call with body_read_timeout %s: %v %s", 3*bodyDeadline, bodyDeadline, err, mustJSON(res))
	}
	if env, _ := res.StructuredContent.(map[string]any); env["success"] != true {
		t.Fatalf("the long call did not succeed: %s", mustJSON(res))
	}
	mu.Lock()
	last := progress[len(progress)-1]
	mu.Unlock()
	if took < 3*bodyDeadline || last < 2*bodyDeadline {
		t.Errorf("call took %s, last progress at %s; want the call to run its %s with progress past %s", took, last, 3*bodyDeadline, 2*bodyDeadline)
	}
	// The session, idle meanwhile on its stream, still works.
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Fatalf("after the long call: %s", textOf(res))
	}
	if v, _ := scrape(t, addr).value("mcp_gateway_http_body_timeouts_total"); v != 0 {
		t.Errorf("mcp_gateway_http_body_timeouts_total = %v, want 0", v)
	}
	if strings.Contains(p.stderr.String(), "locked out") {
		t.Errorf("the long call locked the robot out:\n%s", p.stderr.String())
	}
	t.Logf("a %s physical call under body_read_timeout %s: answered after %s, %d progress notifications, the last at %s",
		3*bodyDeadline, bodyDeadline, took, len(progress), last)
}
