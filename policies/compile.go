package policies

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
)

// Compile checks and compiles every rule once. It returns a *Problems listing every problem
// it finds (not just the first): a CEL syntax or type error, an expression that is not boolean,
// a literal glob pattern that is malformed, a statically estimated cost above
// Options.MaxEstimatedCost (or one that could never fit Options.CostLimit), an empty or duplicate
// id, an unknown effect or mode, and unknown options.
func Compile(rules []Rule, opts Options) (*Engine, error) {
	c := compiler{opts: opts}
	c.defaults()
	e := &Engine{def: c.opts.Default, now: c.opts.Now}
	e.noMatch = e.defaultReason(0)
	// Without rules there is nothing to check or to evaluate, and the CEL environment is not
	// built: a gateway without policies then never runs cel-go's set-up, about 0.5 MB of its
	// idle resident memory (docs/benchmarks.md, "Idle RSS"). The adapter is only read when a
	// rule resolves a variable.
	if len(rules) > 0 {
		env, err := newEnv(c.opts.Variables)
		if err != nil {
			return nil, fmt.Errorf("policies: building the CEL environment: %w", err)
		}
		e.adapter = env.CELTypeAdapter()
		seen := map[string]*Rule{}
		for i := range rules {
			r := &rules[i]
			c.index = i
			if cr, ok := c.rule(env, r, seen); ok {
				e.rules = append(e.rules, cr)
			}
		}
	}
	if len(c.problems) > 0 {
		return nil, &Problems{List: c.problems}
	}
	return e, nil
}

type compiler struct {
	opts     Options
	problems []Problem
	index    int // of the rule being compiled in the list given to Compile
}

func (c *compiler) defaults() {
	switch c.opts.Default {
	case "":
		c.opts.Default = Allow
	case Allow, Deny:
	default:
		c.problems = append(c.problems, Problem{
			Msg: fmt.Sprintf("the default decision must be allow or deny, not %q", c.opts.Default), Rule: -1, Key: "default",
		})
	}
	if c.opts.CostLimit == 0 {
		c.opts.CostLimit = DefaultCostLimit
	}
	if c.opts.MaxEstimatedCost == 0 {
		c.opts.MaxEstimatedCost = DefaultMaxEstimatedCost
	}
	if c.opts.Now == nil {
		c.opts.Now = time.Now
	}
}

// problem records a problem of r's when at byte offset off of it.
func (c *compiler) problem(r *Rule, off int, format string, args ...any) {
	c.problemOf(r, "when", off, format, args...)
}

// problemOf records a problem of r's setting key, at byte offset off of r.When.
func (c *compiler) problemOf(r *Rule, key string, off int, format string, args ...any) {
	line, col := r.position(off)
	if r.Line == 0 && r.File != "" {
		line, col = 0, 0 // a position inside the expression would read as one in the file
	}
	c.problems = append(c.problems, Problem{
		File: r.File, Line: line, Column: col, RuleID: r.ID, Msg: fmt.Sprintf(format, args...), Rule: c.index, Key: key,
	})
}

// ruleProblem records a problem of r's setting key, at the start of its expression.
func (c *compiler) ruleProblem(r *Rule, key, format string, args ...any) {
	c.problemOf(r, key, 0, format, args...)
}

func (c *compiler) rule(env *cel.Env, r *Rule, seen map[string]*Rule) (compiledRule, bool) {
	before := len(c.problems)
	switch first, dup := seen[r.ID]; {
	case strings.TrimSpace(r.ID) == "":
		c.ruleProblem(r, "id", "the rule has no id; give every rule a unique id")
	case dup:
		c.ruleProblem(r, "id", "duplicate rule id; it is also the id of the rule at %s", where(first))
	default:
		seen[r.ID] = r
	}
	switch r.Effect {
	case Allow, Deny, RequireApproval:
	case "":
		c.ruleProblem(r, "effect", "effect is missing; use allow, deny or require_approval")
	default:
		c.ruleProblem(r, "effect", "unknown effect %q; use allow, deny or require_approval", r.Effect)
	}
	switch r.Mode {
	case "", Enforce, LogOnly:
	default:
		c.ruleProblem(r, "mode", "unknown mode %q; use enforce or log_only", r.Mode)
	}
	if strings.TrimSpace(r.When) == "" {
		c.ruleProblem(r, "when", "when is empty; write the CEL condition under which the rule applies")
		return compiledRule{}, false
	}

	checked, iss := env.Compile(r.When)
	if iss.Err() != nil {
		for _, err := range iss.Errors() {
			c.problem(r, r.offsetOf(err.Location), "%s", c.explain(err.Message))
		}
		return compiledRule{}, false
	}
	start := len(r.When) - len(strings.TrimLeftFunc(r.When, unicode.IsSpace))
	if out := checked.OutputType(); out.Kind() != types.BoolKind && out.Kind() != types.DynKind {
		c.problem(r, start, "the expression has type %s, not bool; a rule's condition must be true or false", out)
	}
	c.checkGlobs(r, checked)
	loops := hasComprehension(checked)
	est, err := env.EstimateCost(checked, sizeEstimator{})
	switch {
	case err != nil:
		c.problem(r, start, "cannot estimate the cost of the expression: %v", err)
	case loops && est.Min > c.opts.CostLimit:
		c.problem(r, start, "the expression costs at least %d, above the runtime cost limit of %d, so it could never be evaluated", est.Min, c.opts.CostLimit)
	case est.Max > c.opts.MaxEstimatedCost:
		c.problem(r, start, "the estimated worst-case cost %d is above the bound of %d (the estimate assumes strings, lists and maps of up to %d elements); avoid nested comprehensions over the arguments", est.Max, c.opts.MaxEstimatedCost, AssumedMaxSize)
	}
	if len(c.problems) > before {
		return compiledRule{}, false
	}
	popts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if loops {
		popts = append(popts, cel.CostLimit(c.opts.CostLimit))
	}
	prg, err := env.Program(checked, popts...)
	if err != nil {
		c.ruleProblem(r, "when", "cannot plan the expression: %v", err)
		return compiledRule{}, false
	}
	return compiledRule{Rule: *r, prg: prg, enforce: r.mode() == Enforce}, true
}

