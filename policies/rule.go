package policies

import (
	"time"
)

// Effects a rule can have, and the decisions Evaluate returns.
const (
	Allow           = "allow"
	Deny            = "deny"
	RequireApproval = "require_approval"
)

// Modes of a rule.
const (
	// Enforce rules decide (the default when Mode is empty).
	Enforce = "enforce"
	// LogOnly rules are shadow rules: evaluated and reported as would-be decisions, never applied.
	LogOnly = "log_only"
)

// Defaults of Options.
const (
	// DefaultCostLimit is the runtime cost limit of one rule evaluation, in CEL cost units (about
	// one per variable access, comparison or comprehension step).
	DefaultCostLimit uint64 = 10_000
	// DefaultMaxEstimatedCost is the bound on a rule's statically estimated worst-case cost.
	DefaultMaxEstimatedCost uint64 = 1_000_000
	// AssumedMaxSize is how long the cost estimate assumes any string, list or map in a call can
	// be (characters or elements): the estimate needs a bound, and a call's arguments are small.
	AssumedMaxSize uint64 = 4096
)

// Rule is one policy rule as written in a policy file or in the configuration.
type Rule struct {
	// ID names the rule in decisions, audit records, metrics and test expectations. Unique.
	ID string
	// Effect is allow, deny or require_approval.
	Effect string
	// When is the CEL expression; the rule matches when it evaluates to true.
	When string
	// Reason is what a refused caller (and the audit log) is told.
	Reason string
	// Mode is enforce (the default when empty) or log_only.
	Mode string

	// File, Line and Column locate the first character of When in its YAML file (1-based), so
	// problems are reported where they are written. For a block scalar (| or >) that is the first
	// character of its text on the line after the indicator; the expression's own line breaks
	// are assumed to keep the block's indentation (true of | blocks). Zero values are allowed:
	// messages then carry the position inside the expression only.
	File         string
	Line, Column int

	// segments maps byte offsets of When to file positions when LoadRuleFile could work them out
	// from the file's text (block scalars); nil means the Line/Column rule above. A pointer, so
	// that Rule stays comparable.
	segments *[]segment
}

// segment says that the text of When from byte offset off on starts at line, col of the file.
type segment struct {
	off, line, col int
}

// Options configure Compile.
type Options struct {
	// Default is the decision when no enforced rule matches: allow (when empty) or deny.
	Default string
	// CostLimit is the runtime cost limit of one evaluation of a rule that loops (has a
	// comprehension: all, exists, exists_one, map, filter); 0 means DefaultCostLimit. A rule that
	// exceeds it stops and counts as unevaluable (fail closed). Rules without a loop are not
	// metered: they evaluate each node once and are bounded by the static estimate.
	CostLimit uint64
	// MaxEstimatedCost is the largest statically estimated worst-case cost a rule may have (the
	// estimate assumes every string, list and map is at most AssumedMaxSize long); 0 means
	// DefaultMaxEstimatedCost. It refuses at load what could only fail at run time, such as a
	// comprehension nested in a comprehension over the arguments.
	MaxEstimatedCost uint64
	// Now returns the time a rule sees as `now`; nil means time.Now.
	Now func() time.Time
	// Variables, when not nil, are the only variables the rules may read (of those SPEC.md §8
	// declares): a rule that reads another is refused at load. It is for expressions evaluated
	// where only part of a call is known, such as a guard's where.when, which sees the server
	// and tool names alone: there a rule reading principal would see it empty and quietly
	// decide on nothing.
	Variables []string
}

func (r *Rule) mode() string {
	if r.Mode == "" {
		return Enforce
	}
	return r.Mode
}
