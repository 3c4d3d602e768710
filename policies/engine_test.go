package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustCompile(t testing.TB, opts Options, rules ...Rule) *Engine {
	t.Helper()
	e, err := Compile(rules, opts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return e
}

func eval(e *Engine, args string) Decision {
	return e.Evaluate(context.Background(), &Input{Tool: "robot__wait", Server: "robot", UpstreamTool: "wait", Args: json.RawMessage(args)})
}

func TestPrecedence(t *testing.T) {
	rules := []Rule{
		{ID: "allow-l", Effect: Allow, When: `args.l`, Reason: "l"},
		{ID: "approve-a", Effect: RequireApproval, When: `args.a`, Reason: "a"},
		{ID: "deny-d", Effect: Deny, When: `args.d`, Reason: "d"},
	}
	for _, def := range []string{Allow, Deny} {
		e := mustCompile(t, Options{Default: def}, rules...)
		for mask := range 8 {
			deny, approve, allow := mask&4 != 0, mask&2 != 0, mask&1 != 0
			args := fmt.Sprintf(`{"d": %v, "a": %v, "l": %v}`, deny, approve, allow)
			wantEffect, wantRule := def, ""
			switch {
			case deny:
				wantEffect, wantRule = Deny, "deny-d"
			case approve:
				wantEffect, wantRule = RequireApproval, "approve-a"
			case allow:
				wantEffect, wantRule = Allow, "allow-l"
			}
			t.Run(fmt.Sprintf("default=%s/deny=%v,approve=%v,allow=%v", def, deny, approve, allow), func(t *testing.T) {
				d := eval(e, args)
				if d.Effect != wantEffect || d.RuleID != wantRule || d.Default != (wantRule == "") {
					t.Fatalf("got %s by %q (default %v), want %s by %q", d.Effect, d.RuleID, d.Default, wantEffect, wantRule)
				}
				if n := deny2i(deny) + deny2i(approve) + deny2i(allow); len(d.Matched) != n {
					t.Errorf("Matched = %+v, want %d matches", d.Matched, n)
				}
				if wantRule == "" && !strings.Contains(d.Reason, "default decision is "+def) {
					t.Errorf("default reason %q does not name the default", d.Reason)
				}
				if wantRule != "" && d.Reason != wantRule[len(wantRule)-1:] {
					t.Errorf("Reason = %q, want the rule's reason", d.Reason)
				}
				if len(d.Errors) != 0 || len(d.Shadow) != 0 {
					t.Errorf("unexpected errors %v or shadow %v", d.Errors, d.Shadow)
				}
			})
		}
	}
}

func deny2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// failClosedCases are conditions that cannot be evaluated for the call {"speed": 1.5}.
var failClosedCases = []struct {
	name, when, errPart string
}{
	{"int/double arithmetic", `args.speed * 2 > 1`, "no such overload"},
	{"missing key", `args.force > 1.0`, "no such key: force"},
	{"missing nested key", `args.pose.x > 1.0`, "no such key: pose"},
	{"malformed glob", `glob(args[?"pattern"].orValue("["), tool)`, "malformed pattern"},
	{"string compared to a number", `args.speed > "fast"`, "no such overload"},
}

func TestUnevaluableRulesFailClosed(t *testing.T) {
	for _, tc := range failClosedCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, effect := range []string{Deny, RequireApproval} {
				e := mustCompile(t, Options{Default: Allow},
					Rule{ID: "r", Effect: effect, When: tc.when, Reason: "why"},
					Rule{ID: "grant", Effect: Allow, When: `true`})
				d := eval(e, `{"speed": 1.5}`)
				if d.Effect != effect || d.RuleID != "r" {
					t.Fatalf("%s rule: got %s by %q, want it to apply", effect, d.Effect, d.RuleID)
				}
				if len(d.Matched) != 2 || !d.Matched[0].ByError || d.Matched[1].ByError {
					t.Errorf("Matched = %+v, want r by error and grant", d.Matched)
				}
				if !strings.Contains(d.Reason, "could not be evaluated") || !strings.Contains(d.Reason, tc.errPart) || !strings.Contains(d.Reason, "why") {
					t.Errorf("Reason %q should say the rule could not be evaluated, why (%s), and the rule's reason", d.Reason, tc.errPart)
				}
				if len(d.Errors) != 1 || d.Errors[0].RuleID != "r" || d.Errors[0].Mode != Enforce || !strings.Contains(d.Errors[0].Err, tc.errPart) {
					t.Errorf("Errors = %+v", d.Errors)
				}
			}
			e := mustCompile(t, Options{Default: Deny}, Rule{ID: "r", Effect: Allow, When: tc.when})
			d := eval(e, `{"speed": 1.5}`)
			if d.Effect != Deny || !d.Default || len(d.Matched) != 0 {
				t.Fatalf("an allow that errors granted: %+v", d)
			}
			if len(d.Errors) != 1 || !strings.Contains(d.Reason, "1 could not be evaluated") {
				t.Errorf("the error is not reported: %+v", d)
			}
		})
	}
}

