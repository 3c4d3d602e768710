package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// asRobotEnv makes the test binary run as sim-robot itself, so exit codes,
// signals and stdio are tested on a real process without a separate build.
const asRobotEnv = "SIM_ROBOT_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asRobotEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

func robotCommand(args ...string) (*exec.Cmd, *syncBuffer) {
	cmd := exec.Command(os.Args[0], args...)
	// Under -race the runtime sleeps a second before exiting, which would
	// race the client's one-second wait before it sends SIGTERM.
	cmd.Env = append(os.Environ(), asRobotEnv+"=1", "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	return cmd, stderr
}

// connectProcess starts sim-robot with args and connects a real MCP client
// to it over stdio. The process is stopped when the test ends.
func connectProcess(t *testing.T, args ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd, stderr := robotCommand(args...)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr: %s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

func TestProcessFailStart(t *testing.T) {
	cmd, stderr := robotCommand("-fail-start")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1", err)
	}
	if len(out) != 0 {
		t.Errorf("wrote %q to stdout, which is reserved for the protocol", out)
	}
	if !strings.Contains(stderr.String(), "sim-robot: cannot open serial port /dev/ttyUSB0") {
		t.Errorf("stderr %q lacks the serial port error", stderr)
	}
}

func TestProcessServesAndStopsWhenStdinCloses(t *testing.T) {
	begin := time.Now()
	cs, stderr := connectProcess(t, "-name", "cell-robot", "-start-delay", "200ms")
	if elapsed := time.Since(begin); elapsed < 200*time.Millisecond {
		t.Errorf("initialized after %v despite -start-delay 200ms", elapsed)
	}
	if name := cs.InitializeResult().ServerInfo.Name; name != "cell-robot" {
		t.Errorf("server name %q, want cell-robot", name)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "navigate_to", Arguments: map[string]any{"target": "table"}})
	if err != nil {
		t.Fatal(err)
	}
	if env := res.StructuredContent.(map[string]any); env["success"] != true || env["run_id"] != "run-1" {
		t.Fatalf("navigate_to = %v, want success with run-1", env)
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("exit after stdin closed = %v, want status 0", err)
	}
	if !strings.Contains(stderr.String(), "client closed stdin") {
		t.Errorf("stderr %q does not say why it stopped", stderr)
	}
}

func TestProcessCrashesMidCall(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		okCalls  int    // calls of navigate_to that succeed before the crash
		tool     string // the call that crashes
		toolArgs map[string]any
	}{
		{"-crash-on", []string{"-crash-on", "pick_object"}, 1, "pick_object", map[string]any{"object": "red_cup"}},
		{"-crash-after", []string{"-crash-after", "2"}, 2, "navigate_to", map[string]any{"target": "table"}},
		{"fault crash", nil, 0, "fault", map[string]any{"mode": "crash"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			record := filepath.Join(t.TempDir(), "calls.jsonl")
			cs, stderr := connectProcess(t, append(tt.args, "-record", record)...)
			ctx := context.Background()
			for range tt.okCalls {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "navigate_to", Arguments: map[string]any{"target": "table"}}); err != nil {
					t.Fatalf("call before the crash: %v", err)
				}
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.toolArgs}); err == nil {
				t.Fatal("the crashing call got a reply")
			}
			var exit *exec.ExitError
			if err := cs.Close(); !errors.As(err, &exit) || exit.ExitCode() != crashExitCode {
				t.Fatalf("exit = %v, want status %d", err, crashExitCode)
			}
			if !strings.Contains(stderr.String(), "crashing on purpose") {
				t.Errorf("stderr %q does not explain the crash", stderr)
			}
			recorded, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			if lines := strings.Split(strings.TrimSpace(string(recorded)), "\n"); len(lines) != tt.okCalls+1 ||
				!strings.Contains(lines[len(lines)-1], `"tool":"`+tt.tool+`"`) {
				t.Errorf("record file %q, want %d calls ending with the crashing %s", recorded, tt.okCalls+1, tt.tool)
			}
		})
	}
}

func TestProcessStopsOnSIGTERMDuringHang(t *testing.T) {
	// Raw pipes, so stdin stays open: the process must stop on the signal
	// alone, though a call is hung.
	cmd, stderr := robotCommand()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		// Read stdout to its end before Wait closes it.
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fault","arguments":{"mode":"hang"}}}`,
	} {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the hang starts", func() bool { return strings.Contains(stderr.String(), "hanging until cancelled") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM = %v, want status 0", err)
		}
	case <-time.After(shutdownGrace + 2*time.Second):
		t.Fatal("still running after SIGTERM")
	}
	if !strings.Contains(stderr.String(), "stopped by signal") {
		t.Errorf("stderr %q does not say it stopped on the signal", stderr)
	}
}

// rawPeer speaks JSON-RPC to a sim-robot process line by line, so a test can
// put several messages in one write.
type rawPeer struct {
	t       *testing.T
	stdin   io.Writer
	replies chan map[string]any
}

func startRawPeer(t *testing.T, env []string, args ...string) *rawPeer {
	t.Helper()
	cmd, stderr := robotCommand(args...)
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, stdin: stdin, replies: make(chan map[string]any, 16)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				p.replies <- m
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		<-read // stdout is read to its end before Wait closes it
		if err := cmd.Wait(); err != nil {
			t.Errorf("sim-robot exited with %v; stderr: %s", err, stderr)
		}
	})
	p.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	p.await("init")
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return p
}

// send writes messages, each a line, in a single write.
func (p *rawPeer) send(messages ...string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, strings.Join(messages, "\n")+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// await returns the reply to id, skipping replies to others.
func (p *rawPeer) await(id any) map[string]any {
	p.t.Helper()
	for {
		select {
		case m := <-p.replies:
			if fmt.Sprint(m["id"]) == fmt.Sprint(id) {
				return m
			}
		case <-time.After(10 * time.Second):
			p.t.Fatalf("no reply to %v within 10s", id)
		}
	}
}

func (p *rawPeer) callTool(id, tool string) map[string]any {
	p.t.Helper()
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
	res, _ := p.await(id)["result"].(map[string]any)
	env, _ := res["structuredContent"].(map[string]any)
	return env
}

// The SDK applies a cancellation on a goroutine of its own; the robot waits
// for it before it handles the next message, so a stop right behind a
// cancellation on the wire, even in the same write, always finds the
// cancelled navigate_to braking. One processor makes the race likelier.
func TestProcessStopBehindACancellationFindsItBraking(t *testing.T) {
	p := startRawPeer(t, []string{"GOMAXPROCS=1"}, "-travel-time", "10s", "-brake-time", "5s")
	for i := range 30 {
		nav := fmt.Sprintf("nav-%d", i)
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"navigate_to","arguments":{"target":%q}}}`,
			nav, []string{"table", "counter"}[i%2]))
		for j := 0; ; j++ {
			scene, _ := p.callTool(fmt.Sprintf("scene-%d-%d", i, j), "get_scene")["scene"].(map[string]any)
			if scene["motion"] == motionDriving {
				break
			}
		}
		stop := fmt.Sprintf("stop-%d", i)
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%q}}`, nav),
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"stop","arguments":{}}}`, stop))
		res, _ := p.await(stop)["result"].(map[string]any)
		env, _ := res["structuredContent"].(map[string]any)
		if got := env["interrupted"]; !reflect.DeepEqual(got, []any{map[string]any{"tool": "navigate_to", "state": "braking"}}) {
			t.Fatalf("round %d: the stop behind the cancellation interrupted %v, want the navigate_to braking", i, got)
		}
	}
}
