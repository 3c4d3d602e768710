package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lockoutConfig has two physical servers and one that is not; robot's calls time out after 1s.
const lockoutConfig = `
gateway:
  listen: "{{listen}}"
  lockout_scope: {{scope}}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    call_timeout_sec: 1
    tools:
      hidden: [robot_stats]
  - name: arm
    command: "{{sim}}"
    args: ["-name", "{{marker}}-arm"]
    physical: true
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"]
`

func TestTimeoutLocksOutUntilAnOperatorUnlocks(t *testing.T) {
	for _, scope := range []string{"global", "server"} {
		t.Run(scope, func(t *testing.T) {
			cfg, addr := writeConfig(t, strings.ReplaceAll(lockoutConfig, "{{scope}}", scope))
			gw := startGateway(t, cfg, addr)
			cs := connectHTTP(t, addr, nil)
			m := marker(t)

			callID := lockRobot(t, cs, cfg)

			// Every call to the locked server is refused, read-only tools included, with the
			// server, the call that timed out and the way out.
			for _, name := range []string{"robot__navigate_to", "robot__get_scene"} {
				assertLockedOut(t, cs, name, "robot", callID)
			}
			// The other physical server: blocked by a global lockout, free with server scope.
			res, env := call(t, cs, "arm__navigate_to", map[string]any{"target": "table"})
			if scope == "global" {
				if !res.IsError || env["kind"] != "mcp_execution_status_unknown" {
					t.Fatalf("arm with lockout_scope global: %s", mustJSON(res))
				}
				for _, want := range []string{"server robot", callID, "robot__fault", "mcp-gateway unlock robot"} {
					if !strings.Contains(env["reason"].(string), want) {
						t.Errorf("arm's refusal lacks %q: %s", want, env["reason"])
					}
				}
			} else if res.IsError || env["success"] != true {
				t.Fatalf("arm with lockout_scope server must still work: %s", mustJSON(res))
			}
			// A server that moves no hardware keeps working.
			if res, env := call(t, cs, "cam__navigate_to", map[string]any{"target": "table"}); res.IsError || env["success"] != true {
				t.Fatalf("non-physical cam: %s", mustJSON(res))
			}

			// The operator sees it through the running gateway's admin API.
			out := statusCLI(t, statusLocked, "-c", cfg)
			for _, want := range []string{"is running", "robot: locked", "ago by call " + callID + " of tool robot__fault", "mcp-gateway unlock"} {
				if !strings.Contains(out, want) {
					t.Errorf("status lacks %q:\n%s", want, out)
				}
			}

			noMCPCallUnlocks(t, cs, callID)

			// SIGKILL: no chance to clean up. The lockout was on disk before the failure returned.
			if err := gw.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-gw.done
			waitNoProcesses(t, m, 10*time.Second)
			gw = startGateway(t, cfg, addr)
			cs = connectHTTP(t, addr, nil)
			assertLockedOut(t, cs, "robot__navigate_to", "robot", callID)
			if !strings.Contains(gw.stderr.String(), "locked out from before this start") {
				t.Errorf("the restarted gateway does not warn about the lockout it found:\n%s", gw.stderr.String())
			}

			before := livePIDs(t, m+"-robot")
			out, _ = cliOK(t, "unlock", "robot", "--reason", "arm inspected", "--operator", "alice", "-c", cfg)
			if !strings.Contains(out, "restarted server robot") {
				t.Errorf("unlock via the gateway does not say the upstream was restarted:\n%s", out)
			}
			after := livePIDs(t, m+"-robot")
			if len(before) != 1 || len(after) != 1 || before[0] == after[0] {
				t.Errorf("robot's process must be replaced by the unlock: pids before %v, after %v", before, after)
			}
			for _, name := range []string{"robot__navigate_to", "arm__navigate_to"} {
				if res, env := call(t, cs, name, map[string]any{"target": "counter"}); res.IsError || env["success"] != true {
					t.Fatalf("%s after unlock: %s", name, mustJSON(res))
				}
			}
			st := statusJSON(t, cfg)
			if len(st.Lockouts) != 0 || upstream(st, "robot").Restarts < 1 {
				t.Errorf("status after unlock: %+v", st)
			}

			// The audit log holds the lockout and the operator's reset, in that order.
			recs := auditJSONL(t, "-c", cfg)
			lock := findRecord(recs, func(r auditRecord) bool { return r.Type == "lockout" && r.Server == "robot" })
			unlock := findRecord(recs, func(r auditRecord) bool { return r.Type == "operator" && r.Action == "unlock" })
			switch {
			case lock == nil || unlock == nil:
				t.Fatalf("audit lacks the lockout or the unlock record:\n%s", mustJSON(recs))
			case lock.CallID != callID || lock.Kind != "mcp_execution_status_unknown" || lock.Tool != "robot__fault":
				t.Errorf("lockout record: %+v", *lock)
			case unlock.Principal != "alice" || unlock.Reason != "arm inspected" || unlock.Server != "robot" || unlock.CallID != callID:
				t.Errorf("unlock record: %+v", *unlock)
			case unlock.Seq <= lock.Seq:
				t.Errorf("unlock record %d is not after the lockout record %d", unlock.Seq, lock.Seq)
			}
		})
	}
}