// TestNumbersAreDoubles pins what rule authors are told in README.md: argument numbers are
// doubles; comparing one with an int literal compares values (cel-go compares numbers across
// types at run time), while arithmetic that mixes them cannot be evaluated, and a mix of typed
// values is refused at load.
func TestNumbersAreDoubles(t *testing.T) {
	e := mustCompile(t, Options{},
		Rule{ID: "double", Effect: Deny, When: `args.speed > 1.0`},
		Rule{ID: "int-literal", Effect: Deny, When: `args.speed > 1`},
		Rule{ID: "whole", Effect: Deny, When: `args.count == 3.0 && type(args.count) == double`},
		Rule{ID: "arith", Effect: Allow, When: `args.speed * 2 > 1`},
	)
	d := eval(e, `{"speed": 1.5, "count": 3}`)
	got := map[string]bool{}
	for _, m := range d.Matched {
		got[m.RuleID] = !m.ByError
	}
	if !got["double"] || !got["int-literal"] || !got["whole"] || len(d.Matched) != 3 {
		t.Errorf("Matched = %+v", d.Matched)
	}
	if len(d.Errors) != 1 || d.Errors[0].RuleID != "arith" || !strings.Contains(d.Errors[0].Err, "1.0, not 1") {
		t.Errorf("Errors = %+v, want arith with the doubles hint", d.Errors)
	}
	if _, err := Compile([]Rule{{ID: "typed", Effect: Deny, When: `session.calls > 1.5`}}, Options{}); err == nil || !strings.Contains(err.Error(), "'(int, double)'") {
		t.Errorf("int/double mix of typed values: err = %v", err)
	}
}

func TestCostLimitFailsClosed(t *testing.T) {
	e := mustCompile(t, Options{CostLimit: 1000},
		Rule{ID: "no-far-waypoint", Effect: Deny, When: `args.waypoints.exists(w, w > 100.0)`, Reason: "too far"},
		Rule{ID: "all-near", Effect: Allow, When: `args.waypoints.all(w, w < 100.0)`},
		Rule{ID: "shadow-deny", Effect: Deny, When: `args.waypoints.exists(w, w > 100.0)`, Mode: LogOnly},
	)
	var b strings.Builder
	b.WriteString(`{"waypoints": [`)
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("1")
	}
	b.WriteString("]}")
	d := eval(e, b.String())
	if d.Effect != Deny || d.RuleID != "no-far-waypoint" || !d.Matched[0].ByError {
		t.Fatalf("got %+v, want the deny to apply by error", d)
	}
	if len(d.Errors) != 3 || !strings.Contains(d.Errors[0].Err, "cost limit exceeded") {
		t.Errorf("Errors = %+v", d.Errors)
	}
	if len(d.Shadow) != 1 || !d.Shadow[0].ByError {
		t.Errorf("Shadow = %+v, want the log_only deny as a would-be decision by error", d.Shadow)
	}
	// A short list stays within the limit.
	d = eval(e, `{"waypoints": [1, 2, 3]}`)
	if d.Effect != Allow || d.RuleID != "all-near" || len(d.Errors) != 0 {
		t.Errorf("short list: %+v", d)
	}
}

func TestShadowRulesChangeNothing(t *testing.T) {
	enforced := []Rule{
		{ID: "allow-robot", Effect: Allow, When: `server == "robot"`},
		{ID: "deny-fast", Effect: Deny, When: `args[?"speed"].orValue(0.0) > 1.0`, Reason: "fast"},
	}
	shadow := []Rule{
		{ID: "shadow-deny", Effect: Deny, When: `args[?"speed"].orValue(0.0) > 0.1`, Mode: LogOnly, Reason: "stricter"},
		{ID: "shadow-approve", Effect: RequireApproval, When: `true`, Mode: LogOnly},
		{ID: "shadow-allow-error", Effect: Allow, When: `args.missing`, Mode: LogOnly},
	}
	plain := mustCompile(t, Options{Default: Deny}, enforced...)
	withShadow := mustCompile(t, Options{Default: Deny}, append(shadow, enforced...)...)
	for _, args := range []string{`{"speed": 0.5}`, `{"speed": 2.0}`, `{}`} {
		want, got := eval(plain, args), eval(withShadow, args)
		if got.Effect != want.Effect || got.RuleID != want.RuleID || got.Reason != want.Reason || fmt.Sprint(got.Matched) != fmt.Sprint(want.Matched) {
			t.Errorf("%s: shadow rules changed the decision: %+v, want %+v", args, got, want)
		}
		if len(got.Errors) != 1 || got.Errors[0].RuleID != "shadow-allow-error" || got.Errors[0].Mode != LogOnly {
			t.Errorf("%s: Errors = %+v", args, got.Errors)
		}
	}
	d := eval(withShadow, `{"speed": 0.5}`)
	if len(d.Shadow) != 2 || d.Shadow[0] != (Match{RuleID: "shadow-deny", Effect: Deny, Reason: "stricter"}) || d.Shadow[1].RuleID != "shadow-approve" {
		t.Errorf("Shadow = %+v", d.Shadow)
	}
}

