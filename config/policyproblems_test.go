package config

import (
	"testing"
)

// TestParseWithCheckPolicies checks Options.CheckPolicies: its problems are listed with the
// file's, at their lines and columns (the rule's line when they give none), whatever the other
// sections' problems, a policy file's after the config's at that file's own line; a problem of
// an inline rule that is not a mapping, of a rule's setting that did not decode, of a
// policies.files entry the loader refused or of a section setting it refused is left out.
func TestParseWithCheckPolicies(t *testing.T) {
	calls := 0
	check := Options{CheckPolicies: func(cfg *Config) []PolicyProblem {
		calls++
		if len(cfg.Policies.Rules) != 4 {
			t.Errorf("the hook got %d rules, want 4", len(cfg.Policies.Rules))
		}
		return []PolicyProblem{
			{Rule: -1, FileIndex: -1, Key: "default", Msg: "policies.default: the default decision must be allow or deny"},
			{Rule: -1, FileIndex: 0, File: "", Msg: "cannot read the file"},
			{Rule: -1, FileIndex: 1, File: "rules.yaml", Line: 3, Column: 11, Msg: "rule f: Syntax error"},
			{Rule: -1, FileIndex: 1, File: "rules.yaml", Line: 1, Msg: "field effectt not found"},
			{Rule: 0, Key: "when", FileIndex: -1, Line: 10, Column: 13, Msg: "rule a: Syntax error"},
			{Rule: 1, Key: "id", FileIndex: -1, Msg: "the rule has no id"},
			{Rule: 1, Key: "when", FileIndex: -1, Msg: "when is empty"},
			{Rule: 2, Key: "id", FileIndex: -1, Msg: "the rule has no id"},
			{Rule: 3, Key: "id", FileIndex: -1, Msg: "rule a: duplicate rule id"},
		}
	}}
	src := `servers:
  - {name: robot, command: robot, queue_size: 0}
policies:
  default: maybe
  files: ["", rules.yaml]
  rules:
    - id: a
      effect: deny
      when: >-
        tool ==
    - {id: [x], effect: deny}
    - not a mapping
    - id: a
      effect: deny
      when: "true"
`
	_, err := ParseWith("robot.yaml", []byte(src), check)
	if calls != 1 {
		t.Fatalf("the hook was called %d times, want once", calls)
	}
	wantProblems(t, err, []string{
		"robot.yaml:2: servers[0] (robot): queue_size: must be at least 1, got 0",
		`robot.yaml:4: policies.default: "maybe" is not valid`,
		"robot.yaml:5: policies.files[0]: is empty; name a policy file",
		"robot.yaml:10:13: rule a: Syntax error",
		"robot.yaml:11: policies.rules[1].id: expected a string, got a list",
		"robot.yaml:11: when is empty",
		`robot.yaml:12: policies.rules[2]: expected a mapping, got "not a mapping"`,
		"robot.yaml:13: rule a: duplicate rule id",
		"rules.yaml:1: field effectt not found",
		"rules.yaml:3:11: rule f: Syntax error",
	})

	// The hook is called when the file has no policies section (its defaults are compiled),
	// not when the section is not a mapping, which the loader reports.
	calls = 0
	check.CheckPolicies = func(*Config) []PolicyProblem { calls++; return nil }
	if _, err := ParseWith("robot.yaml", []byte("servers: [{name: robot, command: robot}]\n"), check); err != nil || calls != 1 {
		t.Errorf("no policies section: %d calls, %v", calls, err)
	}
	calls = 0
	if _, err := ParseWith("robot.yaml", []byte("servers: [{name: robot, command: robot}]\npolicies: 5\n"), check); err == nil || calls != 0 {
		t.Errorf("a policies section that is not a mapping: %d calls, %v", calls, err)
	}
}
