package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// agentConfig fronts the simulated robot as a physical server whose calls time out after 1s;
// {{llm}} is the agent's llm section.
const agentConfig = `
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
	Type     string
	Step     int
	Text     string
	Tool     string
	Executed *bool
	Success  *bool
	Kind     string
	Exit     *int
	Outcome  string
}

// runAgent runs `mcp-gateway agent` with the scripted llm section and returns its exit code,
// stdout and transcript.
func runAgent(t *testing.T, llm string) (code int, stdout string, events []agentEvent, cfg string) {
	t.Helper()
	cfg, _ = writeConfig(t, strings.ReplaceAll(agentConfig, "{{llm}}", llm))
	transcript := filepath.Join(filepath.Dir(cfg), "transcript.jsonl")
	stdout, stderr, code := cli(t, "agent", "-c", cfg, "--task", "pick up the red cup from the table", "--transcript", transcript)
	f, err := os.Open(transcript)
	if err != nil {
		t.Fatalf("no transcript (exit %d): %v\n%s%s", code, err, stdout, stderr)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev agentEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		events = append(events, ev)
	}
	return code, stdout + stderr, events, cfg
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
