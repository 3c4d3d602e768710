package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// TestCase is one policy test: a call and the decision the rules must reach for it.
type TestCase struct {
	Name   string   `yaml:"name"`
	Call   TestCall `yaml:"call"`
	Expect Expect   `yaml:"expect"`
	// File and Line locate the case in its test file, for messages.
	File string `yaml:"-"`
	Line int    `yaml:"-"`
}

// TestCall is the call of a test case: what Evaluate sees as its Input.
type TestCall struct {
	Tool string `yaml:"tool"`
	// Server and UpstreamTool default to the parts of a prefixed Tool ("robot__wait" is server
	// robot, upstream tool wait); for a tool name without "__", UpstreamTool defaults to Tool.
	Server       string          `yaml:"server"`
	UpstreamTool string          `yaml:"upstream_tool"`
	Args         map[string]any  `yaml:"args"`
	Principal    Principal       `yaml:"principal"`
	Labels       map[string]bool `yaml:"labels"`
	State        State           `yaml:"state"`
	ToolMeta     ToolMeta        `yaml:"tool_meta"`
	SessionCalls int64           `yaml:"session_calls"`
	// Rate is the recent calls the case stands for: rate.principal.calls_1m and so on.
	Rate Rate `yaml:"rate"`
}

// Expect is the decision a test case expects.
type Expect struct {
	// Decision is allow, deny or require_approval.
	Decision string `yaml:"decision"`
	// Rule, when set, is the id of the rule that must decide.
	Rule string `yaml:"rule"`
}

// TestFailure is a test case whose decision differed from the expected one.
type TestFailure struct {
	Case TestCase
	Got  Decision
	// Msg says where the case is, what was expected and what the rules decided and why: which
	// rules matched, which could not be evaluated, which shadow rules matched.
	Msg string
}

// testFile is the shape of a policy test file.
type testFile struct {
	Tests []TestCase `yaml:"tests"`
}