// explain rewords the checker's message for a variable of SPEC.md §8 that Options.Variables
// leaves out: to CEL it is undeclared, to the person who wrote it a name the rules know.
func (c *compiler) explain(msg string) string {
	name, ok := strings.CutPrefix(msg, "undeclared reference to '")
	if !ok || c.opts.Variables == nil {
		return msg
	}
	name, _, _ = strings.Cut(name, "'")
	name = strings.TrimPrefix(name, ".") // .principal: the name in the root scope
	if !slices.Contains(variableNames, name) || slices.Contains(c.opts.Variables, name) {
		return msg
	}
	return fmt.Sprintf("%s is not known here: this expression can read only %s", name, strings.Join(c.opts.Variables, ", "))
}

// hasComprehension reports whether the expression loops (all, exists, exists_one, map, filter).
// Only such rules are evaluated with the runtime cost limit: without a loop, CEL evaluates each
// node of an expression at most once and every operation is at most linear in the size of its
// operands, so such a rule cannot run away and the static estimate already bounds it. Tracking
// the cost of every operation would take a third of the time of a whole decision.
func hasComprehension(checked *cel.Ast) bool {
	found := false
	ast.PostOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.ComprehensionKind {
			found = true
		}
	}))
	return found
}

// checkGlobs refuses a malformed literal pattern of glob(pattern, s) at load, where it is written,
// instead of failing every call.
func (c *compiler) checkGlobs(r *Rule, checked *cel.Ast) {
	native := checked.NativeRep()
	ast.PostOrderVisit(native.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != "glob" || len(e.AsCall().Args()) != 2 {
			return
		}
		arg := e.AsCall().Args()[0]
		if arg.Kind() != ast.LiteralKind {
			return
		}
		p, ok := arg.AsLiteral().(types.String)
		if !ok {
			return
		}
		if _, err := path.Match(string(p), ""); err != nil {
			c.problem(r, r.offsetOf(native.SourceInfo().GetStartLocation(arg.ID())), "glob: malformed pattern %q", string(p))
		}
	}))
}

// where is the position of a rule's expression, for messages that point at another rule.
func where(r *Rule) string {
	line, col := r.position(0)
	if r.Line == 0 && r.File != "" {
		line = 0
	}
	return formatPos(r.File, line, col)
}

// offsetOf converts a CEL location (1-based line, 0-based column in characters) into a byte
// offset of r.When.
func (r *Rule) offsetOf(loc common.Location) int {
	if loc == nil || loc.Line() < 1 {
		return 0
	}
	off := 0
	for line := 1; line < loc.Line(); line++ {
		nl := strings.IndexByte(r.When[off:], '\n')
		if nl < 0 {
			return len(r.When)
		}
		off += nl + 1
	}
	for col := 0; col < loc.Column() && off < len(r.When) && r.When[off] != '\n'; col++ {
		_, size := utf8.DecodeRuneInString(r.When[off:])
		off += size
	}
	return off
}

// position maps byte offset off of r.When to a line and column (1-based, in characters) of the
// rule's file.
func (r *Rule) position(off int) (line, col int) {
	var segs []segment
	if r.segments != nil {
		segs = *r.segments
	} else {
		segs = r.lineSegments()
	}
	s := segs[0]
	for _, next := range segs[1:] {
		if next.off > off {
			break
		}
		s = next
	}
	off = min(max(off, s.off), len(r.When))
	return s.line, s.col + utf8.RuneCountInString(r.When[s.off:off])
}

// lineSegments is the mapping when nothing but the start of When is known: every line of the
// expression starts at the column of its first line, as in a YAML literal block scalar. Without
// a start position the expression's own lines and columns are used.
func (r *Rule) lineSegments() []segment {
	line, col := r.Line, r.Column
	if line < 1 {
		line = 1
	}
	if col < 1 {
		col = 1
	}
	segs := []segment{{off: 0, line: line, col: col}}
	for off, l := 0, line; ; {
		nl := strings.IndexByte(r.When[off:], '\n')
		if nl < 0 {
			return segs
		}
		off += nl + 1
		l++
		segs = append(segs, segment{off: off, line: l, col: col})
	}
}