// lockRobot makes robot's call hang past its 1s deadline and returns the id of the call that
// locked it out, as status reports it.
func lockRobot(t *testing.T, cs *mcp.ClientSession, cfg string) string {
	t.Helper()
	start := time.Now()
	res, env := call(t, cs, "robot__fault", map[string]any{"mode": "hang"})
	if !res.IsError || env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(env["reason"].(string), "locked out") {
		t.Fatalf("a hang past the deadline must lock out: %s", mustJSON(res))
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("a 1s deadline took %s", d)
	}
	st := statusJSON(t, cfg)
	if len(st.Lockouts) != 1 || st.Lockouts[0].Server != "robot" || st.Lockouts[0].Tool != "robot__fault" || st.Lockouts[0].CallID == "" {
		t.Fatalf("status must show robot's lockout: %+v", st)
	}
	return st.Lockouts[0].CallID
}

// assertLockedOut calls name and fails unless it is refused by server's lockout from callID.
func assertLockedOut(t *testing.T, cs *mcp.ClientSession, name, server, callID string) {
	t.Helper()
	res, env := call(t, cs, name, map[string]any{"target": "table"})
	if !res.IsError || env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("%s must be refused while %s is locked out: %s", name, server, mustJSON(res))
	}
	for _, want := range []string{"server " + server, callID, "mcp-gateway unlock " + server} {
		if !strings.Contains(env["reason"].(string), want) {
			t.Errorf("%s's refusal lacks %q: %s", name, want, env["reason"])
		}
	}
}

// noMCPCallUnlocks tries what a model or client could send to lift a lockout: no listed tool
// offers it, unknown and hidden names are refused, and the lockout stays.
func noMCPCallUnlocks(t *testing.T, cs *mcp.ClientSession, callID string) {
	t.Helper()
	for name := range toolNames(t, cs) {
		for _, word := range []string{"unlock", "lockout", "reset", "admin"} {
			if strings.Contains(name, word) {
				t.Errorf("tool %s is listed: MCP must offer no way to touch a lockout", name)
			}
		}
	}
	for name, kind := range map[string]string{
		"unlock":             "unknown_tool",
		"robot__unlock":      "unknown_tool",
		"admin__reset":       "unknown_tool",
		"robot__robot_stats": "internal_tool_not_model_callable",
	} {
		res, env := call(t, cs, name, map[string]any{"server": "robot", "reason": "trust me"})
		if !res.IsError || env["kind"] != kind {
			t.Errorf("%s: want %s, got %s", name, kind, mustJSON(res))
		}
	}
	assertLockedOut(t, cs, "robot__get_scene", "robot", callID)
}

