package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// agentConfig fronts the simulated robot as a physical server whose calls time out after 1s;
// {{llm}} is the agent's llm section. The agent serves its admin API on a free port.
const agentConfig = `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    call_timeout_sec: 1
llm:
  provider: scripted
{{llm}}
experience:
  robot__pick_object: Grasp cups by the handle.
`

// agentEvent is the part of a transcript line the tests read.
type agentEvent struct {
	Type      string
	Step      int
	Text      string
	Tool      string
	Arguments json.RawMessage
	Executed  *bool
	Success   *bool
	Kind      string
	Reason    string
	Exit      *int
	Outcome   string
}

// runAgent runs `mcp-gateway agent` with the scripted llm section and returns its exit code,
// stdout and transcript.
func runAgent(t *testing.T, llm string) (code int, stdout string, events []agentEvent, cfg string) {
	t.Helper()
	cfg, _ = writeConfig(t, strings.ReplaceAll(agentConfig, "{{llm}}", llm))
	transcript := filepath.Join(filepath.Dir(cfg), "transcript.jsonl")
	stdout, stderr, code := cli(t, "agent", "-c", cfg, "--task", "pick up the red cup from the table", "--transcript", transcript)
	return code, stdout + stderr, readTranscript(t, transcript, code, stdout+stderr), cfg
}

// readTranscript reads a JSONL transcript; code and out are the run's, for the failure message.
func readTranscript(t *testing.T, path string, code int, out string) []agentEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no transcript (exit %d): %v\n%s", code, err, out)
	}
	defer f.Close()
	var events []agentEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev agentEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
	}
	return events
}

func agentCalls(t *testing.T, cfg string) []auditRecord {
	t.Helper()
	var calls []auditRecord
	for _, r := range auditJSONL(t, "-c", cfg, "--type", "call") {
		if r.Principal == "agent" {
			calls = append(calls, r)
		}
	}
	return calls
}

func TestAgentCompletesATaskOnTheRobot(t *testing.T) {
	code, out, events, cfg := runAgent(t, `  replies:
    - text: Going to the table.
      tool_calls: [{name: robot__navigate_to, arguments: {target: table}}]
    - tool_calls: [{name: robot__pick_object, arguments: {object: red_cup}}]
    - text: The red cup is in the gripper.
`)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	var tools []string
	for _, ev := range events {
		if ev.Type == "tool" {
			if ev.Success == nil || !*ev.Success {
				t.Errorf("%s failed: %+v\n%s", ev.Tool, ev, out)
			}
			tools = append(tools, ev.Tool)
		}
	}
	if strings.Join(tools, ",") != "robot__navigate_to,robot__pick_object" {
		t.Errorf("tool calls in the transcript = %v", tools)
	}
	last := events[len(events)-1]
	if last.Type != "end" || last.Outcome != "answered" || last.Text != "The red cup is in the gripper." {
		t.Errorf("last event = %+v", last)
	}
	if !strings.Contains(out, "robot__pick_object") || !strings.Contains(out, "answer: The red cup is in the gripper.") {
		t.Errorf("printed transcript lacks the steps:\n%s", out)
	}
	if calls := agentCalls(t, cfg); len(calls) != 2 || calls[1].Tool != "robot__pick_object" || calls[1].Outcome != "ok" {
		t.Errorf("audited agent calls = %+v", calls)
	}
}

func TestAgentHaltsAfterAHangAndCallsNothingMore(t *testing.T) {
	code, out, events, cfg := runAgent(t, `  replies:
    - tool_calls: [{name: robot__fault, arguments: {mode: hang}}]
    - tool_calls: [{name: robot__navigate_to, arguments: {target: table}}]
    - text: done
`)
	if code != 4 {
		t.Fatalf("exit %d, want 4 (halted on an unknown outcome):\n%s", code, out)
	}
	last := events[len(events)-1]
	if last.Type != "end" || last.Outcome != "halted" {
		t.Errorf("last event = %+v", last)
	}
	calls := agentCalls(t, cfg)
	if len(calls) != 1 || calls[0].Tool != "robot__fault" || calls[0].Kind != "mcp_execution_status_unknown" {
		t.Fatalf("audited agent calls = %+v, want only the hung fault", calls)
	}
	if lockouts := auditJSONL(t, "-c", cfg, "--type", "lockout"); len(lockouts) != 1 || lockouts[0].Server != "robot" {
		t.Errorf("lockout records = %+v, want robot's", lockouts)
	}
	// The log holds the lockout and the hung call itself, and no call after them, by anyone.
	for _, r := range auditJSONL(t, "-c", cfg, "--type", "call") {
		if r.CallID != calls[0].CallID {
			t.Errorf("a call was made after the lockout: %+v", r)
		}
	}
}

