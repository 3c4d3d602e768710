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
// and line. A `where.when` expression is compiled as CEL over `server` and `tool`.
func BuildGuards(cfg *config.Config) (*GuardSets, error) {
	var sets GuardSets
	var errs []string
	build := func(stage guards.Stage, list []config.Guard) *guards.Set {
		specs := make([]guards.Spec, 0, len(list))
		for _, g := range list {
			spec := guards.Spec{
				ID: g.ID, Use: g.Use, Action: guards.Action(g.Action), Mode: g.Mode,
				Servers: g.Where.Servers, Tools: g.Where.Tools, Parallel: g.Parallel, FailMode: g.FailMode,
				Timeout: time.Duration(g.Timeout), Enabled: g.Enabled, Settings: g.Settings, File: g.File, Line: g.Line,
			}
			if g.Where.When != "" {
				when, err := compileWhen(g)
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				spec.When = when
			}
			specs = append(specs, spec)
		}
		set, err := guards.Build(stage, specs)
		if err != nil {
			errs = append(errs, err.Error())
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
	errs = append(errs, judgeProblems(cfg)...)
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return &sets, nil
}

// judgeProblems is what of the llm section the llm.judge guards of the input and output stages
// (the only ones they run in) need and do not have: a model provider, and the alias their model
// setting names. Each is "FILE:LINE: guard ID: llm.judge: …" like the guards' own problems.
func judgeProblems(cfg *config.Config) []string {
	var problems []string
	for _, g := range slices.Concat(cfg.Guardrails.Input, cfg.Guardrails.Output) {
		if g.Use != "llm.judge" {
			continue
		}
		at := func(line int, format string, args ...any) {
			problems = append(problems, guards.Problem{File: g.File, Line: line, Guard: g.ID, Msg: "llm.judge: " + fmt.Sprintf(format, args...)}.Error())
		}
		if cfg.LLM.Provider == "" && (g.Enabled == nil || *g.Enabled) {
			at(g.Line, "the judge needs a model: set llm.provider, or remove the guard")
		}
		alias, line := judgeModel(g)
		if alias == "" {
			continue
		}
		if _, ok := cfg.LLM.Aliases[alias]; ok {
			continue
		}
		if len(cfg.LLM.Aliases) == 0 {
			at(line, "model %q is not an alias of the llm section, which defines none: add it to llm.aliases, or leave model out to use the llm section's model", alias)
			continue
		}
		names := slices.Sorted(maps.Keys(cfg.LLM.Aliases))
		at(line, "model %q is not an alias of the llm section (llm.aliases: %s): add it there, or leave model out to use the llm section's model",
			alias, strings.Join(names, ", "))
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

// compileWhen compiles a guard's `where.when` with the policy engine: one allow rule under a
// deny default, so the guard applies when the expression is true. An expression that cannot be
// evaluated applies the guard too: skipping it would let content through (fail closed).
func compileWhen(g config.Guard) (func(ctx context.Context, server, tool string) bool, error) {
	engine, err := policies.Compile([]policies.Rule{{ID: "guard " + g.ID + " where.when", Effect: policies.Allow, When: g.Where.When, File: g.File, Line: g.Line}},
		policies.Options{Default: policies.Deny})
	if err != nil {
		return nil, fmt.Errorf("guard %s: where.when: %w", g.ID, err)
	}
	return func(ctx context.Context, server, tool string) bool {
		d := engine.Evaluate(ctx, &policies.Input{Server: server, Tool: tool, UpstreamTool: upstreamPart(tool)})
		return d.Effect == policies.Allow || len(d.Errors) > 0
	}, nil
}

func upstreamPart(public string) string {
	if _, after, ok := strings.Cut(public, config.PrefixSeparator); ok {
		return after
	}
	return public
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