func TestUnlockOnTheStateFileWhileStopped(t *testing.T) {
	cfg, addr := writeConfig(t, strings.ReplaceAll(lockoutConfig, "{{scope}}", "global"))
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	callID := lockRobot(t, cs, cfg)
	cs.Close()
	gw.stop(t)

	out := statusCLI(t, statusLocked, "-c", cfg)
	if !strings.Contains(out, "not running") || !strings.Contains(out, "robot: locked") || !strings.Contains(out, callID) {
		t.Fatalf("status of a stopped gateway must show the lockout from the file:\n%s", out)
	}
	if _, errOut, code := cli(t, "unlock", "robot", "-c", cfg); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("unlock without --reason: exit %d, want 2 with usage:\n%s", code, errOut)
	}
	if _, errOut, code := cli(t, "unlock", "cam", "--reason", "x", "-c", cfg); code != 1 || !strings.Contains(errOut, "not locked out") {
		t.Fatalf("unlock of a server that is not locked: exit %d, want 1:\n%s", code, errOut)
	}
	out, _ = cliOK(t, "unlock", "robot", "--reason", "gripper checked", "--operator", "bob", "-c", cfg)
	if !strings.Contains(out, "starts fresh on the next gateway start") {
		t.Errorf("unlock on the file:\n%s", out)
	}
	if out := statusCLI(t, statusStopped, "-c", cfg); !strings.Contains(out, "no lockouts") {
		t.Errorf("status after unlock:\n%s", out)
	}
	recs := auditJSONL(t, "-c", cfg)
	unlock := findRecord(recs, func(r auditRecord) bool { return r.Type == "operator" && r.Action == "unlock" })
	if unlock == nil || unlock.Principal != "bob" || unlock.Reason != "gripper checked" || unlock.CallID != callID ||
		unlock.Detail["via"] != "state file" || unlock.Detail["lockout_reason"] == nil {
		t.Fatalf("unlock record written on the file: %s", mustJSON(recs))
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); !strings.Contains(out, "audit log intact") {
		t.Errorf("the operator's record must continue the chain:\n%s", out)
	}

	startGateway(t, cfg, addr)
	if res, env := call(t, connectHTTP(t, addr, nil), "robot__navigate_to", map[string]any{"target": "table"}); res.IsError || env["success"] != true {
		t.Fatalf("after unlocking on the file: %s", mustJSON(res))
	}
}

func TestOperatorCommandsNameTheGatewayHoldingTheFile(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	// The same state_dir (beside the file), but no HTTP.
	noHTTP := filepath.Join(cfgDir(cfg), "stdio.yaml")
	if err := writeFile(noHTTP, strings.Replace(readFile(t, cfg), `listen: "`+addr+`"`, `listen: ""`, 1)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBin, "serve", "-c", noHTTP, "--stdio")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	pid := "pid " + strconv.Itoa(cmd.Process.Pid)

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-c", noHTTP}, []string{pid, "serves no HTTP", "--listen"}},
		{[]string{"audit", "verify", "-c", noHTTP}, []string{pid, "serves no HTTP", "--listen"}},
		{[]string{"unlock", "robot", "--reason", "x", "-c", noHTTP}, []string{pid, "serves no HTTP", "--listen"}},
		// gateway.listen is set, but this gateway does not listen there.
		{[]string{"audit", "-c", cfg}, []string{pid, "did not answer", "--listen"}},
	} {
		_, errOut, code := cli(t, c.args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1:\n%s", c.args, code, errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: message lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
}

func TestAdminAPIRequiresTokenAndReason(t *testing.T) {
	cfg, addr := writeConfig(t, strings.ReplaceAll(lockoutConfig, "{{scope}}", "server"))
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	tokenFile := filepath.Join(cfgDir(cfg), ".mcp-gateway", "admin.token")
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token must exist with mode 0600: %v %v", fi, err)
	}
	token := strings.TrimSpace(readFile(t, tokenFile))
	callID := lockRobot(t, cs, cfg)

	base := "http://" + addr + "/admin"
	for _, c := range []struct {
		name, method, path, auth, body string
		want                           int
	}{
		{"status without a token", "GET", "/status", "", "", 401},
		{"status with a wrong token", "GET", "/status", "Bearer not-the-token", "", 401},
		{"status with the token in another scheme", "GET", "/status", "Basic " + token, "", 401},
		{"status", "GET", "/status", "Bearer " + token, "", 200},
		{"audit without a token", "GET", "/audit", "", "", 401},
		{"reset without a token", "POST", "/lockouts/robot/reset", "", `{"reason": "looked", "operator": "eve"}`, 401},
		{"reset with a wrong token", "POST", "/lockouts/robot/reset", "Bearer " + token + "x", `{"reason": "looked", "operator": "eve"}`, 401},
		{"reset without a reason", "POST", "/lockouts/robot/reset", "Bearer " + token, `{"operator": "eve"}`, 400},
		{"reset with a blank reason", "POST", "/lockouts/robot/reset", "Bearer " + token, `{"reason": "  ", "operator": "eve"}`, 400},
		{"reset with a body that is not JSON", "POST", "/lockouts/robot/reset", "Bearer " + token, `reason=looked`, 400},
		{"reset of a server that is not locked", "POST", "/lockouts/cam/reset", "Bearer " + token, `{"reason": "looked"}`, 404},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: HTTP %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	// None of the refused resets cleared anything.
	assertLockedOut(t, cs, "robot__get_scene", "robot", callID)

	// The CLI with a wrong token says whose token was refused, and never prints a token.
	_, errOut, code := cli(t, "status", "-c", cfg, "--token", "wrong-token-value")
	if code != 1 || !strings.Contains(errOut, "refused the admin token from --token") || strings.Contains(errOut, "wrong-token-value") {
		t.Errorf("status with a wrong token: exit %d:\n%s", code, errOut)
	}
	out, errOut, code := cli(t, "status", "--json", "-c", cfg)
	if code != statusLocked || strings.Contains(out+errOut, token) {
		t.Errorf("status --json: exit %d, or the token was printed:\n%s%s", code, out, errOut)
	}
}

// cli runs mcp-gateway with args and returns its output and exit code. The admin token comes
// only from what the test sets up, never from the developer's environment.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBin, args...)
	cmd.Env = append(os.Environ(), "MCP_GATEWAY_ADMIN_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("mcp-gateway %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// cliOK runs mcp-gateway with args and fails the test unless it exits 0.
func cliOK(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, code := cli(t, args...)
	if code != 0 {
		t.Fatalf("mcp-gateway %v: exit %d\n%s%s", args, code, stdout, stderr)
	}
	return stdout, stderr
}

// The exit codes of `mcp-gateway status` besides 0 (docs/cli.md).
const (
	statusLocked  = 3 // a lockout or a halt is in force
	statusDown    = 4 // a server is not ready
	statusStopped = 5 // no gateway is running
)

// statusCLI runs `mcp-gateway status args...` and fails the test unless it exits with code.
func statusCLI(t *testing.T, code int, args ...string) string {
	t.Helper()
	out, errOut, got := cli(t, append([]string{"status"}, args...)...)
	if got != code {
		t.Fatalf("mcp-gateway status %v: exit %d, want %d\n%s%s", args, got, code, out, errOut)
	}
	return out
}

// gatewayStatus is what `mcp-gateway status -o json` prints.
type gatewayStatus struct {
	Running   bool             `json:"running"`
	Upstreams []upstreamStatus `json:"upstreams"`
	Lockouts  []lockoutStatus  `json:"lockouts"`
}

type upstreamStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
}

// lockoutStatus is one lockout in force as status reports it.
type lockoutStatus struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	Reason string `json:"reason"`
}

