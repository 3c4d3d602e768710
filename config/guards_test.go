package config

import (
	"errors"
	"strings"
	"testing"
)

// TestParseWithCheckGuardrails checks Options.CheckGuardrails: its problems are listed with the
// file's, at their lines (the entry's when they give none), whatever the other sections'
// problems; a problem of an entry that is not a mapping, of an entry's setting that did not
// decode (a problem of the entry as a whole, or of the section, does not count), or one that depends on an llm setting that did not decode is left out.
func TestParseWithCheckGuardrails(t *testing.T) {
	calls := 0
	check := Options{CheckGuardrails: func(cfg *Config) []GuardrailProblem {
		calls++
		if len(cfg.Guardrails.Output) != 4 {
			t.Errorf("the hook got %d output guards, want 4", len(cfg.Guardrails.Output))
		}
		return []GuardrailProblem{
			{Stage: "output", Index: 0, Line: 7, Msg: "guard r: regex.deny: patterns[0] does not compile"},
			{Stage: "output", Index: 1, Key: "id", Msg: "guard: needs an id"},
			{Stage: "output", Index: 1, Msg: "guard: regex.deny: patterns: at least one regular expression is needed"},
			{Stage: "output", Index: 2, Key: "use", Msg: "guard: needs use"},
			{Stage: "output", Index: 3, Key: "where.when", Line: 13, Msg: "guard j: where.when: is not CEL"},
			{Stage: "output", Index: 3, LLMKey: "provider", Msg: "guard j: llm.judge: the judge needs a model"},
			{Stage: "output", Index: 3, LLMKey: "aliases", Line: 14, Msg: `guard j: llm.judge: model "fast" is not an alias`},
		}
	}}
	src := `servers:
  - {name: robot, command: robot, queue_size: 0}
guardrails:
  output:
    - id: r
      use: regex.deny
      patterns: ["("]
    - {id: [x], use: regex.deny}
    - not a mapping
    - id: j
      use: llm.judge
      criteria: be nice
      where: {when: "tool ==="}
      model: fast
      criteria: twice
  outptu: []
llm:
  provider: [openai]
`
	_, err := ParseWith("robot.yaml", []byte(src), check)
	if calls != 1 {
		t.Fatalf("the hook was called %d times, want once", calls)
	}
	wantProblems(t, err, []string{
		"robot.yaml:2: servers[0] (robot): queue_size: must be at least 1, got 0",
		"robot.yaml:7: guard r: regex.deny: patterns[0] does not compile",
		"robot.yaml:8: guardrails.output[1].id: expected a string, got a list",
		"robot.yaml:8: guard: regex.deny: patterns: at least one regular expression is needed",
		`robot.yaml:9: guardrails.output[2]: expected a mapping, got "not a mapping"`,
		"robot.yaml:13: guard j: where.when: is not CEL",
		`robot.yaml:14: guard j: llm.judge: model "fast" is not an alias`,
		`robot.yaml:15: guardrails.output[3]: duplicate key "criteria"`,
		`robot.yaml:16: guardrails: unknown key "outptu"`,
		"robot.yaml:18: llm.provider: expected a string, got a list",
	})

	// A where that did not decode leaves where.when empty: its problem is not repeated; nor is
	// any problem of a judge needing the llm section when that section is not a mapping.
	src = strings.Replace(strings.Replace(src, `where: {when: "tool ==="}`, "where: 5", 1), "llm:\n  provider: [openai]\n", "llm: 5\n", 1)
	_, err = ParseWith("robot.yaml", []byte(src), check)
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v", err)
	}
	msg := errs.Error()
	for _, left := range []string{"where.when: is not CEL", "llm.judge"} {
		if strings.Contains(msg, left) {
			t.Errorf("%q is repeated:\n%s", left, msg)
		}
	}
	if !strings.Contains(msg, "robot.yaml:13: guardrails.output[3].where: ") || !strings.Contains(msg, "robot.yaml:17: llm: ") {
		t.Errorf("the loader's own problems are missing:\n%s", msg)
	}

	calls = 0
	for _, src := range []string{"servers: [{name: robot, command: robot}]\n", "servers: [{name: robot, command: robot}]\nguardrails: 5\n"} {
		if _, err := ParseWith("robot.yaml", []byte(src), check); calls != 0 || (err == nil) != !strings.Contains(src, "5") {
			t.Errorf("%q: %d calls, %v", src, calls, err)
		}
	}
}

// wantProblems checks that err is the loader's *Errors and that its problems, in order, start
// with want's lines.
func wantProblems(t *testing.T, err error, want []string) {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v, want the file's problems", err)
	}
	var got []string
	for _, e := range errs.List {
		got = append(got, e.Error())
	}
	if len(got) != len(want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d: %s\nwant:       %s", i, got[i], want[i])
		}
	}
}