func TestVariablesAndHelpers(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	in := &Input{
		Tool: "robot__navigate_to", Server: "robot", UpstreamTool: "navigate_to",
		Args:      json.RawMessage(`{"target": "table", "speed": 0.3, "pose": {"x": 1, "tags": ["a"]}, "n": null, "ok": true, "s": "caf\u00e9"}`),
		Principal: Principal{ID: "op", Roles: []string{"admin", "agent"}},
		Session:   Session{ID: "s-1", Calls: 7},
		ToolMeta:  ToolMeta{Physical: true, Evaluated: true, Annotations: map[string]any{"readOnlyHint": false, "title": "Drive"}},
		Labels:    map[string]bool{"private": true, "custom": true},
		State:     State{Locked: true, InFlight: 2},
	}
	conds := []string{
		`tool == "robot__navigate_to" && server == "robot" && upstream_tool == "navigate_to"`,
		`args.target == "table" && args["speed"] == 0.3`,
		`args[?"speed"].orValue(0.0) == 0.3 && args[?"absent"].orValue(0.0) == 0.0`,
		`args.pose.x == 1.0 && args.pose.tags[0] == "a" && args.pose.?y.orValue(2.0) == 2.0`,
		`has(args.pose) && !has(args.absent) && "target" in args && !("absent" in args)`,
		`args.n == null && args.ok && args.s == "café" && size(args) == 6`,
		`args.exists(k, k == "target") && args.all(k, k != "") && args.filter(k, k.startsWith("s")).size() == 2`,
		`principal.id == "op" && "admin" in principal.roles && principal.roles.size() == 2`,
		`session.id == "s-1" && session.calls == 7`,
		`tool_meta.physical && tool_meta.evaluated && tool_meta.annotations.title == "Drive"`,
		`tool_meta.annotations[?"destructiveHint"].orValue(true) && !tool_meta.annotations.readOnlyHint`,
		`labels.private && !labels.untrusted && labels.custom && labels[?"other"].orValue(false) == false`,
		`state.locked && state.in_flight == 2`,
		`now == timestamp("2026-05-01T12:00:00Z") && now.getFullYear() == 2026`,
		`glob("robot__*", tool) && !glob("arm__*", tool) && glob("navigate_?o", upstream_tool) && !glob("a*", "a/b")`,
		`args.?pose.?x.orValue(0.0) == 1.0 && !args.?pose.?z.hasValue() && args[?"speed"].hasValue()`,
		`int(args.pose.x) == 1 && has(args.speed) && args.speed > 0.25 && double(session.calls) == 7.0`,
		`args == {"target": "table", "speed": 0.3, "pose": {"x": 1.0, "tags": ["a"]}, "n": null, "ok": true, "s": "café"}`,
	}
	for _, cond := range conds {
		e := mustCompile(t, Options{Default: Deny, Now: func() time.Time { return now }}, Rule{ID: "r", Effect: Allow, When: cond})
		d := e.Evaluate(context.Background(), in)
		if d.Effect != Allow || len(d.Errors) != 0 {
			t.Errorf("%s: got %s, errors %v", cond, d.Effect, d.Errors)
		}
	}
}

func TestDynConditionMustBeBool(t *testing.T) {
	e := mustCompile(t, Options{Default: Allow},
		Rule{ID: "flag", Effect: Deny, When: `args.dry_run`},
	)
	if d := eval(e, `{"dry_run": true}`); d.Effect != Deny || d.Matched[0].ByError {
		t.Errorf("bool: %+v", d)
	}
	if d := eval(e, `{"dry_run": false}`); d.Effect != Allow {
		t.Errorf("false: %+v", d)
	}
	d := eval(e, `{"dry_run": "yes"}`)
	if d.Effect != Deny || !d.Matched[0].ByError || !strings.Contains(d.Errors[0].Err, "gave string, not a bool") {
		t.Errorf("string: %+v", d)
	}
}

