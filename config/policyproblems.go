package config

import "strconv"

// PolicyProblem is a problem of the policies section found beyond what Parse checks itself
// (Options.CheckPolicies): a rule that does not compile, a policy file that cannot be read or
// does not parse, the default decision.
type PolicyProblem struct {
	// Rule is the inline rule's place in policies.rules (-1: the problem is no inline rule's),
	// and FileIndex the place in policies.files of the policy file it is in (-1: none).
	Rule, FileIndex int
	// Key is the setting the problem is about: the inline rule's own ("id", "effect", "mode",
	// "when"), or the section's ("default") when Rule and FileIndex are -1; "" when none.
	Key string
	// File is the file the problem is in: a policy file's path, "" for the config's own.
	File string
	// Line and Column locate the problem (0: not known; an inline rule's problem without a line
	// is at the rule's), Msg is the problem as printed after "FILE:LINE:COLUMN: " ("rule ID: …").
	Line, Column int
	Msg          string
}

// policyProblems reports the problems of check, leaving out those loading already reported: of
// an inline rule that is not a mapping, of a setting (the rule's, the section's, a policy file's
// entry) that did not decode or was refused (it is left zero, which would only repeat the
// problem).
func (d *decoder) policyProblems(cfg *Config, check func(*Config) []PolicyProblem) {
	p := &cfg.Policies
	src := d.src[p]
	for _, pp := range check(cfg) {
		if d.reportedInPolicies(cfg, pp) {
			continue
		}
		file, line := pp.File, pp.Line
		if file == "" {
			file = d.file
		}
		if line == 0 && file == d.file {
			switch {
			case pp.Rule >= 0 && pp.Rule < len(p.Rules) && d.src[&p.Rules[pp.Rule]] != nil:
				line = d.src[&p.Rules[pp.Rule]].line
			case src != nil && pp.Key != "":
				line = src.valueLine(pp.Key)
			case src != nil:
				line = src.line
			}
		}
		d.errs.List = append(d.errs.List, Error{File: file, Line: line, Column: pp.Column, Msg: pp.Msg})
	}
}

// reportedInPolicies reports whether loading already reported a problem that p would repeat.
func (d *decoder) reportedInPolicies(cfg *Config, p PolicyProblem) bool {
	var at string
	switch {
	case p.Rule >= 0:
		if p.Rule >= len(cfg.Policies.Rules) || d.src[&cfg.Policies.Rules[p.Rule]] == nil {
			return true // not a mapping
		}
		if p.Key == "" {
			return false
		}
		at = "policies.rules[" + strconv.Itoa(p.Rule) + "]." + p.Key
	case p.FileIndex >= 0:
		at = "policies.files[" + strconv.Itoa(p.FileIndex) + "]"
	case p.Key != "":
		at = "policies." + p.Key
	default:
		return false
	}
	for _, e := range d.policyErrors {
		if related(e, at) || related(at, e) {
			return true
		}
	}
	return false
}

// policiesChecked reports whether Options.CheckPolicies is called for cfg: when the policies
// section decoded as a mapping, or the file has none (the defaults are checked then).
func (d *decoder) policiesChecked(cfg *Config) bool {
	top := d.src[cfg]
	return top != nil && (!top.given("policies") || d.src[&cfg.Policies] != nil)
}
