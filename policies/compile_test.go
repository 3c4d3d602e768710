package policies

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFile writes text to a file in a temporary directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// posOf returns the 1-based line and column of the first occurrence of needle on the line of
// text that contains marker.
func posOf(t *testing.T, text, marker, needle string) (int, int) {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, marker) {
			col := strings.Index(line, needle)
			if col < 0 {
				t.Fatalf("%q is not on the line of %q", needle, marker)
			}
			return i + 1, col + 1
		}
	}
	t.Fatalf("no line contains %q", marker)
	return 0, 0
}

const badPolicy = `# problems in the expressions, each where it is written
rules:
  - id: syntax-in-block
    effect: deny
    when: |
      server == "robot"
        && args.speed > )
    reason: line 2 of the block has a syntax error
  - id: not-boolean
    effect: deny
    when: 'tool + "-suffix"'
  - id: type-error
    effect: allow
    when: server == "robot" && principal.role == "admin"
  - id: folded
    effect: deny
    when: >
      server == "robot" &&
      session.calls > 1.5
  - id: bad-glob
    effect: deny
    when: glob("robot__[", tool)
  - id: nested-loops
    effect: deny
    when: args.a.exists(x, args.b.exists(y, args.c.exists(z, x == y && y == z)))
  - id: syntax-in-block
    effect: permit
    mode: shadow
    when: "true"
  - id: ""
    effect: deny
    when: "true"
  - id: no-when
    effect: deny
`

func TestCompileErrorsAreLocated(t *testing.T) {
	path := writeFile(t, "bad.yaml", badPolicy)
	rules, err := LoadRuleFile(path)
	if err != nil {
		t.Fatalf("LoadRuleFile: %v", err)
	}
	_, err = Compile(rules, Options{})
	var problems *Problems
	if !errors.As(err, &problems) {
		t.Fatalf("Compile returned %v, want *Problems", err)
	}
	at := func(marker, needle string) string {
		line, col := posOf(t, badPolicy, marker, needle)
		return fmt.Sprintf("%s:%d:%d: ", path, line, col)
	}
	dupLine, dupCol := posOf(t, badPolicy, `server == "robot"`, "server")
	want := []string{
		at("&& args.speed > )", ")") + "rule syntax-in-block: Syntax error: mismatched input ')'",
		at(`'tool + "-suffix"'`, "tool") + "rule not-boolean: the expression has type string, not bool",
		at(`principal.role`, ".role") + "rule type-error: undefined field 'role'",
		at("session.calls > 1.5", ">") + "rule folded: found no matching overload for '_>_' applied to '(int, double)'",
		at(`glob("robot__["`, `"robot__["`) + `rule bad-glob: glob: malformed pattern "robot__["`,
		at("args.a.exists", "args") + "rule nested-loops: the estimated worst-case cost",
		at(`when: "true"`, "true") + fmt.Sprintf("rule syntax-in-block: duplicate rule id; it is also the id of the rule at %s:%d:%d", path, dupLine, dupCol),
		at(`when: "true"`, "true") + `rule syntax-in-block: unknown effect "permit"`,
		at(`when: "true"`, "true") + `rule syntax-in-block: unknown mode "shadow"`,
		"the rule has no id",
		"rule no-when: when is empty",
	}
	if len(problems.List) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(problems.List), len(want), err)
	}
	for i, w := range want {
		if got := problems.List[i].Error(); !strings.Contains(got, w) {
			t.Errorf("problem %d:\n got %s\nwant %s", i, got, w)
		}
	}
	// The rule without an id is located at its when, the one without a when at the rule.
	idLine, _ := posOf(t, badPolicy, `id: ""`, "id")
	noWhenLine, noWhenCol := posOf(t, badPolicy, "id: no-when", "id")
	if p := problems.List[9]; p.Line != idLine+2 || p.Column != 12 {
		t.Errorf("the problem without an id is at %d:%d, want %d:12", p.Line, p.Column, idLine+2)
	}
	if p := problems.List[10]; p.Line != noWhenLine || p.Column != noWhenCol {
		t.Errorf("the problem without a when is at %d:%d, want %d:%d", p.Line, p.Column, noWhenLine, noWhenCol)
	}
}

func TestInlineRulePositions(t *testing.T) {
	// As the lead passes a rule from the configuration file: Line and Column of the first
	// character of the expression, which continues on the next lines at the same indentation.
	_, err := Compile([]Rule{
		{ID: "one-line", Effect: Deny, When: `args.speed > )`, File: "gw.yaml", Line: 7, Column: 11},
		{ID: "block", Effect: Deny, When: "tool == \"x\"\n  && principal.nme == \"y\"\n", File: "gw.yaml", Line: 20, Column: 9},
		{ID: "no-position", Effect: Deny, When: "true &&\n  1"},
	}, Options{})
	want := []string{
		"gw.yaml:7:24: rule one-line: Syntax error",
		"gw.yaml:21:23: rule block: undefined field 'nme'",
		"line 2, column 3: rule no-position: expected type 'bool' but found 'int'",
	}
	var problems *Problems
	if !errors.As(err, &problems) || len(problems.List) != len(want) {
		t.Fatalf("got %v", err)
	}
	for i, w := range want {
		if !strings.HasPrefix(problems.List[i].Error(), w) {
			t.Errorf("got %s\nwant %s…", problems.List[i].Error(), w)
		}
	}
}

