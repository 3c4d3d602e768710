package gateway

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// CheckGuards returns what BuildGuards refuses, one problem for each of its lines (a where.when
// of two problems gives two), each naming its stage, entry (after an entry whose where.when did
// not compile too), setting and line, and a judge's problems the llm setting they depend on.
func TestCheckGuardsNamesEachProblemsEntry(t *testing.T) {
	src := `servers:
  - {name: robot, command: robot}
guardrails:
  tool_call:
    - id: a
      use: regex.deny
      patterns: [x]
      where: {when: "tool ==="}
    - id: b
      use: regex.deny
      action: nope
      patterns: ["("]
      where: {tools: ["[x"]}
  output:
    - id: j
      use: llm.judge
      criteria: be nice
      model: fast
`
	cfg, err := config.Parse("cell.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	_, buildErr := BuildGuards(cfg)
	if buildErr == nil {
		t.Fatal("BuildGuards accepted the guards")
	}
	got := CheckGuards(cfg)
	type about struct {
		stage     string
		index     int
		key, llm  string
		line      int
		msgPrefix string
	}
	want := []about{
		{"tool_call", 0, "where.when", "", 8, "guard a: where.when: Syntax error: token recognition error"},
		{"tool_call", 0, "where.when", "", 8, "guard a: where.when: Syntax error: mismatched input"},
		{"tool_call", 1, "action", "", 9, `guard b: unknown action "nope"`},
		{"tool_call", 1, "where.tools", "", 9, `guard b: bad tools glob "[x"`},
		{"tool_call", 1, "", "", 12, "guard b: regex.deny: patterns[0] does not compile"},
		{"output", 0, "", "provider", 15, "guard j: llm.judge: the judge needs a model"},
		{"output", 0, "", "aliases", 18, `guard j: llm.judge: model "fast" is not an alias`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if (about{g.Stage, g.Index, g.Key, g.LLMKey, g.Line, w.msgPrefix}) != w || !strings.HasPrefix(g.Msg, w.msgPrefix) {
			t.Errorf("problem %d: %+v\nwant %+v", i, g, w)
		}
	}
	// What BuildGuards prints is each problem at its file and line, as before.
	text := buildErr.Error()
	for _, p := range got[2:] {
		if line := (config.Error{File: "cell.yaml", Line: p.Line, Msg: p.Msg}).Error(); !strings.Contains(text, line) {
			t.Errorf("BuildGuards lacks %q:\n%s", line, text)
		}
	}
	// A where.when's problems are printed at their line and column in the file, as a policy
	// rule's are.
	if !strings.HasPrefix(text, "cell.yaml:8:29: guard a: where.when: Syntax error: token recognition error") ||
		!strings.Contains(text, "\ncell.yaml:8:30: guard a: where.when: Syntax error: mismatched input") {
		t.Errorf("BuildGuards' where.when problem changed:\n%s", text)
	}

	cfg.Guardrails.ToolCall, cfg.Guardrails.Output = cfg.Guardrails.ToolCall[:0], nil
	if got := CheckGuards(cfg); !reflect.DeepEqual(got, []config.GuardrailProblem(nil)) {
		t.Errorf("no guards: %+v", got)
	}
}

// A guard's where.when sees upstream_tool as the upstream's own name under either naming (an
// upstream name may hold the separator itself) and now as the clock; a where on an input or
// output guard, whose texts belong to no server or tool, is refused instead of leaving the
// guard out of every check.
func TestWhereWhenSeesTheToolAsTheRulesDo(t *testing.T) {
	const key = "AKIAIOSFODNN7EXAMPLE"
	for _, tt := range []struct {
		naming, public string
	}{
		{"bare", "get__status"},
		{"prefixed", "robot__get__status"},
	} {
		src := `gateway: {tool_names: ` + tt.naming + `}
servers:
  - {name: robot, command: robot}
guardrails:
  tool_result:
    - id: secrets
      use: secrets.scan
      where: {when: 'upstream_tool == "get__status" && now > timestamp("2000-01-01T00:00:00Z")'}
`
		cfg, err := config.Parse("cell.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		sets, err := BuildGuards(cfg)
		if err != nil {
			t.Fatalf("%s: %v", tt.naming, err)
		}
		res, _ := sets.ToolResult.CheckText(t.Context(), "robot", tt.public, "the key is "+key)
		if len(res.Findings) == 0 {
			t.Errorf("%s naming: the guard did not run on %s", tt.naming, tt.public)
		}
	}

	for _, stage := range []string{"input", "output"} {
		src := `servers:
  - {name: robot, command: robot}
guardrails:
  ` + stage + `:
    - id: secrets
      use: secrets.scan
      where: {servers: [robot]}
`
		cfg, err := config.Parse("cell.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		_, err = BuildGuards(cfg)
		want := "cell.yaml:5: guard secrets: where does not apply to " + stage + " guards"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s guard with a where: %v, want %q", stage, err, want)
		}
		if got := CheckGuards(cfg); len(got) != 1 || got[0].Key != "where" || got[0].Line != 5 {
			t.Errorf("%s guard with a where: CheckGuards %+v", stage, got)
		}
	}
}
