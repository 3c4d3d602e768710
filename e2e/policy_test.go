package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// policyConfig fronts the simulated robot with rules: a denial on an argument value, approval
// for long waits and for opening the drawer.
const policyConfig = `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-record", "{{dir}}/calls.jsonl"]
policies:
  default: allow
  rules:
    - id: workspace
      effect: deny
      when: 'tool == "robot__navigate_to" && !(args.target in ["home", "table", "counter", "shelf", "drawer"])'
      reason: targets must be places of the cell
    - id: long-wait
      effect: require_approval
      when: 'tool == "robot__wait" && args.timeout_sec > 0.05'
      reason: a person decides on holding the cell
approvals:
  use: memory
  timeout: {{timeout}}
`

// withTimeout sets the approval timeout of policyConfig: long where an operator answers
// (commands are slow on a loaded machine), short where the test waits for expiry.
func withTimeout(timeout string) string {
	return strings.ReplaceAll(policyConfig, "{{timeout}}", timeout)
}

func TestDeniedCallNeverReachesTheRobot(t *testing.T) {
	cfg, addr := writeConfig(t, withTimeout("30s"))
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "window"})
	if !res.IsError || env["kind"] != "policy_denied" || !strings.Contains(env["reason"].(string), "workspace") ||
		!strings.Contains(env["reason"].(string), "places of the cell") {
		t.Fatalf("denied call: %s", mustJSON(res))
	}
	if _, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "table"}); env["success"] != true {
		t.Fatalf("allowed call: %v", env)
	}
	recorded := readFile(t, filepath.Join(cfgDir(cfg), "calls.jsonl"))
	if strings.Contains(recorded, "window") || !strings.Contains(recorded, "table") {
		t.Fatalf("the robot saw: %s", recorded)
	}
	recs := auditJSONL(t, "-c", cfg)
	if findRecord(recs, func(r auditRecord) bool { return r.Kind == "policy_denied" && r.Decision == "deny:workspace" }) == nil {
		t.Fatalf("no audit record of the denial: %+v", recs)
	}
}

var approvalID = regexp.MustCompile(`apr-[0-9a-f]+`)

// pendingApproval waits until `approvals list` shows a request and returns its id.
func pendingApproval(t *testing.T, cfg string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, _ := cliOK(t, "approvals", "list", "-c", cfg)
		if id := approvalID.FindString(out); id != "" {
			return id
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no pending approval appeared")
	return ""
}

func TestApprovalFromAnotherProcess(t *testing.T) {
	cfg, addr := writeConfig(t, withTimeout("60s"))
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	record := filepath.Join(cfgDir(cfg), "calls.jsonl")

	// Approved: the call waits, `approvals approve` in another process releases it once, and a
	// second approve is refused.
	var wg sync.WaitGroup
	var env map[string]any
	wg.Add(1)
	go func() { defer wg.Done(); _, env = call(t, cs, "robot__wait", map[string]any{"timeout_sec": 0.1}) }()
	id := pendingApproval(t, cfg)
	if b, _ := os.ReadFile(record); strings.Contains(string(b), `"wait"`) {
		t.Fatal("a call waiting for approval reached the robot")
	}
	// A mistyped id approves nothing and names the request it most likely meant.
	typo := id[:len(id)-1] + "0"
	if strings.HasSuffix(id, "0") {
		typo = id[:len(id)-1] + "1"
	}
	if _, stderr, code := cli(t, "approvals", "approve", typo, "-c", cfg, "--operator", "alice"); code != 1 || !strings.Contains(stderr, `(did you mean "`+id+`"?)`) {
		t.Errorf("approve %s (a typo of %s): exit %d\n%s", typo, id, code, stderr)
	}
	cliOK(t, "approvals", "approve", id, "-c", cfg, "--operator", "alice", "--reason", "cell is clear")
	wg.Wait()
	if env["success"] != true {
		t.Fatalf("approved call: %v", env)
	}
	_, stderr, code := cli(t, "approvals", "approve", id, "-c", cfg, "--operator", "bob")
	if code == 0 || !strings.Contains(stderr, "already") {
		t.Fatalf("second approve: exit %d %s", code, stderr)
	}
	if n := strings.Count(readFile(t, record), `"wait"`); n != 1 {
		t.Fatalf("the approved call ran %d times", n)
	}

	// Denied.
	wg.Add(1)
	go func() { defer wg.Done(); _, env = call(t, cs, "robot__wait", map[string]any{"timeout_sec": 0.2}) }()
	id = pendingApproval(t, cfg)
	cliOK(t, "approvals", "deny", id, "-c", cfg, "--operator", "alice", "--reason", "someone is at the table")
	wg.Wait()
	if env["kind"] != "approval_denied" || !strings.Contains(env["reason"].(string), "someone is at the table") {
		t.Fatalf("denied call: %v", env)
	}

	if n := strings.Count(readFile(t, record), `"wait"`); n != 1 {
		t.Fatalf("a denied call reached the robot: %d waits", n)
	}

	recs := auditJSONL(t, "-c", cfg, "--type", "operator")
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action+":"+r.Principal)
	}
	if strings.Join(actions, ",") != "approve:alice,deny:alice" {
		t.Fatalf("operator records: %v", actions)
	}
	metrics := getBody(t, "http://"+addr+"/metrics", 200)
	for _, want := range []string{`mcp_gateway_policy_decisions_total{effect="require_approval",mode="enforce",rule="long-wait"} 2`, "mcp_gateway_approvals_pending 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestUnansweredApprovalExpires(t *testing.T) {
	cfg, addr := writeConfig(t, withTimeout("2s"))
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	start := time.Now()
	_, env := call(t, cs, "robot__wait", map[string]any{"timeout_sec": 0.3})
	if env["kind"] != "approval_expired" || time.Since(start) < 2*time.Second {
		t.Fatalf("unanswered call: %v after %s", env, time.Since(start))
	}
	if b, _ := os.ReadFile(filepath.Join(cfgDir(cfg), "calls.jsonl")); strings.Contains(string(b), `"wait"`) {
		t.Fatal("an expired call reached the robot")
	}
	if out, _ := cliOK(t, "approvals", "list", "-c", cfg, "--all"); !strings.Contains(out, "expired") {
		t.Fatalf("approvals list --all: %s", out)
	}
}

func TestPolicyTestCommand(t *testing.T) {
	root, _ := filepath.Abs("..")
	out, _ := cliOK(t, "policy", "test", "-c", filepath.Join(root, "examples/robot.yaml"), filepath.Join(root, "examples/policies/robot_test.yaml"))
	if !strings.Contains(out, " passed, 0 failed") {
		t.Fatalf("policy test: %s", out)
	}
	bad := filepath.Join(t.TempDir(), "bad_test.yaml")
	os.WriteFile(bad, []byte("tests:\n  - name: wrong expectation\n    call: {tool: robot__get_scene, tool_meta: {physical: true, annotations: {readOnlyHint: true}}}\n    expect: {decision: deny}\n"), 0o644)
	out, _, code := cli(t, "policy", "test", "-c", filepath.Join(root, "examples/robot.yaml"), bad)
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "wrong expectation") || !strings.Contains(out, "allow") {
		t.Fatalf("a failing case must be reported with the decision it got (exit %d): %s", code, out)
	}
}
