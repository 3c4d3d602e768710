package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shutdownConfig has one sim-robot, physical or not, and the gateway's shutdown grace.
const shutdownConfig = `
gateway:
  listen: "{{listen}}"
  shutdown_grace: {{grace}}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: {{physical}}
`

func writeShutdownConfig(t *testing.T, grace string, physical bool) (cfg, addr string) {
	t.Helper()
	p := "false"
	if physical {
		p = "true"
	}
	return writeConfig(t, strings.NewReplacer("{{grace}}", grace, "{{physical}}", p).Replace(shutdownConfig))
}

// callResult is what a client got for a call made in the background.
type callResult struct {
	res *mcp.CallToolResult
	err error
}

// progressOptions are client options that signal when the upstream reports progress, that is
// once a call is running on the robot.
func progressOptions(running chan<- struct{}) *mcp.ClientOptions {
	return &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case running <- struct{}{}:
		default:
		}
	}}
}

// waitInBackground calls robot__wait {timeout_sec} and returns once the robot is running it.
func waitInBackground(t *testing.T, cs *mcp.ClientSession, running <-chan struct{}, seconds float64) <-chan callResult {
	t.Helper()
	done := make(chan callResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": seconds}}
		params.SetProgressToken("shutdown")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, params)
		done <- callResult{res, err}
	}()
	select {
	case <-running:
	case r := <-done:
		t.Fatalf("robot__wait returned before it ran: %v %s", r.err, mustJSON(r.res))
	case <-time.After(20 * time.Second):
		t.Fatal("robot__wait never started")
	}
	return done
}

// exitedWithin waits for the gateway to exit and fails unless it did so within d, with status 0.
func (p *gatewayProc) exitedWithin(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("the gateway did not exit within %s of SIGTERM\n%s", d, p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("the gateway exited with %v, want status 0\n%s", p.err, p.stderr.String())
	}
}

