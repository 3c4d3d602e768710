package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// GuardSets are the compiled guards of every stage.
type GuardSets struct {
	ToolCall, ToolResult, ToolDefinition, UpstreamContent, Input, Output *guards.Set
}

// BuildGuards compiles the guardrails of cfg, every stage, reporting every problem with file
// and line. A `where.when` expression is compiled as CEL over `server`, `tool`, `upstream_tool`
// and `now` (whenVariables).
func BuildGuards(cfg *config.Config) (*GuardSets, error) {
	sets, r := buildGuards(cfg)
	if len(r.text) > 0 {
		return nil, errors.New(strings.Join(r.text, "\n"))
	}
	return sets, nil
}

// CheckGuards is every problem BuildGuards finds in the guardrails of cfg, each with its entry,
// line and setting, for config.Options.CheckGuardrails: mcp-gateway check lists them with the
// file's other problems, in one pass, even when another section has problems too.
func CheckGuards(cfg *config.Config) []config.GuardrailProblem {
	_, r := buildGuards(cfg)
	return r.problems
}

// guardReport is what buildGuards found: each problem as BuildGuards prints it, and each as
// CheckGuards returns it.
type guardReport struct {
	text     []string
	problems []config.GuardrailProblem
}

// specKeys are the guards.Problem keys the config writes under other names.
var specKeys = map[string]string{"servers": "where.servers", "tools": "where.tools"}

func buildGuards(cfg *config.Config) (*GuardSets, guardReport) {
	var sets GuardSets
	var r guardReport
	build := func(stage guards.Stage, list []config.Guard) *guards.Set {
		specs := make([]guards.Spec, 0, len(list))
		index := make([]int, 0, len(list)) // of each spec's entry in list
		for i, g := range list {
			spec := guards.Spec{
				ID: g.ID, Use: g.Use, Action: guards.Action(g.Action), Mode: g.Mode,
				Servers: g.Where.Servers, Tools: g.Where.Tools, Parallel: g.Parallel, FailMode: g.FailMode,
				Timeout: time.Duration(g.Timeout), Enabled: g.Enabled, Settings: g.Settings, File: g.File, Line: g.Line,
			}
			if (stage == guards.StageInput || stage == guards.StageOutput) && hasWhere(g.Where) {
				// The agent's task and its answers belong to no server or tool: a where there
				// could only ever leave the guard out.
				p := config.GuardrailProblem{Stage: string(stage), Index: i, Key: "where", Line: g.Line,
					Msg: guards.Problem{Guard: g.ID, Msg: "where does not apply to " + string(stage) +
						" guards: the agent's task and its answers come from no server or tool, so the guard would never run; remove where"}.Error()}
				r.problems = append(r.problems, p)
				r.text = append(r.text, config.Error{File: g.File, Line: g.Line, Msg: p.Msg}.Error())
				continue
			}
			if g.Where.When != "" {
				when, err := compileWhen(g, cfg.Gateway.ToolNames == config.ToolNamesBare)
				if err != nil {
					problems, text := whenProblems(stage, i, g, err)
					r.text = append(r.text, text...)
					r.problems = append(r.problems, problems...)
					continue
				}
				spec.When = when
			}
			specs = append(specs, spec)
			index = append(index, i)
		}
		set, err := guards.Build(stage, specs)
		if err != nil {
			r.text = append(r.text, err.Error())
			var be *guards.BuildError
			if errors.As(err, &be) {
				for _, p := range be.Problems {
					entry := -1
					if p.Entry >= 0 && p.Entry < len(index) {
						entry = index[p.Entry]
					}
					key := p.Key
					if k, ok := specKeys[key]; ok {
						key = k
					}
					r.problems = append(r.problems, config.GuardrailProblem{Stage: string(stage), Index: entry, Key: key, Line: p.Line,
						Msg: guards.Problem{Guard: p.Guard, Msg: p.Msg}.Error()})
				}
			}
		}
		return set
	}
	g := &cfg.Guardrails
	sets.ToolCall = build(guards.StageToolCall, g.ToolCall)
	sets.ToolResult = build(guards.StageToolResult, g.ToolResult)
	sets.ToolDefinition = build(guards.StageToolDefinition, g.ToolDefinition)
	sets.UpstreamContent = build(guards.StageUpstreamContent, g.UpstreamContent)
	sets.Input = build(guards.StageInput, g.Input)
	sets.Output = build(guards.StageOutput, g.Output)
	for _, p := range judgeProblems(cfg) {
		file := g.Stages()[p.Stage][p.Index].File
		r.text = append(r.text, config.Error{File: file, Line: p.Line, Msg: p.Msg}.Error())
		r.problems = append(r.problems, p)
	}
	if len(r.text) > 0 {
		return nil, r
	}
	return &sets, r
}

