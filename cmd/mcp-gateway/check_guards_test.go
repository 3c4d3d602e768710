package main

import (
	"os"
	"strings"
	"testing"
)

// guardMistakes are guards with a problem each, after the config of writeCheckConfig (so they
// start on line 4): a regex.deny pattern that does not compile, a judge with no model to ask
// and a judge whose model is an alias the config does not define.
const guardMistakes = `guardrails:
  output:
    - id: deny
      use: regex.deny
      patterns: ["("]
    - id: answer-judge
      use: llm.judge
      criteria: The answer asks for nothing.
    - id: alias-judge
      use: llm.judge
      criteria: The answer is polite.
      model: fast
`

// TestCheckListsGuardProblemsWithTheRest checks that one pass of check reports the guards'
// problems with every other section's, each once at its line, even when the servers and
// approvals sections have problems too; and that serve still refuses the same guards.
func TestCheckListsGuardProblemsWithTheRest(t *testing.T) {
	broken := strings.Replace(guardMistakes, "guardrails:", "approvals:\n  use: webhook\n  webhook: {url: \"http://127.0.0.1:1/\", timeout: 5m}\nguardrails:", 1)
	path := writeCheckConfig(t, broken)
	// The server of writeCheckConfig, with a timeout that is not a number of seconds.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "command: /bin/true}", "command: /bin/true, call_timeout_sec: -3}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "check", "-c", path)
	want := []string{
		path + ":3: servers[0] (robot): call_timeout_sec: must be a number of seconds above 0, got -3",
		path + ":6: approvals.webhook.timeout: is 5m0s",
		path + ":11: guard deny: regex.deny: patterns[0] does not compile: error parsing regexp: missing closing ) in `(`",
		path + ":12: guard answer-judge: llm.judge: the judge needs a model: set llm.provider, or remove the guard",
		path + ":15: guard alias-judge: llm.judge: the judge needs a model: set llm.provider, or remove the guard",
		path + `:18: guard alias-judge: llm.judge: model "fast" is not an alias of the llm section, which defines none: add it to llm.aliases`,
	}
	got := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != 1 || strings.Contains(stdout, ": ok") || len(got) != len(want) {
		t.Fatalf("exit %d, want 1 and %d problems:\n%s%s", code, len(want), stdout, stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d: %s\nwant:       %s", i, got[i], w)
		}
	}

	// With an llm section of its own problems, a judge's alias is checked against its aliases.
	withLLM := "llm:\n  provider: anthropic\n  max_tokens_param: max_tokens\n  aliases: {strong: claude-opus-4-1}\n" + guardMistakes
	path = writeCheckConfig(t, withLLM)
	_, stderr, code = runCLI(t, "check", "-c", path)
	want = []string{
		path + ":6: llm.max_tokens_param: ",
		path + ":12: guard deny: regex.deny: patterns[0] does not compile",
		path + `:19: guard alias-judge: llm.judge: model "fast" is not an alias of the llm section (llm.aliases: strong): add it there`,
	}
	got = strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != 1 || len(got) != len(want) {
		t.Fatalf("exit %d, want 1 and %d problems:\n%s", code, len(want), stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d: %s\nwant:       %s", i, got[i], w)
		}
	}

	// serve refuses the same guards, as it printed them before.
	path = writeCheckConfig(t, guardMistakes)
	_, stderr, code = runCLI(t, "serve", "-c", path)
	for _, w := range []string{
		path + ":8: guard deny: regex.deny: patterns[0] does not compile",
		path + ":9: guard answer-judge: llm.judge: the judge needs a model",
		path + `:15: guard alias-judge: llm.judge: model "fast" is not an alias`,
	} {
		if code != 1 || !strings.Contains(stderr, w) {
			t.Errorf("serve: exit %d, want 1 and\n  %s\nin:\n%s", code, w, stderr)
		}
	}
}
