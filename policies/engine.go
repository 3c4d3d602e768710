package policies

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// Engine is a compiled set of rules. It is immutable and safe for concurrent use; build a new
// one to change the rules.
type Engine struct {
	adapter types.Adapter
	rules   []compiledRule
	def     string
	now     func() time.Time
	// noMatch is defaultReason(0), the reason of most default decisions, made once.
	noMatch string
}

type compiledRule struct {
	Rule
	prg     cel.Program
	enforce bool
}

// Decision is the outcome of evaluating every rule against one call.
type Decision struct {
	// Effect is the enforced decision: allow, deny or require_approval.
	Effect string
	// RuleID is the rule that decided, "" when the default did. Reason is that rule's reason
	// (saying so when the rule applied because it could not be evaluated), or why the default
	// applied.
	RuleID, Reason string
	// Default is set when no enforced rule matched and Options.Default decided.
	Default bool
	// Matched lists every enforced rule that matched, or applied because it could not be
	// evaluated, in rule order: for the audit log.
	Matched []Match
	// Shadow lists the log_only rules that matched (or would have applied by error): would-be
	// decisions, not applied.
	Shadow []Match
	// Errors lists every rule, enforced or log_only, that could not be evaluated.
	Errors []RuleError
}

// Match is one rule that matched.
type Match struct {
	RuleID, Effect, Reason string
	// ByError is set when a deny or require_approval rule applied because it could not be
	// evaluated (fail closed); Reason then says why.
	ByError bool
}

// RuleError is one rule that could not be evaluated for a call.
type RuleError struct {
	RuleID, Effect, Mode string
	Err                  string
}

// Rules returns the compiled rules, in order.
func (e *Engine) Rules() []Rule {
	out := make([]Rule, len(e.rules))
	for i := range e.rules {
		out[i] = e.rules[i].Rule
	}
	return out
}

// Default returns the decision taken when no enforced rule matches.
func (e *Engine) Default() string { return e.def }

// Evaluate evaluates every rule against the call and decides: deny > require_approval > allow >
// the default. A rule that cannot be evaluated never grants: an allow that errors does not
// match; a deny or require_approval that errors applies. When ctx is done before every rule has
// run, the rules left are treated as rules that could not be evaluated, so a cancelled call is
// never granted by accident. in is only read.
func (e *Engine) Evaluate(ctx context.Context, in *Input) Decision {
	if in == nil {
		in = &Input{}
	}
	act := &activation{e: e, in: in}
	done := ctx.Done()
	var d Decision
	// best holds, per rank (see rank), the index in d.Matched of the first match of that rank.
	best := [numRanks]int{-1, -1, -1, -1, -1}
	for i := range e.rules {
		r := &e.rules[i]
		var matchedRule bool
		var evalErr error
		select {
		case <-done:
			evalErr = fmt.Errorf("not evaluated: %w", context.Cause(ctx))
		default:
			matchedRule, evalErr = r.eval(act)
		}
		if evalErr != nil {
			d.Errors = append(d.Errors, RuleError{RuleID: r.ID, Effect: r.Effect, Mode: r.mode(), Err: evalErr.Error()})
			if r.Effect == Allow {
				continue // an allow that cannot be evaluated grants nothing
			}
		} else if !matchedRule {
			continue
		}
		m := Match{RuleID: r.ID, Effect: r.Effect, Reason: r.Reason}
		if evalErr != nil {
			m.ByError = true
			m.Reason = fmt.Sprintf("rule %s could not be evaluated (%v), so it applies", r.ID, evalErr)
			if r.Reason != "" {
				m.Reason += ": " + r.Reason
			}
		}
		if !r.enforce {
			d.Shadow = append(d.Shadow, m)
			continue
		}
		if k := rank(m); best[k] < 0 {
			best[k] = len(d.Matched)
		}
		d.Matched = append(d.Matched, m)
	}
	for _, i := range best {
		if i >= 0 {
			m := d.Matched[i]
			d.Effect, d.RuleID, d.Reason = m.Effect, m.RuleID, m.Reason
			return d
		}
	}
	d.Effect, d.Default = e.def, true
	d.Reason = e.defaultReason(len(d.Errors))
	return d
}

// Ranks of a match, strongest first: deny beats require_approval beats allow, and among matches
// of one effect a rule that matched is preferred, as the decider, to one that applied because it
// could not be evaluated, whose reason says less.
const (
	rankDeny = iota
	rankDenyByError
	rankApproval
	rankApprovalByError
	rankAllow
	numRanks
)

func rank(m Match) int {
	switch {
	case m.Effect == Deny && !m.ByError:
		return rankDeny
	case m.Effect == Deny:
		return rankDenyByError
	case m.Effect == RequireApproval && !m.ByError:
		return rankApproval
	case m.Effect == RequireApproval:
		return rankApprovalByError
	}
	return rankAllow
}

func (e *Engine) defaultReason(errors int) string {
	if errors == 0 && e.noMatch != "" {
		return e.noMatch
	}
	var b strings.Builder
	b.WriteString("no rule matched")
	if errors > 0 {
		fmt.Fprintf(&b, " (%d could not be evaluated)", errors)
	}
	fmt.Fprintf(&b, "; the default decision is %s", e.def)
	return b.String()
}

var errNoOverload = errors.New("no such overload: an operator or function got types it does not combine, " +
	"such as an int and a double (argument numbers are doubles: write 1.0, not 1)")

// eval runs one rule. An evaluation error, a result that is not a bool, or a cancelled
// evaluation is returned as an error.
func (r *compiledRule) eval(act *activation) (bool, error) {
	out, _, err := r.prg.Eval(act)
	if err != nil {
		if err.Error() == "no such overload" {
			// cel-go says no more; the usual cause deserves a hint.
			return false, errNoOverload
		}
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition gave %s, not a bool", out.Type().TypeName())
	}
	return bool(b), nil
}