func TestLabelsDefaultFalse(t *testing.T) {
	e := mustCompile(t, Options{Default: Allow},
		Rule{ID: "untrusted", Effect: Deny, When: `labels.untrusted`},
		Rule{ID: "private", Effect: RequireApproval, When: `labels.private`},
	)
	for _, labels := range []map[string]bool{nil, {}, {"other": true}, {"untrusted": false}} {
		d := e.Evaluate(context.Background(), &Input{Labels: labels})
		if d.Effect != Allow || !d.Default || len(d.Errors) != 0 {
			t.Errorf("labels %v: %+v", labels, d)
		}
	}
	in := &Input{Labels: map[string]bool{"untrusted": true}}
	if d := e.Evaluate(context.Background(), in); d.Effect != Deny || len(d.Errors) != 0 {
		t.Errorf("untrusted: %+v", d)
	}
	if len(in.Labels) != 1 {
		t.Errorf("Evaluate changed the input's labels: %v", in.Labels)
	}
}

func TestArgumentsThatAreNotAnObject(t *testing.T) {
	e := mustCompile(t, Options{Default: Allow},
		Rule{ID: "reads-args", Effect: Deny, When: `args[?"speed"].orValue(0.0) > 1.0`},
		Rule{ID: "ignores-args", Effect: RequireApproval, When: `tool == "x"`},
	)
	for args, want := range map[string]string{
		`[1, 2]`:           "a JSON array, not an object",
		`"text"`:           "a JSON string, not an object",
		`{"speed": 1.0,}`:  "not valid JSON",
		`{"speed": 1e999}`: "not valid JSON",
		`{} {}`:            "not valid JSON",
	} {
		d := e.Evaluate(context.Background(), &Input{Tool: "x", Args: json.RawMessage(args)})
		if d.Effect != Deny || !d.Matched[0].ByError || !strings.Contains(d.Reason, want) {
			t.Errorf("%s: got %+v, want the deny to apply saying %q", args, d, want)
		}
		if len(d.Matched) != 2 || d.Matched[1].RuleID != "ignores-args" || d.Matched[1].ByError {
			t.Errorf("%s: a rule that does not read args should still run: %+v", args, d.Matched)
		}
	}
	for _, args := range []string{``, ` `, `null`, `{}`} {
		if d := e.Evaluate(context.Background(), &Input{Args: json.RawMessage(args)}); d.Effect != Allow || len(d.Errors) != 0 {
			t.Errorf("%q should read as no arguments: %+v", args, d)
		}
	}
}

func TestCancelledContextFailsClosed(t *testing.T) {
	e := mustCompile(t, Options{Default: Allow},
		Rule{ID: "allow", Effect: Allow, When: `true`},
		Rule{ID: "deny", Effect: Deny, When: `false`},
	)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := e.Evaluate(ctx, &Input{})
	if d.Effect != Deny || !d.Matched[0].ByError || len(d.Errors) != 2 || !strings.Contains(d.Errors[0].Err, "context canceled") {
		t.Errorf("got %+v", d)
	}
}

func TestRulesAndNilInput(t *testing.T) {
	rules := []Rule{
		{ID: "a", Effect: Allow, When: `true`, Reason: "x", File: "p.yaml", Line: 3, Column: 11},
		{ID: "b", Effect: Deny, When: `tool == "t"`, Mode: LogOnly},
	}
	e := mustCompile(t, Options{}, rules...)
	got := e.Rules()
	if len(got) != 2 || got[0].ID != "a" || got[0].Line != 3 || got[1].Mode != LogOnly {
		t.Errorf("Rules() = %+v", got)
	}
	if got[0] != rules[0] || got[1] != rules[1] { // Rule stays comparable
		t.Errorf("Rules() = %+v, want %+v", got, rules)
	}
	got[0].ID = "changed"
	if e.Rules()[0].ID != "a" {
		t.Error("Rules() shares the engine's rules")
	}
	if d := e.Evaluate(context.Background(), nil); d.Effect != Allow || d.RuleID != "a" {
		t.Errorf("nil input: %+v", d)
	}
	if e.Default() != Allow {
		t.Errorf("Default() = %q", e.Default())
	}
}

func TestConcurrentEvaluate(t *testing.T) {
	e := mustCompile(t, Options{}, benchRules...)
	in := benchInput(t)
	want := e.Evaluate(context.Background(), in)
	done := make(chan Decision)
	for range 8 {
		go func() {
			var d Decision
			for range 200 {
				d = e.Evaluate(context.Background(), in)
			}
			done <- d
		}()
	}
	for range 8 {
		if d := <-done; fmt.Sprint(d) != fmt.Sprint(want) {
			t.Errorf("concurrent decision %+v, want %+v", d, want)
		}
	}
}
