package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCheckConfig writes a config of one server followed by rest into a fresh directory and
// returns its path. The server is on lines 2 and 3, so rest starts on line 4.
func writeCheckConfig(t *testing.T, rest string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cell.yaml")
	yaml := "gateway: {name: cell, state_dir: state, listen: \"\"}\n" +
		"servers:\n  - {name: robot, command: /bin/true}\n" + rest
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// check refuses an llm.judge guard that has no model to ask, at the guard's line, and a model
// alias the llm section does not define, at the setting's line; exit 1.
func TestCheckRefusesAJudgeWithoutItsModel(t *testing.T) {
	const judges = `guardrails:
  output:
    - id: answer-judge
      use: llm.judge
      criteria: The answer asks for nothing.
  input:
    - id: task-judge
      use: llm.judge
      criteria: A task for the robot.
      model: fast
`
	path := writeCheckConfig(t, judges)
	stdout, stderr, code := runCLI(t, "check", "-c", path)
	for _, want := range []string{
		path + ":6: guard answer-judge: llm.judge: the judge needs a model: set llm.provider, or remove the guard",
		path + ":10: guard task-judge: llm.judge: the judge needs a model: set llm.provider, or remove the guard",
		path + `:13: guard task-judge: llm.judge: model "fast" is not an alias of the llm section, which defines none: add it to llm.aliases`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("check lacks\n  %s\nin:\n%s", want, stderr)
		}
	}
	if code != 1 || strings.Contains(stdout, ": ok") {
		t.Errorf("exit %d, want 1:\n%s%s", code, stdout, stderr)
	}

	withAliases := "llm:\n  provider: anthropic\n  aliases: {strong: claude-opus-4-1, cheap: claude-haiku-4-5}\n" + judges
	path = writeCheckConfig(t, withAliases)
	stdout, stderr, code = runCLI(t, "check", "-c", path)
	want := path + `:16: guard task-judge: llm.judge: model "fast" is not an alias of the llm section (llm.aliases: cheap, strong): add it there`
	if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "needs a model") {
		t.Errorf("exit %d, want 1 and\n  %s\nin:\n%s%s", code, want, stdout, stderr)
	}

	path = writeCheckConfig(t, strings.Replace(withAliases, "model: fast", "model: cheap", 1))
	if stdout, stderr, code := runCLI(t, "check", "-c", path); code != 0 {
		t.Errorf("a judge with its model: exit %d\n%s%s", code, stdout, stderr)
	}
}

// check refuses approvals.use callback at its line: the binary has no callback to call, so
// serve and agent would not start.
func TestCheckRefusesTheCallbackChannel(t *testing.T) {
	path := writeCheckConfig(t, "approvals:\n  use: callback\n")
	stdout, stderr, code := runCLI(t, "check", "-c", path)
	want := path + ":5: approvals.use: callback calls a function of a program that embeds the gateway (gateway.Options.ApprovalCallback), " +
		"and none was given; the mcp-gateway binary has no callback: use memory, console or webhook"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, want 1 and\n  %s\nin:\n%s%s", code, want, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, "check", "-c", writeCheckConfig(t, "approvals:\n  use: memory\n")); code != 0 {
		t.Errorf("memory: exit %d\n%s", code, stderr)
	}
}
