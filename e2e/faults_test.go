package e2e

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCrashMidCallRestartsTheServer(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
  - name: arm
    command: "{{sim}}"
    args: ["-name", "{{marker}}-arm"]
    physical: true
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	for _, tt := range []struct {
		server, kind string
		locks        bool
	}{
		{"robot", "upstream_unavailable", false},
		{"arm", "mcp_execution_status_unknown", true}, // a physical action's outcome is unknown
	} {
		start := time.Now()
		res, env := call(t, cs, tt.server+"__fault", map[string]any{"mode": "crash"})
		if !res.IsError || env["kind"] != tt.kind || env["reason"] == "" {
			t.Fatalf("%s crash: %s", tt.server, mustJSON(res))
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: a crash must be detected at once, took %s", tt.server, d)
		}
		if tt.locks {
			// The physical server is locked out until an operator has looked at the robot.
			res, env = call(t, cs, tt.server+"__get_scene", map[string]any{})
			reason, _ := env["reason"].(string)
			if !res.IsError || env["kind"] != "mcp_execution_status_unknown" ||
				!strings.Contains(reason, "server "+tt.server) || !strings.Contains(reason, "mcp-gateway unlock "+tt.server) {
				t.Fatalf("%s: the call after a crash must be refused by the lockout: %s", tt.server, mustJSON(res))
			}
			cliOK(t, "unlock", tt.server, "--reason", "arm inspected after the crash", "-c", cfg)
		}
		// The next call waits for the restart within its own deadline and succeeds.
		res, env = call(t, cs, tt.server+"__get_scene", map[string]any{})
		if res.IsError || env["success"] != true {
			t.Fatalf("%s: call after restart: %s", tt.server, mustJSON(res))
		}
	}
	if n := len(lines(gw.stderr.String(), "server=arm")); n == 0 {
		t.Fatal("the crashed child's stderr was not logged with its server name")
	}
}

func TestHangPastDeadlineCancelsUpstream(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
    call_timeout_sec: 1
    timeout_argument_margin_sec: 1
  - name: slow
    command: "{{sim}}"
    args: ["-name", "{{marker}}-slow"]
    call_timeout_sec: 1
    timeout_argument_margin_sec: 1
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	start := time.Now()
	res, env := call(t, cs, "robot__fault", map[string]any{"mode": "hang"})
	elapsed := time.Since(start)
	if !res.IsError || env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(env["reason"].(string), "deadline") {
		t.Fatalf("hang: %s", mustJSON(res))
	}
	if elapsed < time.Second || elapsed > 5*time.Second {
		t.Fatalf("deadline of 1s took %s", elapsed)
	}
	// notifications/cancelled reached the robot: it logs the cancellation on stderr, which
	// the gateway captures.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(gw.stderr.String(), "cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("the robot never saw the cancellation; gateway log:\n%s", gw.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The timeout_sec argument extends the deadline: 1.5s + 1s margin > call_timeout_sec. The
	// hang locked robot out, so this runs on slow, a server that moves no hardware.
	start = time.Now()
	res, env = call(t, cs, "slow__wait", map[string]any{"timeout_sec": 1.5})
	if res.IsError || env["success"] != true {
		t.Fatalf("wait 1.5s with a 1s call timeout must use the argument's deadline: %s (after %s)", mustJSON(res), time.Since(start))
	}
}

func TestMalformedEnvelopesAreProtocolViolations(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    tools:
      overrides:
        fault: {evaluated: true}
`)
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	for mode, kind := range map[string]string{
		"malformed":      "tool_protocol_violation",
		"not_json":       "tool_protocol_violation",
		"no_reason":      "tool_protocol_violation",
		"empty":          "tool_protocol_violation",
		"non_text":       "tool_protocol_violation",
		"missing_run_id": "missing_evaluation_run_id",
	} {
		res, env := call(t, cs, "robot__fault", map[string]any{"mode": mode})
		if !res.IsError || env["success"] != false || env["kind"] != kind || strings.TrimSpace(env["reason"].(string)) == "" {
			t.Errorf("%s: want %s, got %s", mode, kind, mustJSON(res))
		}
		if textOf(res) == "" {
			t.Errorf("%s: the failure must also be the JSON text of a content block", mode)
		}
	}
}

func TestNoChildLeftAfterExit(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			cfg, addr := writeConfig(t, threeUpstreams)
			gw := startGateway(t, cfg, addr)
			m := marker(t)
			if n := len(processesWith(m)); n < 3 {
				t.Fatalf("want the 3 upstream processes running, found %d", n)
			}
			_ = gw.cmd.Process.Signal(sig)
			select {
			case <-gw.done:
			case <-time.After(15 * time.Second):
				t.Fatal("gateway did not exit")
			}
			if sig == syscall.SIGTERM && gw.cmd.ProcessState.ExitCode() != 0 {
				t.Errorf("exit code after SIGTERM = %d, want 0", gw.cmd.ProcessState.ExitCode())
			}
			waitNoProcesses(t, m, 10*time.Second)
		})
	}
}

func TestStdioClientDisconnectStopsEverything(t *testing.T) {
	cfg, _ := writeConfig(t, threeUpstreams)
	cs, _ := connectStdio(t, cfg, nil)
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("get_scene: %v", env)
	}
	cs.Close()
	waitNoProcesses(t, marker(t), 15*time.Second)
}

func TestStartupFailureIsReported(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
  - name: gripper
    command: "{{sim}}"
    args: ["-name", "{{marker}}-gripper", "-fail-start"]
    startup_timeout_sec: 2
`)
	// --require-all: start-up fails, naming the server and what it printed.
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--require-all")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("serve --require-all must fail when an upstream cannot start:\n%s", out)
	}
	for _, want := range []string{"gripper", "cannot open serial port"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("report lacks %q:\n%s", want, out)
		}
	}
	waitNoProcesses(t, marker(t), 10*time.Second)

	// Without it the healthy server is served; /readyz says who is missing and why.
	gw := startGatewayNoWait(t, cfg, addr)
	cs := connectHTTPWhenListening(t, gw)
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("healthy server not served: %v", env)
	}
	body := getBody(t, "http://"+addr+"/readyz", 503)
	if !strings.Contains(body, "gripper") || !strings.Contains(body, "cannot open serial port") {
		t.Fatalf("/readyz = %s", body)
	}
	res, env := call(t, cs, "gripper__get_scene", map[string]any{})
	if !res.IsError || env["kind"] != "unknown_tool" {
		// The gripper never listed its tools, so its names are unknown.
		t.Fatalf("gripper tool: %s", mustJSON(res))
	}
}

// connectHTTPWhenListening waits until the gateway answers /healthz, then connects.
func connectHTTPWhenListening(t *testing.T, gw *gatewayProc) *mcp.ClientSession {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := httpGet("http://" + gw.addr + "/healthz"); err == nil && resp == 200 {
			return connectHTTP(t, gw.addr, nil)
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway never listened:\n%s", gw.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClientCancellationReachesTheUpstream: a client that cancels its call makes the gateway
// send notifications/cancelled upstream, for that call only.
func TestClientCancellationReachesTheUpstream(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	start := time.Now()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 30}}); err == nil {
		t.Fatal("a cancelled call returned a result")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancellation took %s", d)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(gw.stderr.String(), "wait cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("the robot never saw the cancellation; gateway log:\n%s", gw.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The session goes on: the next call works.
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("after the cancellation: %v", env)
	}
}