func hasWhere(w config.GuardWhen) bool {
	return len(w.Servers) > 0 || len(w.Tools) > 0 || w.When != ""
}

// whenProblems are the problems of a guard's where.when that compileWhen returned as err, one
// for each of the expression's problems, at its line (and the text BuildGuards prints of each,
// at its line and column).
func whenProblems(stage guards.Stage, i int, g config.Guard, err error) ([]config.GuardrailProblem, []string) {
	var out []config.GuardrailProblem
	var text []string
	at := func(line, col int, msg string) {
		p := config.GuardrailProblem{Stage: string(stage), Index: i, Key: "where.when", Line: line,
			Msg: guards.Problem{Guard: g.ID, Msg: "where.when: " + msg}.Error()}
		out = append(out, p)
		text = append(text, config.Error{File: g.File, Line: line, Column: col, Msg: p.Msg}.Error())
	}
	var ps *policies.Problems
	if !errors.As(err, &ps) {
		at(g.Line, 0, err.Error())
		return out, text
	}
	for _, p := range ps.List {
		if p.Line == 0 {
			at(g.Line, 0, p.Msg)
			continue
		}
		at(p.Line, p.Column, p.Msg)
	}
	return out, text
}

// judgeProblems is what of the llm section the llm.judge guards of the input and output stages
// (the only ones they run in) need and do not have: a model provider, and the alias their model
// setting names. Each Msg is "guard ID: llm.judge: …" like the guards' own problems.
func judgeProblems(cfg *config.Config) []config.GuardrailProblem {
	var problems []config.GuardrailProblem
	for _, stage := range []guards.Stage{guards.StageInput, guards.StageOutput} {
		list := cfg.Guardrails.Input
		if stage == guards.StageOutput {
			list = cfg.Guardrails.Output
		}
		for i, g := range list {
			if g.Use != "llm.judge" {
				continue
			}
			at := func(llmKey string, line int, format string, args ...any) {
				problems = append(problems, config.GuardrailProblem{Stage: string(stage), Index: i, LLMKey: llmKey, Line: line,
					Msg: guards.Problem{Guard: g.ID, Msg: "llm.judge: " + fmt.Sprintf(format, args...)}.Error()})
			}
			if cfg.LLM.Provider == "" && (g.Enabled == nil || *g.Enabled) {
				at("provider", g.Line, "the judge needs a model: set llm.provider, or remove the guard")
			}
			alias, line := judgeModel(g)
			if alias == "" {
				continue
			}
			if _, ok := cfg.LLM.Aliases[alias]; ok {
				continue
			}
			if len(cfg.LLM.Aliases) == 0 {
				at("aliases", line, "model %q is not an alias of the llm section, which defines none: add it to llm.aliases, or leave model out to use the llm section's model", alias)
				continue
			}
			names := slices.Sorted(maps.Keys(cfg.LLM.Aliases))
			at("aliases", line, "model %q is not an alias of the llm section (llm.aliases: %s): add it there, or leave model out to use the llm section's model",
				alias, strings.Join(names, ", "))
		}
	}
	return problems
}