func TestCompileOptions(t *testing.T) {
	if _, err := Compile(nil, Options{Default: "maybe"}); err == nil || !strings.Contains(err.Error(), `default decision must be allow or deny, not "maybe"`) {
		t.Errorf("bad default: %v", err)
	}
	e, err := Compile(nil, Options{Default: Deny})
	if err != nil || e.Evaluate(t.Context(), &Input{}).Effect != Deny {
		t.Errorf("no rules with default deny: %v", err)
	}
	// Without rules no CEL environment is built, and a call with arguments and a principal still
	// gets the default.
	if e.adapter != nil {
		t.Error("no rules: the CEL environment was built")
	}
	in := &Input{Server: "robot", Tool: "robot__move", Args: []byte(`{"speed":1.5}`), Principal: Principal{ID: "op", Roles: []string{"operator"}}}
	if d := e.Evaluate(t.Context(), in); d.Effect != Deny || !d.Default || len(d.Errors) > 0 {
		t.Errorf("no rules, a call with arguments: %+v", d)
	}
	// A loop over the arguments passes the estimate; one that always exceeds the runtime limit
	// does not.
	if _, err := Compile([]Rule{{ID: "loop", Effect: Deny, When: `args.list.exists(x, x > 1.0)`}}, Options{}); err != nil {
		t.Errorf("a single comprehension: %v", err)
	}
	_, err = Compile([]Rule{{ID: "always-over", Effect: Deny, When: `[1,2,3,4,5,6,7,8,9,10].map(x, [1,2,3,4,5,6,7,8,9,10].map(y, x + y)).size() > 0`}}, Options{CostLimit: 50})
	if err == nil || !strings.Contains(err.Error(), "above the runtime cost limit of 50") {
		t.Errorf("a rule that always exceeds the limit: %v", err)
	}
}

// Options.Variables refuses every read of a variable outside it, where it is written; a
// function, a loop's own variable and a type's name are not variables.
func TestVariablesBoundWhatARuleReads(t *testing.T) {
	only := []string{"server", "tool", "upstream_tool"}
	for _, when := range []string{
		`server == "robot" && tool.startsWith("robot__")`,
		`["move", "grip"].exists(x, upstream_tool == x) && size(tool) > 0`,
		`glob("robot__*", tool) || type(server) == string`,
	} {
		e, err := Compile([]Rule{{ID: "g", Effect: Allow, When: when}}, Options{Default: Deny, Variables: only})
		if err != nil {
			t.Errorf("%s: %v", when, err)
			continue
		}
		if d := e.Evaluate(t.Context(), &Input{Server: "robot", Tool: "robot__move", UpstreamTool: "move"}); d.Effect != Allow || len(d.Errors) > 0 {
			t.Errorf("%s: %+v", when, d)
		}
	}
	const when = `server == "robot" && ("planner" in principal.roles || has(args.speed) || principal.id == "x" || labels.untrusted)`
	_, err := Compile([]Rule{{ID: "g", Effect: Allow, When: when, Line: 7, Column: 9}}, Options{Variables: only})
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("a rule reading principal, args and labels: %v", err)
	}
	var got []string
	for _, p := range ps.List {
		got = append(got, fmt.Sprintf("%d:%d %s", p.Line, p.Column, p.Msg))
	}
	want := []string{
		"7:44 principal is not known here: this expression can read only server, tool, upstream_tool",
		"7:67 args is not known here: this expression can read only server, tool, upstream_tool",
		"7:82 principal is not known here: this expression can read only server, tool, upstream_tool",
		"7:105 labels is not known here: this expression can read only server, tool, upstream_tool",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A name in the root scope is the same variable.
	if _, err := Compile([]Rule{{ID: "g", Effect: Allow, When: `.principal.id == "x"`}}, Options{Variables: only}); err == nil ||
		!strings.Contains(err.Error(), "principal is not known here") {
		t.Errorf(".principal: %v", err)
	}
	// Without Variables every variable of §8 may be read.
	if _, err := Compile([]Rule{{ID: "g", Effect: Allow, When: when}}, Options{}); err != nil {
		t.Errorf("without Variables: %v", err)
	}
}

