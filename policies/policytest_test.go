package policies

import (
	"strings"
	"testing"
)

// TestExamplePolicies runs examples/policies/robot_test.yaml against robot.yaml, under both
// defaults: the example's cases are decided by its rules, never by the default.
func TestExamplePolicies(t *testing.T) {
	rules, err := LoadRuleFile("../examples/policies/robot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := LoadTests("../examples/policies/robot_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 12 {
		t.Errorf("only %d test cases", len(cases))
	}
	for _, def := range []string{Allow, Deny} {
		e, err := Compile(rules, Options{Default: def})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range RunTests(e, cases) {
			t.Errorf("default %s: %s", def, f.Msg)
		}
		// Every rule is exercised: decides a case, or (the shadow rule) shows up in one.
		used := map[string]bool{}
		for _, tc := range cases {
			in, err := tc.Call.Input()
			if err != nil {
				t.Fatal(err)
			}
			d := e.Evaluate(t.Context(), in)
			used[d.RuleID] = true
			for _, m := range d.Shadow {
				used[m.RuleID] = true
			}
		}
		for _, r := range rules {
			if !used[r.ID] {
				t.Errorf("no test case exercises rule %s", r.ID)
			}
		}
	}
}

func TestLoadTests(t *testing.T) {
	text := `tests:
  - name: prefixed tool
    call:
      tool: robot__wait
      args: {timeout_sec: 90, nested: {list: [1, "a", true, null]}}
      principal: {id: p, roles: [planner]}
      labels: {untrusted: true}
      state: {locked: true, in_flight: 1}
      tool_meta: {physical: true, evaluated: true, annotations: {readOnlyHint: false}}
      session_calls: 4
    expect: {decision: require_approval, rule: long-wait}
  - name: bare tool with its server
    call: {tool: wait, server: robot}
    expect: {decision: allow}
`
	path := writeFile(t, "t.yaml", text)
	cases, err := LoadTests(path)
	if err != nil {
		t.Fatal(err)
	}
	c := cases[0]
	if c.File != path || c.Line != 2 || c.Call.Server != "robot" || c.Call.UpstreamTool != "wait" || c.Call.SessionCalls != 4 ||
		!c.Call.Labels["untrusted"] || !c.Call.State.Locked || c.Call.State.InFlight != 1 || !c.Call.ToolMeta.Evaluated ||
		c.Call.Principal.Roles[0] != "planner" || c.Expect != (Expect{Decision: RequireApproval, Rule: "long-wait"}) {
		t.Errorf("case 0 = %+v", c)
	}
	if c := cases[1]; c.Line != 12 || c.Call.Server != "robot" || c.Call.UpstreamTool != "wait" || c.Call.Args != nil {
		t.Errorf("case 1 = %+v", c)
	}
	in, err := cases[0].Call.Input()
	if err != nil || string(in.Args) != `{"nested":{"list":[1,"a",true,null]},"timeout_sec":90}` || in.Session.Calls != 4 {
		t.Errorf("Input() = %+v, %v", in, err)
	}

	e := mustCompile(t, Options{},
		Rule{ID: "long-wait", Effect: RequireApproval, When: `upstream_tool == "wait" && args.timeout_sec > 60.0 && session.calls == 4 && state.in_flight == 1`})
	if failures := RunTests(e, cases); len(failures) != 0 {
		t.Errorf("failures: %v", failures)
	}
}

func TestLoadTestsProblems(t *testing.T) {
	text := `tests:
  - name: unknown key
    call: {tool: a, argz: {}}
    expect: {decision: allow}
  - name: ""
    call: {tool: a}
    expect: {decision: allow}
  - name: twice
    call: {tool: a}
    expect: {decision: allow}
  - name: twice
    call: {}
    expect: {decision: maybe}
`
	_, err := LoadTests(writeFile(t, "t.yaml", text))
	if err == nil || !strings.Contains(err.Error(), ":3: field argz not found") {
		t.Fatalf("strict decoding: %v", err)
	}
	text = strings.Replace(text, "argz", "args", 1)
	path := writeFile(t, "t.yaml", text)
	_, err = LoadTests(path)
	for _, want := range []string{
		path + ":5: the test case has no name",
		path + `:11: test case "twice": the name is also used at line 8`,
		path + `:12: test case "twice": call.tool is missing`,
		path + `:13: test case "twice": expect.decision must be allow, deny or require_approval, not "maybe"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
	if _, err := LoadTests(writeFile(t, "t.yaml", "tests: []\n")); err == nil || !strings.Contains(err.Error(), "no test cases") {
		t.Errorf("empty: %v", err)
	}
}

func TestRunTestsExplainsFailures(t *testing.T) {
	e := mustCompile(t, Options{Default: Deny},
		Rule{ID: "robot", Effect: Allow, When: `server == "robot"`, Reason: "robot tools"},
		Rule{ID: "fast", Effect: Deny, When: `args.speed > 0.5`, Reason: "too fast"},
		Rule{ID: "shadow", Effect: Deny, When: `true`, Mode: LogOnly},
	)
	cases := []TestCase{
		{Name: "passes", File: "t.yaml", Line: 2, Call: TestCall{Tool: "robot__go", Server: "robot", Args: map[string]any{"speed": 0.1}}, Expect: Expect{Decision: Allow, Rule: "robot"}},
		{Name: "wrong decision", File: "t.yaml", Line: 7, Call: TestCall{Tool: "robot__go", Server: "robot"}, Expect: Expect{Decision: Allow}},
		{Name: "wrong rule", File: "t.yaml", Line: 9, Call: TestCall{Tool: "robot__go", Server: "robot", Args: map[string]any{"speed": 0.1}}, Expect: Expect{Decision: Allow, Rule: "other"}},
		{Name: "default", File: "t.yaml", Line: 11, Call: TestCall{Tool: "arm__go", Server: "arm", Args: map[string]any{"speed": 0.1}}, Expect: Expect{Decision: Allow}},
	}
	failures := RunTests(e, cases)
	if len(failures) != 3 {
		t.Fatalf("got %d failures: %v", len(failures), failures)
	}
	for i, want := range [][]string{
		{`t.yaml:7: test "wrong decision": got deny by rule fast (rule fast could not be evaluated (no such key: speed), so it applies: too fast); want allow`,
			"matched: allow robot, deny fast (by error)", "could not evaluate deny fast (enforce): no such key: speed", "shadow (log_only, not applied): deny shadow"},
		{`t.yaml:9: test "wrong rule"`, "expects rule other, which is not among the rules"},
		{`t.yaml:11: test "default": got deny by default (no rule matched; the default decision is deny); want allow`, "matched: no rule"},
	} {
		for _, w := range want {
			if !strings.Contains(failures[i].Msg, w) {
				t.Errorf("failure %d:\n%s\ndoes not contain %q", i, failures[i].Msg, w)
			}
		}
	}
	if failures[0].Got.Effect != Deny || failures[0].Case.Name != "wrong decision" {
		t.Errorf("failure 0 = %+v", failures[0])
	}
}