// judgeModel is the model setting of an llm.judge entry and its line (the entry's when the
// setting's is not known); "" when it has none.
func judgeModel(g config.Guard) (string, int) {
	if m := g.Settings; m != nil && m.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if k, v := m.Content[i], m.Content[i+1]; k.Value == "model" && v.Kind == yaml.ScalarNode {
				return v.Value, v.Line
			}
		}
	}
	return "", g.Line
}

// whenVariables are what a guard's where.when can read: a guard is placed on a server and tool
// (at discovery, for tool_definition guards, nothing else of a call exists), so an expression
// reading principal, args or labels is refused at load instead of seeing them empty and never
// applying the guard. now is the clock, as for the rules.
var whenVariables = []string{"server", "tool", "upstream_tool", "now"}

// compileWhen compiles a guard's `where.when` with the policy engine: one allow rule under a
// deny default, so the guard applies when the expression is true. An expression that cannot be
// evaluated applies the guard too: skipping it would let content through (fail closed). bare
// says the gateway lists tools by their upstream names (gateway.tool_names: bare), so that
// upstream_tool is the tool's name itself.
func compileWhen(g config.Guard, bare bool) (func(ctx context.Context, server, tool string) bool, error) {
	rule := policies.Rule{ID: "guard " + g.ID + " where.when", Effect: policies.Allow, When: g.Where.When,
		File: g.File, Line: g.Where.WhenLine, Column: g.Where.WhenColumn}
	if rule.Line == 0 {
		rule.Line = g.Line // a config built in code: the entry's line, if any
	}
	engine, err := policies.Compile([]policies.Rule{rule}, policies.Options{Default: policies.Deny, Variables: whenVariables})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, server, tool string) bool {
		d := engine.Evaluate(ctx, &policies.Input{Server: server, Tool: tool, UpstreamTool: upstreamName(server, tool, bare)})
		return d.Effect == policies.Allow || len(d.Errors) > 0
	}, nil
}

// upstreamName is the upstream's own name of the tool that server lists as public: the public
// name without its server's prefix (an upstream name may hold the separator itself).
func upstreamName(server, public string, bare bool) string {
	if bare {
		return public
	}
	return strings.TrimPrefix(public, server+config.PrefixSeparator)
}

// screenDefinitions runs the tool_definition guards over every string of every listed tool
// as clients see it (tool poisoning, SPEC.md §5 and §15; screen.go says what is screened): a
// finding that blocks or escalates keeps the tool out of the list and uncallable, like a
// changed pin, and is remembered for `pins list` with the path of each finding; a redaction
// replaces the text where rewriting it changes nothing the tool accepts.
func (g *Gateway) screenDefinitions(cat *Catalog, blocked map[string]bool) []Problem {
	set := g.guards.ToolDefinition
	if set == nil || set.Empty() {
		g.withheld.setTools(nil)
		return nil
	}
	var problems []Problem
	var withheld []Withheld
	for _, t := range append([]*governor.Tool(nil), cat.listed...) {
		var build func() *mcp.Tool
		var collectErr error
		s := screenTexts(context.Background(), set, t.Server, t.Public, "name", func(hide map[string]bool) []defText {
			texts, b, err := toolTexts(t.Definition, hide)
			build, collectErr = b, err
			return texts
		})
		if collectErr != nil {
			s = screened{withheld: true, reason: "its schemas cannot be read for screening: " + collectErr.Error()}
		}
		if g.guardMetrics != nil {
			g.guardMetrics.Observe(guards.StageToolDefinition, s.res)
		}
		if !s.withheld {
			if s.res.Action == guards.ActionRedact {
				t.Definition = build()
			}
			continue
		}
		msg := withheldMessage(KindTool, t.Server, t.Public, s)
		cat.Quarantine(t.Public, msg+".")
		blocked[t.Public] = true
		tool := t.Upstream
		if s.nameFlagged {
			tool = ""
		}
		problems = append(problems, Problem{Server: t.Server, Tool: tool, Msg: msg})
		withheld = append(withheld, withheldEntry(KindTool, t.Server, t.Upstream, s))
	}
	g.withheld.setTools(withheld)
	return problems
}