// statusJSON is `mcp-gateway status -o json`, whatever its exit code says of the status.
func statusJSON(t *testing.T, cfg string) gatewayStatus {
	t.Helper()
	out, errOut, code := cli(t, "status", "-o", "json", "-c", cfg)
	if code != 0 && code != statusLocked && code != statusDown && code != statusStopped {
		t.Fatalf("status -o json: exit %d\n%s", code, errOut)
	}
	var st gatewayStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

func upstream(st gatewayStatus, name string) upstreamStatus {
	for _, u := range st.Upstreams {
		if u.Name == name {
			return u
		}
	}
	return upstreamStatus{}
}

// auditRecord is one line of `mcp-gateway audit -o jsonl`.
type auditRecord struct {
	Seq        uint64          `json:"seq"`
	Type       string          `json:"type"`
	Principal  string          `json:"principal"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	CallID     string          `json:"call_id"`
	Decision   string          `json:"decision"`
	Kind       string          `json:"kind"`
	Outcome    string          `json:"outcome"`
	Reason     string          `json:"reason"`
	RunID      string          `json:"run_id"`
	Action     string          `json:"action"`
	ArgsDigest string          `json:"args_digest"`
	Args       json.RawMessage `json:"args"`
	Detail     map[string]any  `json:"detail"`
	Prev       string          `json:"prev"`
	Hash       string          `json:"hash"`
}

// auditJSONL reads the audit log with `mcp-gateway audit -o jsonl args...`.
func auditJSONL(t *testing.T, args ...string) []auditRecord {
	t.Helper()
	out, _ := cliOK(t, append([]string{"audit", "-o", "jsonl"}, args...)...)
	var recs []auditRecord
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r auditRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit -o jsonl: %v\n%s", err, out)
		}
		recs = append(recs, r)
	}
	return recs
}

func findRecord(recs []auditRecord, match func(auditRecord) bool) *auditRecord {
	i := slices.IndexFunc(recs, match)
	if i < 0 {
		return nil
	}
	return &recs[i]
}

// livePIDs waits until exactly one live process has s on its command line (a restarted one may
// briefly overlap its predecessor) and returns the pids found last.
func livePIDs(t *testing.T, s string) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var live []int
		for _, pid := range processesWith(s) {
			if pid > 0 {
				live = append(live, pid)
			}
		}
		if len(live) == 1 || time.Now().After(deadline) {
			return live
		}
		time.Sleep(50 * time.Millisecond)
	}
}
