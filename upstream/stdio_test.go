package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestStdioDiscoveryAndCall(t *testing.T) {
	checkGoroutines(t)
	var logs logBuffer
	var changes atomic.Int32
	var firstList atomic.Pointer[[]string]
	var m *Manager
	m = newManager(t, []config.Server{stdioServer(t, "tools")}, Options{
		Logger: logs.logger(),
		OnToolsChanged: func(server string) {
			if server != "robot" {
				t.Errorf("OnToolsChanged(%q)", server)
			}
			if changes.Add(1) == 1 {
				names := toolNames(m.Get("robot").Tools())
				firstList.Store(&names)
			}
		},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")
	if u.State() != Ready || u.LastError() != "" {
		t.Fatalf("state %s, last error %q; want ready", u.State(), u.LastError())
	}
	// Five tools over pages of two, without the one added later.
	if got, want := *firstList.Load(), []string{"caps", "crash", "echo", "slow", "spawn_child"}; !reflect.DeepEqual(sorted(got), want) {
		t.Errorf("first discovery = %v, want %v", got, want)
	}

	res, err := u.Call(context.Background(), "echo", json.RawMessage(`{"msg": "hi"}`), nil)
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	// The arguments arrive as the object, not as a string holding it.
	var echoed map[string]string
	if err := json.Unmarshal([]byte(resultText(t, res)), &echoed); err != nil || echoed["msg"] != "hi" {
		t.Errorf("echo returned %q (%v), want the object {\"msg\":\"hi\"}", resultText(t, res), err)
	}

	var progress []float64
	var tokens []string
	_, err = u.Call(context.Background(), "echo", json.RawMessage(`{}`), func(p *mcp.ProgressNotificationParams) {
		progress = append(progress, p.Progress)
		tokens = append(tokens, p.ProgressToken.(string))
	})
	if err != nil {
		t.Fatalf("echo with progress: %v", err)
	}
	if !reflect.DeepEqual(progress, []float64{1, 2}) || !strings.HasPrefix(tokens[0], "gw-robot-") {
		t.Errorf("progress %v with tokens %v, want [1 2] with gw-robot-… tokens", progress, tokens)
	}

	eventually(t, 5*time.Second, "tools/list_changed re-discovers the late tool", func() bool {
		return hasTool(u, "late") && changes.Load() >= 2
	})
	if !logs.contains("upstream ready") || !logs.contains("server=robot") {
		t.Errorf("the supervisor did not log with the server's name:\n%s", logs.String())
	}
}

func TestStdioCrashMidCallRestarts(t *testing.T) {
	checkGoroutines(t)
	var logs logBuffer
	var states stateLog
	var m *Manager
	var backoffErr atomic.Value
	m = newManager(t, []config.Server{stdioServer(t, "tools")}, Options{
		Logger: logs.logger(),
		OnStateChange: func(server string, s State) {
			states.record(server, s)
			if s == Backoff {
				backoffErr.Store(m.Get(server).LastError())
			}
		},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")

	begin := time.Now()
	_, err := u.Call(context.Background(), "crash", nil, nil)
	var ce *CallError
	if !errors.As(err, &ce) || !ce.Crashed || ce.Server != "robot" || ce.Tool != "crash" {
		t.Fatalf("crash call error = %v, want a crashed CallError", err)
	}
	if elapsed := time.Since(begin); elapsed > 2*time.Second {
		t.Errorf("the crashed call took %s to fail", elapsed)
	}

	eventually(t, 10*time.Second, "the server is restarted", func() bool {
		return u.State() == Ready && u.Restarts() == 1
	})
	got := states.get()
	if want := []State{Starting, Ready, Backoff, Starting, Ready}; !reflect.DeepEqual(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	if msg, _ := backoffErr.Load().(string); !strings.Contains(msg, `server "robot"`) || !strings.Contains(msg, "exit status 3") {
		t.Errorf("LastError in backoff = %q, want the server and its exit status", msg)
	}
	if !logs.contains("crashing on purpose") || !logs.contains("stream=stderr") {
		t.Errorf("the child's stderr was not logged:\n%s", logs.String())
	}
	if _, err := u.Call(context.Background(), "echo", json.RawMessage(`{"after":"restart"}`), nil); err != nil {
		t.Errorf("echo after restart: %v", err)
	}
}

func TestStdioDeadlineCancelsUpstream(t *testing.T) {
	checkGoroutines(t)
	var logs logBuffer
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{Logger: logs.logger()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = u.Call(ctx, "slow", json.RawMessage(`{"ms": 20000, "tag": "t1"}`), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	var ce *CallError
	if !errors.As(err, &ce) || ce.Crashed {
		t.Errorf("err = %#v, want a CallError that is not crashed", err)
	}
	eventually(t, 5*time.Second, "the child logs the cancellation it received", func() bool {
		return logs.contains("slow t1: cancelled")
	})
	if u.State() != Ready || u.Restarts() != 0 {
		t.Errorf("state %s after %d restarts, want ready without restarts", u.State(), u.Restarts())
	}
}

func TestStdioFailingStartIsReportedAndRetried(t *testing.T) {
	checkGoroutines(t)
	cfg := stdioServer(t, "fail")
	cfg.StartupTimeoutSec = 3
	m, err := startManager(t, []config.Server{cfg}, Options{})
	var se *StartError
	if !errors.As(err, &se) || len(se.NotReady) != 1 {
		t.Fatalf("Start = %v, want a StartError for one server", err)
	}
	nr := se.NotReady[0]
	for _, want := range []string{`server "robot"`, "exit status 1", "cannot open serial port: device busy"} {
		if !strings.Contains(nr.Reason, want) || !strings.Contains(err.Error(), want) {
			t.Errorf("StartError %q does not say %q", err, want)
		}
	}
	if nr.Server != "robot" || !slices.Contains(nr.Stderr, "cannot open serial port: device busy") {
		t.Errorf("NotReady = %+v", nr)
	}

	u := m.Get("robot")
	restarts := u.Restarts()
	eventually(t, 5*time.Second, "the server keeps retrying", func() bool { return u.Restarts() > restarts })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = u.Call(ctx, "echo", nil, nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "cannot open serial port") {
		t.Errorf("call on a failing server = %v, want ErrUnavailable with the reason", err)
	}
}

func TestStdioCallWaitsForRestart(t *testing.T) {
	checkGoroutines(t)
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")
	if _, err := u.Call(context.Background(), "crash", nil, nil); err == nil {
		t.Fatal("crash returned no error")
	}
	// Arrives while the server is down: waits instead of failing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := u.Call(ctx, "echo", json.RawMessage(`{}`), nil); err != nil {
		t.Errorf("call during restart: %v", err)
	}
}

func TestStdioOperatorRestart(t *testing.T) {
	checkGoroutines(t)
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")
	before := childPid(t, u)
	if err := u.Restart(context.Background()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if u.State() != Ready || u.Restarts() != 1 {
		t.Errorf("state %s after %d restarts, want ready after 1", u.State(), u.Restarts())
	}
	if after := childPid(t, u); after == before {
		t.Errorf("the child was not replaced (pid %d)", after)
	}
	if err := syscall.Kill(before, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("old child %d: kill(0) = %v, want ESRCH (gone and reaped)", before, err)
	}
	if _, err := u.Call(context.Background(), "echo", nil, nil); err != nil {
		t.Errorf("echo after restart: %v", err)
	}
}

func TestStdioCloseKillsProcessGroup(t *testing.T) {
	checkGoroutines(t)
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("robot")
	res, err := u.Call(context.Background(), "spawn_child", nil, nil)
	if err != nil {
		t.Fatalf("spawn_child: %v", err)
	}
	grandchild, err := strconv.Atoi(resultText(t, res))
	if err != nil {
		t.Fatal(err)
	}
	child := childPid(t, u)

	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d: kill(0) = %v, want ESRCH (gone and reaped, no zombie)", child, err)
	}
	// The grandchild was reparented; whoever adopted it reaps it (or leaves a zombie, which is
	// dead all the same).
	eventually(t, 5*time.Second, "the grandchild is killed", func() bool { return !alive(grandchild) })
	if u.State() != Stopped {
		t.Errorf("state %s after Close, want stopped", u.State())
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := u.Call(context.Background(), "echo", nil, nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call after Close = %v, want ErrUnavailable", err)
	}
	if err := u.Restart(context.Background()); err == nil {
		t.Error("Restart after Close succeeded")
	}
}

func childPid(t *testing.T, u *Upstream) int {
	t.Helper()
	s := u.ready.Load()
	if s == nil || s.proc == nil {
		t.Fatal("no running child")
	}
	return s.proc.cmd.Process.Pid
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
