package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// GuardSets are the compiled guards of every stage.
type GuardSets struct {
	ToolCall, ToolResult, ToolDefinition, Input, Output *guards.Set
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
	sets.Input = build(guards.StageInput, g.Input)
	sets.Output = build(guards.StageOutput, g.Output)
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return &sets, nil
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

// screenDefinitions runs the tool_definition guards on every listed tool's description (tool
// poisoning, SPEC.md §5): a description a guard blocks or escalates keeps the tool out of the
// list, like a changed pin; a redacting guard's redaction replaces the description.
func (g *Gateway) screenDefinitions(cat *Catalog) []Problem {
	set := g.guards.ToolDefinition
	if set == nil || set.Empty() {
		return nil
	}
	var problems []Problem
	for _, t := range append([]*governor.Tool(nil), cat.listed...) {
		text := t.Definition.Description
		if t.Definition.Title != "" {
			text = t.Definition.Title + "\n" + text
		}
		r, redacted := set.CheckText(context.Background(), t.Server, t.Public, text)
		if g.guardMetrics != nil {
			g.guardMetrics.Observe(guards.StageToolDefinition, r)
		}
		switch r.Action {
		case guards.ActionBlock, guards.ActionEscalate:
			reason := fmt.Sprintf("tool %s is withheld: its description failed a tool_definition guard (%s). "+
				"An operator must review the upstream server %s; the tool returns once its description passes.", t.Public, r.Reason, t.Server)
			cat.Quarantine(t.Public, reason)
			problems = append(problems, Problem{Server: t.Server, Tool: t.Upstream, Msg: reason})
		case guards.ActionRedact:
			def := *t.Definition
			if t.Definition.Title != "" {
				title, desc, _ := strings.Cut(redacted, "\n")
				def.Title, def.Description = title, desc
			} else {
				def.Description = redacted
			}
			t.Definition = &def
		}
	}
	return problems
}