func TestLoadRuleFile(t *testing.T) {
	text := `rules:
  - id: plain
    effect: deny
    when: server == "robot"
    reason: r
  - id: quoted
    effect: allow
    when: "tool == 'a'"
    mode: log_only
  - id: block
    effect: require_approval
    when: |-
        labels.untrusted
          && tool_meta.physical
`
	path := writeFile(t, "ok.yaml", text)
	rules, err := LoadRuleFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type pos struct {
		id, when     string
		line, column int
	}
	want := []pos{
		{"plain", `server == "robot"`, 4, 11},
		{"quoted", `tool == 'a'`, 8, 12},
		{"block", "labels.untrusted\n  && tool_meta.physical", 13, 9},
	}
	for i, w := range want {
		r := rules[i]
		if r.ID != w.id || r.When != w.when || r.Line != w.line || r.Column != w.column || r.File != path {
			t.Errorf("rule %d = %+v, want %+v", i, r, w)
		}
	}
	if rules[0].Reason != "r" || rules[1].Mode != LogOnly || rules[2].Effect != RequireApproval {
		t.Errorf("fields not decoded: %+v", rules)
	}
	if _, err := Compile(rules, Options{}); err != nil {
		t.Errorf("Compile: %v", err)
	}
}

func TestLoadRuleFileStrict(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":   {"rules:\n  - id: a\n    effect: deny\n    wen: 'true'\n", ":4: field wen not found"},
		"duplicate key": {"rules:\n  - id: a\n    id: b\n    effect: deny\n    when: 'true'\n", `:3: mapping key "id" already defined at line 2`},
		"wrong type":    {"rules:\n  - id: a\n    effect: [deny]\n    when: 'true'\n", ":3: cannot unmarshal !!seq into string"},
		"syntax":        {"rules:\n  - id: a\n   effect: deny\n", ":1: did not find expected"},
		"no rules":      {"rules: []\n", ":1: no rules"},
		"not a list":    {"rules: {id: a}\n", ":1: cannot unmarshal !!map"},
		"empty file":    {"", "the file is empty"},
		"top-level key": {"policies:\n  - id: a\n", ":1: field policies not found"},
	} {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, "p.yaml", tc.text)
			_, err := LoadRuleFile(path)
			if err == nil || !strings.Contains(err.Error(), path+tc.want) && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), path) {
				t.Errorf("the error does not start with the file: %v", err)
			}
		})
	}
	if _, err := LoadRuleFile(filepath.Join(t.TempDir(), "absent.yaml")); err == nil || !strings.Contains(err.Error(), "cannot read the file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadRuleFileAliases(t *testing.T) {
	text := `rules:
  - &shared {id: shared, effect: allow, when: "true"}
  - *shared
  - id: own
    effect: deny
    when: tool == "x"
`
	path := writeFile(t, "a.yaml", text)
	rules, err := LoadRuleFile(path)
	if err != nil || len(rules) != 3 {
		t.Fatalf("got %v, %v", rules, err)
	}
	// The aliased rule is located where its anchor's when is written.
	if rules[1].ID != "shared" || rules[1].Line != 2 || rules[1].Column != 48 || rules[2].Line != 6 {
		t.Errorf("positions: %+v", rules)
	}
	if _, err := Compile(rules, Options{}); err == nil || !strings.Contains(err.Error(), path+":2:48: rule shared: duplicate rule id") {
		t.Errorf("an aliased rule repeats its id: %v", err)
	}
}

// TestProblemsNameTheirRuleAndSetting checks that each problem Compile and LoadRuleFile report
// names the rule it belongs to (by its place in the list given to Compile) and the setting it is
// about, so that a caller that already reported that setting can leave it out.
func TestProblemsNameTheirRuleAndSetting(t *testing.T) {
	rules := []Rule{
		{ID: "good", Effect: Deny, When: "true"},
		{ID: "", Effect: "stop", When: "tool =="},
		{ID: "good", Effect: Deny, Mode: "loud", When: ""},
	}
	_, err := Compile(rules, Options{Default: "maybe"})
	var problems *Problems
	if !errors.As(err, &problems) {
		t.Fatalf("got %v, want *Problems", err)
	}
	type at struct {
		rule int
		key  string
	}
	want := []at{{-1, "default"}, {1, "id"}, {1, "effect"}, {1, "when"}, {2, "id"}, {2, "mode"}, {2, "when"}}
	if len(problems.List) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(problems.List), len(want), err)
	}
	for i, p := range problems.List {
		if got := (at{p.Rule, p.Key}); got != want[i] {
			t.Errorf("problem %q: rule %d, key %q; want rule %d, key %q", p.Error(), got.rule, got.key, want[i].rule, want[i].key)
		}
	}
	_, err = LoadRuleFile(writeFile(t, "rules.yaml", "rules:\n  - id: x\n    effectt: deny\n"))
	if !errors.As(err, &problems) || len(problems.List) != 1 || problems.List[0].Rule != -1 {
		t.Errorf("a policy file's problem: %#v, want one of rule -1", err)
	}
}