func TestSIGTERMLetsACallInFlightFinish(t *testing.T) {
	cfg, addr := writeShutdownConfig(t, "10s", false)
	gw := startGateway(t, cfg, addr)
	running := make(chan struct{}, 1)
	cs := connectHTTP(t, addr, progressOptions(running))
	done := waitInBackground(t, cs, running, 2)

	signalled := time.Now()
	if err := gw.cmd.Process.Signal(sigterm); err != nil {
		t.Fatal(err)
	}
	// The listener closes at once, while the call goes on.
	for {
		if _, err := httpGet("http://" + addr + "/healthz"); err != nil {
			break
		}
		if time.Since(signalled) > time.Second {
			t.Fatal("the gateway still accepts HTTP connections 1s after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-gw.done:
		t.Fatalf("the gateway exited with a call in flight: %v\n%s", gw.err, gw.stderr.String())
	default:
	}

	r := <-done
	if r.err != nil {
		t.Fatalf("the call in flight failed at shutdown: %v\n%s", r.err, gw.stderr.String())
	}
	if env, _ := r.res.StructuredContent.(map[string]any); r.res.IsError || env["success"] != true {
		t.Fatalf("the call in flight must finish normally: %s", mustJSON(r.res))
	}
	gw.exitedWithin(t, 10*time.Second)
	waitNoProcesses(t, marker(t), 10*time.Second)
	if !strings.Contains(gw.stderr.String(), "calls in flight finished") {
		t.Errorf("the gateway does not log the drain:\n%s", gw.stderr.String())
	}

	// The stopped gateway's state file holds the call's record, in an intact chain.
	recs := auditJSONL(t, "-c", cfg)
	if rec := findRecord(recs, func(r auditRecord) bool { return r.Tool == "robot__wait" }); rec == nil || rec.Outcome != "ok" {
		t.Fatalf("the finished call's audit record: %s", mustJSON(recs))
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); !strings.Contains(out, "audit log intact") {
		t.Errorf("audit verify after shutdown:\n%s", out)
	}
	if st := statusJSON(t, cfg); st.Running || len(st.Lockouts) != 0 {
		t.Errorf("status after shutdown: %+v", st)
	}
}

func TestSIGTERMPastTheGraceCancelsAPhysicalCallAndLocksOut(t *testing.T) {
	cfg, addr := writeShutdownConfig(t, "1s", true)
	gw := startGateway(t, cfg, addr)
	running := make(chan struct{}, 1)
	cs := connectHTTP(t, addr, progressOptions(running))
	done := waitInBackground(t, cs, running, 30)

	if err := gw.cmd.Process.Signal(sigterm); err != nil {
		t.Fatal(err)
	}
	gw.exitedWithin(t, 8*time.Second)
	waitNoProcesses(t, marker(t), 10*time.Second)

	// The client was told before the gateway went away.
	select {
	case r := <-done:
		if r.err != nil {
			t.Errorf("the cancelled physical call got no answer: %v", r.err)
			break
		}
		if env, _ := r.res.StructuredContent.(map[string]any); !r.res.IsError || env["kind"] != "mcp_execution_status_unknown" {
			t.Errorf("the cancelled physical call must end as mcp_execution_status_unknown: %s", mustJSON(r.res))
		}
	case <-time.After(5 * time.Second):
		t.Error("the client never heard back about the cancelled call")
	}
	if !strings.Contains(gw.stderr.String(), "calls cancelled at the end of the shutdown grace") {
		t.Errorf("the gateway does not log the cancellation:\n%s", gw.stderr.String())
	}

	// The lockout is on disk: the next start refuses physical calls until an operator unlocks.
	st := statusJSON(t, cfg)
	if st.Running || len(st.Lockouts) != 1 || st.Lockouts[0].Server != "robot" || st.Lockouts[0].Tool != "robot__wait" {
		t.Fatalf("status after shutdown must show robot's lockout: %+v", st)
	}
	recs := auditJSONL(t, "-c", cfg)
	if rec := findRecord(recs, func(r auditRecord) bool { return r.Type == "lockout" && r.Server == "robot" }); rec == nil ||
		rec.Tool != "robot__wait" || rec.CallID != st.Lockouts[0].CallID {
		t.Errorf("the lockout's audit record: %s", mustJSON(recs))
	}
	if rec := findRecord(recs, func(r auditRecord) bool { return r.Type == "call" && r.Tool == "robot__wait" }); rec == nil ||
		rec.Kind != "mcp_execution_status_unknown" {
		t.Errorf("the cancelled call's audit record: %s", mustJSON(recs))
	}
}

func TestSIGTERMOverStdioLetsACallInFlightFinish(t *testing.T) {
	cfg, _ := writeShutdownConfig(t, "10s", false)
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--stdio")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	running := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, progressOptions(running)).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", stderr.String())
		}
	})
	done := waitInBackground(t, cs, running, 2)

	if err := cmd.Process.Signal(sigterm); err != nil {
		t.Fatal(err)
	}
	// The session stays open for the call in flight; a new call on it is refused, saying why.
	for {
		res, env := call(t, cs, "robot__get_scene", nil)
		if res.IsError {
			if env["kind"] != "upstream_unavailable" || !strings.Contains(env["reason"].(string), "shutting down") {
				t.Fatalf("a call after SIGTERM: %s", mustJSON(res))
			}
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the call in flight returned before new calls were refused: %v %s", r.err, mustJSON(r.res))
		case <-time.After(20 * time.Millisecond):
		}
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the call in flight failed at shutdown: %v", r.err)
	}
	if env, _ := r.res.StructuredContent.(map[string]any); r.res.IsError || env["success"] != true {
		t.Fatalf("the call in flight must finish normally over stdio: %s", mustJSON(r.res))
	}
	// The gateway exits by itself: its process becomes a zombie until the client reaps it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pids := processesWith(cfg); len(pids) == 0 || pids[0] < 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stdio gateway did not exit within 10s of SIGTERM")
		}
	}
	if err := cs.Close(); err != nil {
		t.Errorf("the gateway exited with %v, want status 0", err)
	}
	waitNoProcesses(t, marker(t), 10*time.Second)
	if rec := findRecord(auditJSONL(t, "-c", cfg), func(r auditRecord) bool { return r.Tool == "robot__wait" }); rec == nil || rec.Outcome != "ok" {
		t.Error("the finished call has no audit record")
	}
}
