package policies

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestRateVariable: rules read `rate.<scope>.<count>` as ints, and a rule on
// rate.server.physical_1m holds the call that finds 10 before it.
func TestRateVariable(t *testing.T) {
	e := mustCompile(t, Options{Default: Allow},
		Rule{ID: "eleventh-move", Effect: RequireApproval, When: `tool_meta.physical && rate.server.physical_1m >= 10`, Reason: "the eleventh arm movement in a minute"},
		Rule{ID: "busy-principal", Effect: Deny, When: `rate.principal.calls_1h > 1000 || rate.session.calls_1m > 100`},
	)
	in := func(rate Rate) *Input {
		return &Input{Tool: "robot__move", Server: "robot", UpstreamTool: "move", ToolMeta: ToolMeta{Physical: true}, Rate: rate}
	}
	for _, c := range []struct {
		name string
		rate Rate
		want string
		rule string
	}{
		{"the tenth move", Rate{Server: RateCounts{Physical1m: 9, Calls1m: 30}}, Allow, ""},
		{"the eleventh move", Rate{Server: RateCounts{Physical1m: 10}}, RequireApproval, "eleventh-move"},
		{"a principal over a thousand an hour", Rate{Principal: RateCounts{Calls1h: 1001}}, Deny, "busy-principal"},
		{"a session over a hundred a minute", Rate{Session: RateCounts{Calls1m: 101}}, Deny, "busy-principal"},
		{"physical calls of the hour do not count", Rate{Server: RateCounts{Physical1h: 50}, Principal: RateCounts{Physical1m: 50}}, Allow, ""},
	} {
		d := e.Evaluate(context.Background(), in(c.rate))
		if d.Effect != c.want || len(d.Errors) != 0 || (c.rule != "" && d.RuleID != c.rule) {
			t.Errorf("%s: got %s by %q (errors %v), want %s by %q", c.name, d.Effect, d.RuleID, d.Errors, c.want, c.rule)
		}
	}

	all := `rate.principal.calls_1m == 1 && rate.principal.calls_1h == 2 && rate.principal.physical_1m == 3 && rate.principal.physical_1h == 4 &&
		rate.session.calls_1m == 5 && rate.session.calls_1h == 6 && rate.session.physical_1m == 7 && rate.session.physical_1h == 8 &&
		rate.server.calls_1m == 9 && rate.server.calls_1h == 10 && rate.server.physical_1m == 11 && rate.server.physical_1h == 12`
	e = mustCompile(t, Options{Default: Deny}, Rule{ID: "all", Effect: Allow, When: all})
	d := e.Evaluate(context.Background(), &Input{Tool: "robot__move", Rate: Rate{
		Principal: RateCounts{1, 2, 3, 4}, Session: RateCounts{5, 6, 7, 8}, Server: RateCounts{9, 10, 11, 12}}})
	if d.Effect != Allow || len(d.Errors) != 0 {
		t.Fatalf("every rate field: got %s, errors %v", d.Effect, d.Errors)
	}
}

// TestRateMisspelt: a wrong scope or count name, or a double compared with a count, is refused
// at load like any misspelt field.
func TestRateMisspelt(t *testing.T) {
	for cond, want := range map[string]string{
		`rate.server.physical_1min >= 10`: "undefined field 'physical_1min'",
		`rate.tool.calls_1m >= 10`:        "undefined field 'tool'",
		`rate.server.calls_1m > 10.5`:     "found no matching overload for '_>_' applied to '(int, double)'",
	} {
		_, err := Compile([]Rule{{ID: "r", Effect: Deny, When: cond, File: "p.yaml", Line: 3, Column: 11}}, Options{})
		var problems *Problems
		if !errors.As(err, &problems) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Compile returned %v, want a problem saying %q", cond, err, want)
		}
	}
}

// TestRateInPolicyTests: a policy test case gives the counts under `rate:`.
func TestRateInPolicyTests(t *testing.T) {
	path := t.TempDir() + "/t.yaml"
	body := `tests:
  - name: the eleventh move is held
    call:
      tool: robot__move
      tool_meta: {physical: true}
      rate: {server: {physical_1m: 10}, principal: {calls_1h: 3}}
    expect: {decision: require_approval, rule: eleventh-move}
  - name: the tenth is not
    call:
      tool: robot__move
      tool_meta: {physical: true}
      rate: {server: {physical_1m: 9}}
    expect: {decision: allow}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cases, err := LoadTests(path)
	if err != nil {
		t.Fatal(err)
	}
	e := mustCompile(t, Options{Default: Allow},
		Rule{ID: "eleventh-move", Effect: RequireApproval, When: `tool_meta.physical && rate.server.physical_1m >= 10 && rate.principal.calls_1h == 3`})
	if fails := RunTests(e, cases); len(fails) != 0 {
		t.Fatalf("failures: %v", fails[0].Msg)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(body, "physical_1m: 9", "physical_1min: 9", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTests(path); err == nil || !strings.Contains(err.Error(), "physical_1min") {
		t.Fatalf("a misspelt rate key: %v, want an error naming it", err)
	}
}