// LoadTests reads a policy test file:
//
//	tests:
//	  - name: a planner may not pick
//	    call:
//	      tool: robot__pick_object
//	      args: {object: red_cup}
//	      principal: {id: planner-1, roles: [planner]}
//	      tool_meta: {physical: true}
//	    expect: {decision: deny, rule: planner-no-actuation}
//
// strictly: an unknown or duplicate key, a value of the wrong type, a case without a name or a
// tool, a duplicate name, an unknown decision, or arguments that are not JSON values are errors,
// all reported (as *Problems) with the file and line.
func LoadTests(path string) ([]TestCase, error) {
	var tf testFile
	f := readYAML(path, &tf)
	if f.root == nil || len(f.problems) > 0 {
		return nil, f.err()
	}
	items := f.items("tests")
	if len(tf.Tests) == 0 || len(items) != len(tf.Tests) {
		f.problemf(lineOf(f.root, "tests"), 0, "no test cases: a test file is a mapping with a list under tests:")
		return nil, f.err()
	}
	names := map[string]int{}
	for i := range tf.Tests {
		tc, item := &tf.Tests[i], items[i]
		tc.File, tc.Line = path, item.Line
		call := valueOf(item, "call")
		switch first, dup := names[tc.Name]; {
		case strings.TrimSpace(tc.Name) == "":
			f.problemf(item.Line, 0, "the test case has no name")
		case dup:
			f.problemf(lineOf(item, "name"), 0, "test case %q: the name is also used at line %d", tc.Name, first)
		default:
			names[tc.Name] = item.Line
		}
		if tc.Call.Tool == "" {
			f.problemf(lineOf(item, "call"), 0, "test case %q: call.tool is missing", tc.Name)
		}
		if _, err := json.Marshal(tc.Call.Args); err != nil {
			f.problemf(lineOf(call, "args"), 0, "test case %q: call.args cannot be sent as JSON: %v", tc.Name, err)
		}
		switch tc.Expect.Decision {
		case Allow, Deny, RequireApproval:
		default:
			f.problemf(lineOf(valueOf(item, "expect"), "decision"), 0,
				"test case %q: expect.decision must be allow, deny or require_approval, not %q", tc.Name, tc.Expect.Decision)
		}
		server, upstream, prefixed := strings.Cut(tc.Call.Tool, "__")
		if !prefixed {
			server, upstream = "", tc.Call.Tool
		}
		if tc.Call.Server == "" {
			tc.Call.Server = server
		}
		if tc.Call.UpstreamTool == "" {
			tc.Call.UpstreamTool = upstream
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return tf.Tests, nil
}

// Input returns the Input a test call stands for, in session "test".
func (c *TestCall) Input() (*Input, error) {
	args, err := json.Marshal(c.Args)
	if err != nil {
		return nil, err
	}
	if c.Args == nil {
		args = nil
	}
	return &Input{
		Tool: c.Tool, Server: c.Server, UpstreamTool: c.UpstreamTool,
		Args:      args,
		Principal: c.Principal,
		Session:   Session{ID: "test", Calls: c.SessionCalls},
		ToolMeta:  c.ToolMeta,
		Labels:    c.Labels,
		State:     c.State,
		Rate:      c.Rate,
	}, nil
}

// RunTests evaluates every case and returns those whose decision (or deciding rule, when the
// case names one) differs from the expectation, in order. A case that names a rule the engine
// does not have fails too.
func RunTests(e *Engine, cases []TestCase) []TestFailure {
	ids := map[string]bool{}
	for _, r := range e.rules {
		ids[r.ID] = true
	}
	var failures []TestFailure
	for _, tc := range cases {
		in, err := tc.Call.Input()
		if err != nil {
			failures = append(failures, TestFailure{Case: tc, Msg: fmt.Sprintf("%s: call.args: %v", caseName(tc), err)})
			continue
		}
		got := e.Evaluate(context.Background(), in)
		var why string
		switch {
		case tc.Expect.Rule != "" && !ids[tc.Expect.Rule]:
			why = fmt.Sprintf("expects rule %s, which is not among the rules", tc.Expect.Rule)
		case got.Effect != tc.Expect.Decision:
			why = "want " + tc.Expect.Decision
			if tc.Expect.Rule != "" {
				why += " by rule " + tc.Expect.Rule
			}
		case tc.Expect.Rule != "" && got.RuleID != tc.Expect.Rule:
			why = fmt.Sprintf("want %s by rule %s", tc.Expect.Decision, tc.Expect.Rule)
		default:
			continue
		}
		failures = append(failures, TestFailure{Case: tc, Got: got,
			Msg: fmt.Sprintf("%s: got %s; %s\n%s", caseName(tc), describe(got), why, explain(got))})
	}
	return failures
}

func caseName(tc TestCase) string {
	return fmt.Sprintf("%s: test %q", formatPos(tc.File, tc.Line, 0), tc.Name)
}

// describe says what was decided and by what.
func describe(d Decision) string {
	if d.Default {
		return fmt.Sprintf("%s by default (%s)", d.Effect, d.Reason)
	}
	if d.Reason == "" {
		return fmt.Sprintf("%s by rule %s (which gives no reason)", d.Effect, d.RuleID)
	}
	return fmt.Sprintf("%s by rule %s (%s)", d.Effect, d.RuleID, d.Reason)
}

// explain lists the rules that matched, could not be evaluated, or matched in shadow mode.
func explain(d Decision) string {
	var b strings.Builder
	list := func(title string, matches []Match) {
		if len(matches) == 0 {
			return
		}
		parts := make([]string, len(matches))
		for i, m := range matches {
			parts[i] = m.Effect + " " + m.RuleID
			if m.ByError {
				parts[i] += " (by error)"
			}
		}
		fmt.Fprintf(&b, "    %s: %s\n", title, strings.Join(parts, ", "))
	}
	list("matched", d.Matched)
	if len(d.Matched) == 0 {
		b.WriteString("    matched: no rule\n")
	}
	for _, re := range d.Errors {
		fmt.Fprintf(&b, "    could not evaluate %s %s (%s): %s\n", re.Effect, re.RuleID, re.Mode, re.Err)
	}
	list("shadow (log_only, not applied)", d.Shadow)
	return strings.TrimRight(b.String(), "\n")
}
