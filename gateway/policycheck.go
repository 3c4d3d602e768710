package gateway

import (
	"errors"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// CheckPolicies is every problem CompilePolicies finds in the policies of cfg, each with its
// rule or policy file, line and setting, for config.Options.CheckPolicies: mcp-gateway agent
// lists them with the file's other problems, in one pass, even when another section has
// problems too.
func CheckPolicies(cfg *config.Config) []config.PolicyProblem {
	_, problems := PolicyCheck(cfg)
	return problems
}

// PolicyCheck compiles the policy rules of cfg as CompilePolicies does and returns the compiled
// rules when they have no problem, else every problem as CheckPolicies returns it. Unlike
// CompilePolicies it still compiles the other rules when a policy file does not load, so that
// their problems are listed too. mcp-gateway check keeps the rules it compiled while loading
// the config, and so compiles them once.
func PolicyCheck(cfg *config.Config) (*policies.Engine, []config.PolicyProblem) {
	var rules []policies.Rule
	var fileOf []int // the policies.files entry of each rule from a file
	var problems []config.PolicyProblem
	for i, f := range cfg.Policies.Files {
		rs, err := policies.LoadRuleFile(f)
		if err != nil {
			problems = append(problems, fileProblems(i, f, err)...)
			continue
		}
		rules = append(rules, rs...)
		for range rs {
			fileOf = append(fileOf, i)
		}
	}
	inline := len(rules)
	for _, r := range cfg.Policies.Rules {
		rules = append(rules, policies.Rule{ID: r.ID, Effect: r.Effect, When: r.When, Reason: r.Reason, Mode: r.Mode,
			File: r.File, Line: r.Line, Column: r.Column})
	}
	engine, err := policies.Compile(rules, policies.Options{Default: cfg.Policies.Default, CostLimit: cfg.Policies.CostLimit})
	var ps *policies.Problems
	switch {
	case errors.As(err, &ps):
		for _, p := range ps.List {
			pp := config.PolicyProblem{Rule: -1, FileIndex: -1, Line: p.Line, Column: p.Column,
				Msg: policies.Problem{RuleID: p.RuleID, Msg: p.Msg}.Error()}
			switch {
			case p.Rule >= inline:
				pp.Rule, pp.Key = p.Rule-inline, p.Key
			case p.Rule >= 0:
				pp.FileIndex, pp.File = fileOf[p.Rule], p.File
			default: // of the section's settings
				pp.Key, pp.File = p.Key, p.File
				if p.Key != "" {
					pp.Msg = "policies." + p.Key + ": " + pp.Msg
				}
			}
			problems = append(problems, pp)
		}
	case err != nil:
		problems = append(problems, config.PolicyProblem{Rule: -1, FileIndex: -1, Msg: err.Error()})
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return engine, nil
}

// fileProblems are the problems LoadRuleFile returned as err for the policy file at path, entry
// i of policies.files, each at its line in that file.
func fileProblems(i int, path string, err error) []config.PolicyProblem {
	var ps *policies.Problems
	if !errors.As(err, &ps) {
		return []config.PolicyProblem{{Rule: -1, FileIndex: i, File: path, Msg: err.Error()}}
	}
	out := make([]config.PolicyProblem, 0, len(ps.List))
	for _, p := range ps.List {
		file := p.File
		if file == "" {
			file = path
		}
		out = append(out, config.PolicyProblem{Rule: -1, FileIndex: i, File: file, Line: p.Line, Column: p.Column,
			Msg: policies.Problem{RuleID: p.RuleID, Msg: p.Msg}.Error()})
	}
	return out
}
