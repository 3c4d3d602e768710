package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// serverModeEnv makes the test binary run as an MCP stdio server instead of running tests:
// "tools" serves the test tools, "fail" exits 1 at once after printing to stderr, "diff" is the
// differential test's server (fastpath_test.go), "trace" answers with the _meta it was sent
// (trace_test.go).
const serverModeEnv = "UPSTREAM_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverModeEnv); mode != "" {
		os.Exit(runTestServer(mode))
	}
	os.Exit(m.Run())
}

func runTestServer(mode string) int {
	if mode == "diff" {
		return runDiffServer()
	}
	if mode == "trace" {
		return runTraceServer()
	}
	if mode == "fail" {
		fmt.Fprintln(os.Stderr, "cannot open serial port: device busy")
		return 1
	}
	// PageSize 2 makes the client follow pagination.
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-robot", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	addTestTools(srv)
	// 300ms after the first tools/list, a new tool appears and tools/list_changed is sent.
	var once sync.Once
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				once.Do(func() {
					time.AfterFunc(300*time.Millisecond, func() { srv.AddTool(objectTool("late"), echoTool) })
				})
			}
			return next(ctx, method, req)
		}
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
	}
	return 0
}

func addTestTools(srv *mcp.Server) {
	srv.AddTool(objectTool("echo"), echoTool)
	srv.AddTool(objectTool("slow"), slowTool)
	// caps answers with the client capabilities the server sees for the call.
	srv.AddTool(objectTool("caps"), func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(req.ClientCapabilities())
		if err != nil {
			return nil, err
		}
		return textResult(string(b)), nil
	})
	srv.AddTool(objectTool("crash"), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "crashing on purpose")
		os.Exit(3)
		return nil, nil
	})
	srv.AddTool(objectTool("spawn_child"), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// The grandchild holds our stderr, as a real one might.
		cmd := exec.Command("sleep", "300")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return textResult(strconv.Itoa(cmd.Process.Pid)), nil
	})
}

func objectTool(name string) *mcp.Tool {
	return &mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}
}

// echoTool returns its raw arguments as text, after two progress notifications if asked.
func echoTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if token := req.Params.GetProgressToken(); token != nil {
		for i := 1; i <= 2; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 2})
		}
		// Notifications are handled apart from responses; give them time to arrive first.
		time.Sleep(100 * time.Millisecond)
	}
	return textResult(string(req.Params.Arguments)), nil
}

// slowTool sleeps {"ms": n} and returns when it ran; it reports a cancellation on stderr.
func slowTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a struct {
		MS  int    `json:"ms"`
		Tag string `json:"tag"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
		return nil, err
	}
	start := time.Now()
	select {
	case <-time.After(time.Duration(a.MS) * time.Millisecond):
	case <-ctx.Done():
		fmt.Fprintf(os.Stderr, "slow %s: cancelled\n", a.Tag)
		return nil, ctx.Err()
	}
	return textResult(fmt.Sprintf(`{"tag":%q,"start":%d,"end":%d}`, a.Tag, start.UnixNano(), time.Now().UnixNano())), nil
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) != 1 {
		t.Fatalf("result = %+v, want one content block", res)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content = %T, want text", res.Content[0])
	}
	return text.Text
}

// stdioServer is a server running this test binary in the given mode.
func stdioServer(t testing.TB, mode string) config.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.Server{
		Name:                 "robot",
		Command:              exe,
		Env:                  map[string]string{serverModeEnv: mode},
		StartupTimeoutSec:    10,
		CallTimeoutSec:       30,
		RestartBackoffMaxSec: 1,
	}
}

// newManager returns a manager whose Close runs when the test ends.
func newManager(t testing.TB, servers []config.Server, opts Options) *Manager {
	t.Helper()
	m := NewManager(servers, opts)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// startManager starts a manager whose Close runs when the test ends.
func startManager(t testing.TB, servers []config.Server, opts Options) (*Manager, error) {
	t.Helper()
	m := newManager(t, servers, opts)
	return m, m.Start(context.Background())
}

// checkGoroutines fails the test if goroutines started during it are still running at its
// end. Call it first, so that its check runs after every other cleanup.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("%d goroutines still running, %d before the test:\n%s", runtime.NumGoroutine(), before, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) contains(s string) bool { return strings.Contains(b.String(), s) }

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// stateLog records state changes.
type stateLog struct {
	mu     sync.Mutex
	states []State
}

func (l *stateLog) record(_ string, s State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, s)
}

func (l *stateLog) get() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]State(nil), l.states...)
}

func toolNames(tools []*mcp.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

func hasTool(u *Upstream, name string) bool {
	for _, t := range u.Tools() {
		if t.Name == name {
			return true
		}
	}
	return false
}
