package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// judgeConfig is the agent's config with an llm.judge output guard. The scripted model answers
// the judge's requests by its rules (they carry the guard's id) and the loop's by its replies:
// it drives to the table, then answers {{answer}}. The judge fails an answer that gives the
// vault code away, and passes any other.
const judgeConfig = `
gateway: {listen: ""}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    call_timeout_sec: 1
llm:
  provider: scripted
  rules:
    - contains: 'llm.judge guard "answer-judge"'
      matches: 'VAULT-\d+'
      reply: {output: {pass: false, reason: "JUDGE-EXPLANATION-Z9: it gives the vault code away"}, usage: {input_tokens: 40, output_tokens: 9}}
    - contains: 'llm.judge guard "answer-judge"'
      reply: {output: {pass: true, reason: "JUDGE-EXPLANATION-Z9: nothing secret"}, usage: {input_tokens: 40, output_tokens: 9}}
  replies:
    - tool_calls: [{name: robot__navigate_to, arguments: {target: table}}]
    - text: "{{answer}}"
guardrails:
  output:
    - id: answer-judge
      use: llm.judge
      criteria: The answer reports what the robot did and gives away no codes.
`

// runJudged runs the agent on judgeConfig with the model's final answer; it returns the exit
// code, what it printed, its transcript and the config's path.
func runJudged(t *testing.T, answer string) (code int, out, transcript, cfg string) {
	t.Helper()
	cfg, _ = writeConfig(t, strings.ReplaceAll(judgeConfig, "{{answer}}", answer))
	path := filepath.Join(filepath.Dir(cfg), "transcript.jsonl")
	stdout, stderr, code := cli(t, "agent", "-c", cfg, "--task", "go to the table and report", "--transcript", path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no transcript (exit %d): %v\n%s%s", code, err, stdout, stderr)
	}
	return code, stdout + stderr, string(b), cfg
}

// judgeEvent is the transcript's judge event.
type judgeEvent struct {
	Type, Guard, Verdict string
	Usage                *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
}

func judgeEventsOf(t *testing.T, transcript string) []judgeEvent {
	t.Helper()
	var evs []judgeEvent
	for _, line := range strings.Split(strings.TrimSpace(transcript), "\n") {
		var ev judgeEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", line, err)
		}
		if ev.Type == "judge" {
			evs = append(evs, ev)
		}
	}
	return evs
}

// An llm.judge guard whose scripted model fails the final answer withholds it: the run ends
// guard_blocked (exit 5) after the robot moved, the transcript has the judge's verdict and its
// usage, and neither the answer nor the judge's explanation is in what the agent printed, its
// transcript or the audit log. The same run with an answer the judge passes ends answered.
func TestAgentJudgeWithholdsAnAnswer(t *testing.T) {
	const secret = "The vault code is VAULT-31337."
	code, out, transcript, cfg := runJudged(t, secret)
	if code != 5 {
		t.Fatalf("exit %d, want 5 (guard_blocked):\n%s", code, out)
	}
	if !strings.Contains(out, "answer-judge") || !strings.Contains(out, "stopped (guard_blocked)") {
		t.Errorf("the printed transcript does not say which guard withheld the answer:\n%s", out)
	}
	evs := judgeEventsOf(t, transcript)
	if len(evs) != 1 || evs[0].Guard != "answer-judge" || evs[0].Verdict != "fail" || evs[0].Usage == nil || evs[0].Usage.InputTokens != 40 {
		t.Fatalf("judge events %+v in\n%s", evs, transcript)
	}
	if !strings.Contains(transcript, `"outcome":"guard_blocked"`) {
		t.Errorf("transcript does not end guard_blocked:\n%s", transcript)
	}
	calls := agentCalls(t, cfg)
	if len(calls) != 1 || calls[0].Tool != "robot__navigate_to" || calls[0].Outcome != "ok" {
		t.Errorf("audited agent calls = %+v", calls)
	}
	audit, _ := cliOK(t, "audit", "-o", "jsonl", "-c", cfg)
	for _, leak := range []string{"VAULT-31337", "JUDGE-EXPLANATION-Z9", "gives the vault code away"} {
		for where, text := range map[string]string{"stdout and stderr": out, "transcript": transcript, "audit log": audit} {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q:\n%s", where, leak, text)
			}
		}
	}

	code, out, transcript, _ = runJudged(t, "The robot is at the table.")
	if code != 0 || !strings.Contains(out, "answer: The robot is at the table.") {
		t.Fatalf("exit %d, want 0 (answered):\n%s", code, out)
	}
	if evs := judgeEventsOf(t, transcript); len(evs) != 1 || evs[0].Verdict != "pass" {
		t.Errorf("judge events %+v", evs)
	}
	if strings.Contains(out+transcript, "JUDGE-EXPLANATION-Z9") {
		t.Errorf("the judge's explanation was written out:\n%s\n%s", out, transcript)
	}
}
