package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Paths of the binaries built once by TestMain.
var (
	binDir           string
	gatewayBin       string
	simRobotBin      string
	everythingGoBin  string
	serverEverything string // npm's server-everything entry point
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mcp-gateway-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	gatewayBin = filepath.Join(dir, "mcp-gateway")
	simRobotBin = filepath.Join(dir, "sim-robot")
	everythingGoBin = filepath.Join(dir, "everything-server")
	for _, b := range []struct{ out, pkg string }{
		{gatewayBin, "../cmd/mcp-gateway"},
		{simRobotBin, "../cmd/sim-robot"},
		{everythingGoBin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", b.pkg, err)
			return 1
		}
	}
	serverEverything, err = filepath.Abs("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := os.Stat(serverEverything); err != nil {
		fmt.Fprintln(os.Stderr, "npm's server-everything is not installed: run `make node-deps` (npm ci in e2e/node) first")
		return 1
	}
	return m.Run()
}

// marker returns a string unique to the test, put on the command line of every upstream the
// test starts, so that leftover processes can be found in the process table.
func marker(t *testing.T) string {
	return fmt.Sprintf("e2e-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// writeConfig writes a config file into a fresh temp dir; {{listen}} is replaced with a free
// loopback address, which is returned.
func writeConfig(t *testing.T, yaml string) (path, addr string) {
	t.Helper()
	dir := t.TempDir()
	addr = freeAddr(t)
	r := strings.NewReplacer(
		"{{listen}}", addr,
		"{{sim}}", simRobotBin,
		"{{everything_go}}", everythingGoBin,
		"{{server_everything}}", serverEverything,
		"{{marker}}", marker(t),
		"{{dir}}", dir,
	)
	path = filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(r.Replace(yaml)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, addr
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// gatewayProc is a running mcp-gateway process.
type gatewayProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

// syncBuffer collects a process's stderr safely while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGateway starts `mcp-gateway serve -c cfg` over HTTP and waits until /readyz is 200.
func startGateway(t *testing.T, cfg, addr string, args ...string) *gatewayProc {
	t.Helper()
	p := startGatewayNoWait(t, cfg, addr, args...)
	p.waitReady(t, 30*time.Second)
	return p
}

func startGatewayNoWait(t *testing.T, cfg, addr string, args ...string) *gatewayProc {
	t.Helper()
	cmd := exec.Command(gatewayBin, append([]string{"serve", "-c", cfg}, args...)...)
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
	return p
}

func (p *gatewayProc) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("gateway exited before it was ready: %v\n%s", p.err, p.stderr.String())
		default:
		}
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gateway not ready within %s\n%s", within, p.stderr.String())
}

// stop sends SIGTERM and waits for the process; it is killed if it does not exit.
func (p *gatewayProc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("gateway did not exit within 15s of SIGTERM")
	}
}

// connectHTTP connects an MCP client to the gateway's streamable HTTP endpoint.
func connectHTTP(t *testing.T, addr string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectHTTPAs(t, addr, "", opts)
}

// connectHTTPAs connects like connectHTTP, sending token as the bearer token unless it is "".
func connectHTTPAs(t *testing.T, addr, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}
	if token != "" {
		transport.HTTPClient = &http.Client{Transport: bearerTransport{token: token}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, opts)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// bearerTransport adds "Authorization: Bearer <token>" to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectStdio starts `mcp-gateway serve -c cfg --stdio` as the client's child process.
func connectStdio(t *testing.T, cfg string, opts *mcp.ClientOptions) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	return connectStdioAt(t, cfg, opts, "")
}

// connectStdioAt is connectStdio with the protocol version the client asks for ("" for the
// SDK's newest).
func connectStdioAt(t *testing.T, cfg string, opts *mcp.ClientOptions, version string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--stdio")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect over stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", stderr.String())
		}
	})
	return cs, stderr
}

// call calls a tool and decodes its envelope from structuredContent.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	env, _ := res.StructuredContent.(map[string]any)
	return res, env
}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		out[tool.Name] = tool
	}
	return out
}

// textOf is the text of a result's first content block.
func textOf(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// processesWith lists the pids of live (not zombie) processes whose command line contains s.
func processesWith(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				pids = append(pids, -pid) // a zombie: negative
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitNoProcesses fails the test if processes with s on their command line remain (or linger as
// zombies) after within.
func waitNoProcesses(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pids := processesWith(s)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind (negative pid = zombie): %v", pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lines returns the lines of s that contain sub.
func lines(s, sub string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			out = append(out, sc.Text())
		}
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func cfgDir(cfg string) string { return filepath.Dir(cfg) }

func httpGet(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// getBody fetches url and fails unless the status is want.
func getBody(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s = %d, want %d: %s", url, resp.StatusCode, want, b.String())
	}
	return b.String()
}

const sigterm = syscall.SIGTERM

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// kill9 kills the gateway with SIGKILL, which it cannot catch, and waits until it is gone.
func (p *gatewayProc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// envInt is the integer in the environment variable name, or def when it is unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: want a whole number", name, s)
	}
	return n
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// pollFor checks cond every 50ms until it holds or within has passed, and reports whether it held.
func pollFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor fails the test unless cond holds within the given time; what names the awaited event.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !pollFor(within, cond) {
		t.Fatalf("waited %s for %s", within, what)
	}
}