func TestAgentOneToolPerTurnRunsOnlyTheFirstCall(t *testing.T) {
	code, out, events, cfg := runAgent(t, `  one_tool_per_turn: true
  replies:
    - tool_calls:
        - {name: robot__navigate_to, arguments: {target: table}}
        - {name: robot__pick_object, arguments: {object: red_cup}}
    - text: stopped after one call
`)
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	var refused *agentEvent
	for i, ev := range events {
		if ev.Type == "tool" && ev.Tool == "robot__pick_object" {
			refused = &events[i]
		}
	}
	if refused == nil || refused.Kind != "one_tool_per_turn" || refused.Executed == nil || *refused.Executed {
		t.Errorf("second call of the turn = %+v", refused)
	}
	if calls := agentCalls(t, cfg); len(calls) != 1 || calls[0].Tool != "robot__navigate_to" {
		t.Errorf("audited agent calls = %+v, want only the first", calls)
	}
}

// demoTask is the task `make demo` gives the agent.
const demoTask = "Put the red cup in the drawer."

// demoConfig writes examples/demo.yaml — what `make demo` runs — into a temporary directory
// with its paths rewritten for the test: the simulated robot, the state directory (name) and
// the policy file. llm, when set, replaces the file's llm section (the last one).
func demoConfig(t *testing.T, name, llm string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "examples/demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.NewReplacer(
		"../bin/sim-robot", simRobotBin,
		"../.mcp-gateway-demo", filepath.Join(dir, name),
		"policies/robot.yaml", filepath.Join(root, "examples/policies/robot.yaml"),
	).Replace(string(text))
	if !strings.Contains(cfg, simRobotBin) || !strings.Contains(cfg, filepath.Join(dir, name)) {
		t.Fatal("examples/demo.yaml no longer has the paths this test rewrites")
	}
	if llm != "" {
		i := strings.Index(cfg, "\nllm:\n")
		if i < 0 {
			t.Fatal("examples/demo.yaml has no llm section")
		}
		cfg = cfg[:i+1] + llm
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runDemo runs the agent on the demo task with cfg and extra flags, returning the exit code,
// the output and the transcript.
func runDemo(t *testing.T, cfg string, flags ...string) (int, string, []agentEvent) {
	t.Helper()
	transcript := filepath.Join(filepath.Dir(cfg), filepath.Base(cfg)+".jsonl")
	args := append([]string{"agent", "-c", cfg, "--task", demoTask, "--transcript", transcript}, flags...)
	stdout, stderr, code := cli(t, args...)
	return code, stdout + stderr, readTranscript(t, transcript, code, stdout+stderr)
}

// TestDemoPutsTheRedCupInTheDrawer runs examples/demo.yaml as `make demo` does: the scripted
// model recovers from a robot failure and a policy refusal and finishes the task.
func TestDemoPutsTheRedCupInTheDrawer(t *testing.T) {
	code, out, events := runDemo(t, demoConfig(t, "state", ""))
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	var denied, failed, lastPlace *agentEvent
	for i, ev := range events {
		if ev.Type != "tool" {
			continue
		}
		switch {
		case ev.Outcome == "policy_denied" && denied == nil:
			denied = &events[i]
		case ev.Outcome == "tool_failure" && failed == nil:
			failed = &events[i]
		}
		if ev.Tool == "robot__place_object" {
			lastPlace = &events[i]
		}
	}
	if denied == nil || denied.Tool != "robot__navigate_to" || denied.Executed == nil || !*denied.Executed {
		t.Errorf("policy_denied step = %+v\n%s", denied, out)
	}
	if failed == nil || failed.Tool != "robot__pick_object" || failed.Kind != "" || !strings.Contains(failed.Reason+out, "navigate_to table first") {
		t.Errorf("tool_failure step = %+v\n%s", failed, out)
	}
	if lastPlace == nil || lastPlace.Outcome != "ok" || lastPlace.Success == nil || !*lastPlace.Success ||
		!strings.Contains(string(lastPlace.Arguments), `"target":"drawer"`) {
		t.Errorf("last place_object = %+v, want the red cup placed in the drawer\n%s", lastPlace, out)
	}
	if last := events[len(events)-1]; last.Type != "end" || last.Outcome != "answered" || last.Text != "The red cup is in the drawer." {
		t.Errorf("last event = %+v", last)
	}
	if !strings.Contains(out, "policy_denied") || !strings.Contains(out, "answer: The red cup is in the drawer.") {
		t.Errorf("printed transcript lacks the steps:\n%s", out)
	}
}

// steps is what a replay must reproduce of a transcript: each model step's text, each tool
// call with its arguments and outcome, and how the run ended.
func steps(events []agentEvent) []string {
	var out []string
	for _, ev := range events {
		switch ev.Type {
		case "step":
			out = append(out, fmt.Sprintf("step %d: %q", ev.Step, ev.Text))
		case "tool":
			executed, success := ev.Executed != nil && *ev.Executed, ev.Success != nil && *ev.Success
			out = append(out, fmt.Sprintf("tool %s %s executed=%t success=%t outcome=%s reason=%q", ev.Tool, ev.Arguments, executed, success, ev.Outcome, ev.Reason))
		case "end":
			out = append(out, fmt.Sprintf("end %s %q", ev.Outcome, ev.Text))
		}
	}
	return out
}

// TestAgentReplaysARecordedRun records the demo's scripted run with --record and replays the
// recording with the mock provider: the replayed run makes the same calls with the same
// outcomes and ends the same way.
func TestAgentReplaysARecordedRun(t *testing.T) {
	cfg := demoConfig(t, "recorded", "")
	recording := filepath.Join(filepath.Dir(cfg), "session.jsonl")
	code, out, recorded := runDemo(t, cfg, "--record", recording)
	if code != 0 {
		t.Fatalf("recording: exit %d, want 0:\n%s", code, out)
	}
	replay := demoConfig(t, "replayed", fmt.Sprintf("llm:\n  provider: mock\n  replay_path: %q\n  max_steps: 12\n  one_tool_per_turn: true\n", recording))
	code, out, replayed := runDemo(t, replay)
	if code != 0 {
		t.Fatalf("replay: exit %d, want 0:\n%s", code, out)
	}
	want, got := steps(recorded), steps(replayed)
	if len(want) < 10 {
		t.Fatalf("the recorded run has too few steps to compare: %v", want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replayed steps differ from the recorded run:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// TestAgentInputGuardBlocksTheTask: the demo's input guard withholds a task carrying a
// credential; the run ends with exit 5 naming the guard, before any model request or tool call.
func TestAgentInputGuardBlocksTheTask(t *testing.T) {
	cfg := demoConfig(t, "state", "")
	key := "AKIAIOSFODNN7EXAMPLE"
	stdout, stderr, code := cli(t, "agent", "-c", cfg, "--task", "Log in with "+key+", then put the red cup in the drawer.")
	if code != 5 {
		t.Fatalf("exit %d, want 5 (guard blocked):\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "secrets-in-task") || strings.Contains(stdout+stderr, key) || strings.Contains(stdout, "step 1") {
		t.Errorf("output must name the guard, hide the task and show no model step:\n%s%s", stdout, stderr)
	}
	if calls := agentCalls(t, cfg); len(calls) != 0 {
		t.Errorf("audited agent calls = %+v, want none", calls)
	}
}
