package policies

// ruleFile is the shape of a policy file.
type ruleFile struct {
	Rules []struct {
		ID     string `yaml:"id"`
		Effect string `yaml:"effect"`
		When   string `yaml:"when"`
		Reason string `yaml:"reason"`
		Mode   string `yaml:"mode"`
	} `yaml:"rules"`
}

// LoadRuleFile reads a policy file:
//
//	rules:
//	  - id: arm-speed-cap
//	    effect: deny
//	    when: 'server == "arm" && args[?"speed"].orValue(0.0) > 1.5'
//	    reason: arm speed above 1.5 m/s
//	    mode: enforce
//
// strictly: an unknown or duplicate key or a value of the wrong type is an error, and every
// problem is reported (as *Problems) with the file and line. Each rule's File, Line and Column
// locate its `when` text (for a block scalar, the first character of the text; its later lines
// are mapped too), so Compile reports problems in an expression where they are written. The
// rules are not compiled here.
func LoadRuleFile(path string) ([]Rule, error) {
	var rf ruleFile
	f := readYAML(path, &rf)
	if f.root == nil || len(f.problems) > 0 {
		return nil, f.err()
	}
	items := f.items("rules")
	if len(rf.Rules) == 0 || len(items) != len(rf.Rules) {
		f.problemf(lineOf(f.root, "rules"), 0, "no rules: a policy file is a mapping with a list under rules:")
		return nil, f.err()
	}
	rules := make([]Rule, len(rf.Rules))
	for i, r := range rf.Rules {
		rule := Rule{ID: r.ID, Effect: r.Effect, When: r.When, Reason: r.Reason, Mode: r.Mode, File: path}
		if when := valueOf(items[i], "when"); when != nil {
			var segs []segment
			rule.Line, rule.Column, segs = f.scalarStart(when)
			if len(segs) > 0 {
				rule.segments = &segs
			}
		} else {
			rule.Line, rule.Column = items[i].Line, items[i].Column
		}
		rules[i] = rule
	}
	return rules, nil
}
