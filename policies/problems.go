package policies

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a rule, a policy file or a test file, located where it is
// written.
type Problem struct {
	// File, Line and Column (1-based) locate the problem: for a problem in an expression, the
	// offending character itself. Line is 0 when the problem has no position; Column is 0 when
	// only the line is known.
	File         string
	Line, Column int
	// RuleID is the rule's id, when the problem belongs to a rule.
	RuleID string
	Msg    string
	// Rule is the index of the rule in the list given to Compile (-1 for a problem of no rule:
	// Compile's options', a file's), and Key the rule's setting the problem is about ("id",
	// "effect", "mode", "when"; "default" for Compile's default decision), so that a caller that
	// already reported a problem of that setting can leave this one out.
	Rule int
	Key  string
}

// Error formats the problem as "FILE:LINE:COL: rule ID: message", the form editors link to.
func (p Problem) Error() string {
	var b strings.Builder
	if pos := formatPos(p.File, p.Line, p.Column); pos != "" {
		b.WriteString(pos + ": ")
	}
	if p.RuleID != "" {
		fmt.Fprintf(&b, "rule %s: ", p.RuleID)
	}
	b.WriteString(p.Msg)
	return b.String()
}

// formatPos formats a position as FILE:LINE:COL, leaving out what is not known.
func formatPos(file string, line, col int) string {
	switch {
	case line <= 0:
		return file
	case file == "" && col > 0:
		return fmt.Sprintf("line %d, column %d", line, col)
	case file == "":
		return fmt.Sprintf("line %d", line)
	case col > 0:
		return fmt.Sprintf("%s:%d:%d", file, line, col)
	default:
		return fmt.Sprintf("%s:%d", file, line)
	}
}

// Problems is every problem found at once; Compile, LoadRuleFile and LoadTests return it (as
// *Problems) so that a caller can list them all.
type Problems struct {
	List []Problem
}

// Error lists the problems one per line.
func (e *Problems) Error() string {
	lines := make([]string, len(e.List))
	for i, p := range e.List {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, for errors.As.
func (e *Problems) Unwrap() []error {
	errs := make([]error, len(e.List))
	for i, p := range e.List {
		errs[i] = p
	}
	return errs
}
