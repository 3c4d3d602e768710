package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withServerProblem gives the server of writeCheckConfig (line 3) a call timeout that is not a
// number of seconds.
func withServerProblem(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), "command: /bin/true}", "command: /bin/true, call_timeout_sec: -3}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantProblems checks that stderr holds exactly the problems want (each a prefix of its line),
// in that order, and that the run exited 1 without "ok".
func wantProblems(t *testing.T, what, stdout, stderr string, code int, want []string) {
	t.Helper()
	got := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if code != 1 || strings.Contains(stdout, ": ok") || len(got) != len(want) {
		t.Fatalf("%s: exit %d, want 1 and %d problems:\n%s%s", what, code, len(want), stdout, stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("%s: problem %d: %s\nwant:       %s", what, i, got[i], w)
		}
	}
}

// TestCheckListsPolicyProblemsWithTheRest checks that one pass of check reports an inline rule
// that does not compile with the servers' and the guards' problems, each once at its line
// (the rule's at its column too); that a policy file's problem is reported at that file's own
// line next to a servers problem; that agent reports them as check does; and that serve still
// refuses the rule.
func TestCheckListsPolicyProblemsWithTheRest(t *testing.T) {
	const rule = `policies:
  rules:
    - id: slow
      effect: deny
      when: args.speed >
`
	path := writeCheckConfig(t, rule+guardMistakes)
	withServerProblem(t, path)
	stdout, stderr, code := runCLI(t, "check", "-c", path)
	want := []string{
		path + ":3: servers[0] (robot): call_timeout_sec: must be a number of seconds above 0, got -3",
		path + ":8:25: rule slow: Syntax error: mismatched input '<EOF>'",
		path + ":13: guard deny: regex.deny: patterns[0] does not compile",
		path + ":14: guard answer-judge: llm.judge: the judge needs a model",
		path + ":17: guard alias-judge: llm.judge: the judge needs a model",
		path + `:20: guard alias-judge: llm.judge: model "fast" is not an alias of the llm section, which defines none`,
	}
	wantProblems(t, "check", stdout, stderr, code, want)
	if strings.Count(stderr, "rule slow") != 1 {
		t.Errorf("the rule's problem is not reported once:\n%s", stderr)
	}
	// agent loads the config as check does: the same problems, in one pass.
	_, agentErr, code := runCLI(t, "agent", "--task", "go", "-c", path)
	for _, w := range want {
		if code != 1 || !strings.Contains(agentErr, w) {
			t.Errorf("agent: exit %d, want 1 and\n  %s\nin:\n%s", code, w, agentErr)
		}
	}

	// A policy file's problem, at that file's line, after the config's servers problem.
	path = writeCheckConfig(t, "policies:\n  files: [rules.yaml]\n")
	withServerProblem(t, path)
	rules := filepath.Join(filepath.Dir(path), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - id: fast\n    effect: deny\n    when: args.speed > 1.0\n    mode: loud\n  - id: x\n    efect: deny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "check", "-c", path)
	wantProblems(t, "check with a policy file", stdout, stderr, code, []string{
		path + ":3: servers[0] (robot): call_timeout_sec: must be a number of seconds above 0, got -3",
		rules + ":7: field efect not found",
	})
	// A rule of the file that loads but does not compile, at its line and column there.
	if err := os.WriteFile(rules, []byte("rules:\n  - id: fast\n    effect: deny\n    when: args.speed > \"x\" + 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "check", "-c", path)
	wantProblems(t, "check with a policy file's rule", stdout, stderr, code, []string{
		path + ":3: servers[0] (robot): call_timeout_sec: must be a number of seconds above 0, got -3",
		rules + ":4:28: rule fast: found no matching overload for '_+_'",
	})

	// serve refuses the same inline rule, as it printed it before.
	path = writeCheckConfig(t, rule)
	_, stderr, code = runCLI(t, "serve", "-c", path)
	if w := "policies: " + path + ":8:25: rule slow: Syntax error"; code != 1 || !strings.Contains(stderr, w) {
		t.Errorf("serve: exit %d, want 1 and\n  %s\nin:\n%s", code, w, stderr)
	}
}
