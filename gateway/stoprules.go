package gateway

import (
	"fmt"
	"slices"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// No policy denies a stop tool (governor.Policy ignores such a decision), so an enforced deny or
// require_approval rule that can only ever match calls to stop tools never does anything: it
// says its author expected the stop tool to be held back, which the gateway will not do.
//
// Whether a condition can be true for some other tool is undecidable in general, so the check
// is syntactic and only says yes when it is sure: the condition is a conjunction (&&) and among
// its terms are equalities (`tool == "…"`, `tool in ["…", …]`, and the same of `server` and
// `upstream_tool`) that leave only stop tools. In CEL `false && x` is false even when x is an
// error, so such a rule cannot match, nor apply by error, for any other tool. A rule that singles
// out the stop tool in any other way (a disjunction, glob(), a negation) is not reported; it is
// ignored at run time all the same.

// StopToolRules returns a message, with the rule's file, line and column, for every enforced
// deny or require_approval rule whose condition can only ever match calls to stop tools.
func StopToolRules(cfg *config.Config, rules []policies.Rule) []string {
	stops := stopTools(cfg)
	if len(stops) == 0 {
		return nil
	}
	env, err := cel.NewEnv()
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range rules {
		if (r.Effect != policies.Deny && r.Effect != policies.RequireApproval) || r.Mode == policies.LogOnly {
			continue
		}
		parsed, iss := env.Parse(r.When)
		if iss.Err() != nil {
			continue // reported by Compile
		}
		names := onlyStopTools(parsed.NativeRep().Expr(), stops)
		if len(names) == 0 {
			continue
		}
		file := r.File
		if file == "" {
			file = cfg.Path
		}
		out = append(out, fmt.Sprintf("%s:%d:%d: policy rule %s (%s) can only ever match calls to %s, and no policy denies a stop tool or holds it for approval: "+
			"the rule never applies. Remove it, or make it mode: log_only to record those calls",
			file, r.Line, r.Column, r.ID, r.Effect, describeStops(names)))
	}
	return out
}

// stopTool is one stop tool as a rule sees it.
type stopTool struct {
	public, server, upstream string
}

// stopTools lists the configured stop tools (of physical servers: config refuses the others).
func stopTools(cfg *config.Config) []stopTool {
	var out []stopTool
	for _, s := range cfg.Servers {
		if !s.Physical {
			continue
		}
		for name, o := range s.Tools.Overrides {
			if o.Stop {
				out = append(out, stopTool{PublicName(cfg.Gateway.ToolNames, s.Name, name), s.Name, name})
			}
		}
	}
	return out
}

// onlyStopTools returns the public names of the stop tools e can match when the equalities among
// its top-level conjuncts leave only stop tools, and nil otherwise.
func onlyStopTools(e celast.Expr, stops []stopTool) []string {
	allowed := map[string][]string{} // tool, server, upstream_tool -> the values left
	for _, term := range conjuncts(e) {
		name, values, ok := equality(term)
		if !ok {
			continue
		}
		if prev, seen := allowed[name]; seen {
			values = slices.DeleteFunc(values, func(v string) bool { return !slices.Contains(prev, v) })
		}
		allowed[name] = values
	}
	if len(allowed) == 0 {
		return nil
	}
	// Every call the rule can match has a tool (or a server and an upstream tool) left by the
	// equalities; each of those must be a stop tool.
	matches := func(s stopTool) bool {
		for name, values := range allowed {
			v := map[string]string{"tool": s.public, "server": s.server, "upstream_tool": s.upstream}[name]
			if !slices.Contains(values, v) {
				return false
			}
		}
		return true
	}
	var names []string
	switch tools, byTool := allowed["tool"]; {
	case byTool:
		for _, t := range tools {
			i := slices.IndexFunc(stops, func(s stopTool) bool { return s.public == t })
			if i < 0 {
				return nil
			}
			if matches(stops[i]) {
				names = append(names, t)
			}
		}
	default:
		servers, bySrv := allowed["server"]
		ups, byUp := allowed["upstream_tool"]
		if !bySrv || !byUp {
			return nil
		}
		for _, srv := range servers {
			for _, up := range ups {
				i := slices.IndexFunc(stops, func(s stopTool) bool { return s.server == srv && s.upstream == up })
				if i < 0 {
					return nil
				}
				names = append(names, stops[i].public)
			}
		}
	}
	return names // empty when the equalities contradict each other: that rule matches nothing
}

// conjuncts flattens a && b && … into its terms.
func conjuncts(e celast.Expr) []celast.Expr {
	if e.Kind() == celast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd {
		var out []celast.Expr
		for _, a := range e.AsCall().Args() {
			out = append(out, conjuncts(a)...)
		}
		return out
	}
	return []celast.Expr{e}
}

// equality reads `v == "s"`, `"s" == v` or `v in ["s", …]` for v one of tool, server and
// upstream_tool.
func equality(e celast.Expr) (name string, values []string, ok bool) {
	if e.Kind() != celast.CallKind {
		return "", nil, false
	}
	call := e.AsCall()
	args := call.Args()
	if len(args) != 2 || call.IsMemberFunction() {
		return "", nil, false
	}
	switch call.FunctionName() {
	case operators.Equals:
		for _, pair := range [][2]celast.Expr{{args[0], args[1]}, {args[1], args[0]}} {
			if name, ok := identity(pair[0]); ok {
				if s, ok := stringLiteral(pair[1]); ok {
					return name, []string{s}, true
				}
			}
		}
	case operators.In:
		name, ok := identity(args[0])
		if !ok || args[1].Kind() != celast.ListKind {
			return "", nil, false
		}
		for _, el := range args[1].AsList().Elements() {
			s, ok := stringLiteral(el)
			if !ok {
				return "", nil, false
			}
			values = append(values, s)
		}
		return name, values, true
	}
	return "", nil, false
}

func identity(e celast.Expr) (string, bool) {
	if e.Kind() != celast.IdentKind {
		return "", false
	}
	switch name := e.AsIdent(); name {
	case "tool", "server", "upstream_tool":
		return name, true
	}
	return "", false
}

func stringLiteral(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

func describeStops(names []string) string {
	if len(names) == 1 {
		return "the stop tool " + names[0]
	}
	return fmt.Sprintf("the stop tools %v", names)
}
