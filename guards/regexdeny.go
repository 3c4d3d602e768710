package guards

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlclark/regexp2/v2"
	"go.yaml.in/yaml/v3"
)

// regex.deny flags content that matches any of the configured patterns and blocks by default.
// Patterns use the syntax Python and JavaScript share (ECMAScript, run by regexp2, so
// lookarounds and backreferences work); \w, \d and \b are ASCII. A backtracking engine can
// take exponential time on a bad pattern, so every match runs under a timeout (the entry's
// timeout, DefaultTimeout without one) and a backtracking-stack limit; a match that hits either
// is an error of the guard, handled by fail_mode. Earlier patterns win overlaps, and each
// finding's category is the pattern's position: pattern[0], pattern[1], ….

// RegexDenySettings are the settings of regex.deny.
type RegexDenySettings struct {
	// Patterns are the regular expressions; at least one.
	Patterns []string `yaml:"patterns" json:"patterns" jsonschema:"required,minItems=1,description=Regular expressions (ECMAScript syntax\\, the one Python and JavaScript share)."`
	// IgnoreCase matches regardless of case.
	IgnoreCase bool `yaml:"ignore_case" json:"ignore_case,omitempty" jsonschema:"description=Match regardless of case (default false)."`
	// Replacement is the redaction text, used with action: redact.
	Replacement *string `yaml:"replacement" json:"replacement,omitempty" jsonschema:"description=Redaction text used with action: redact (default [REDACTED])."`
}

// regexBacktrackLimit bounds the backtracking stack of one match (in stack slots), so a pattern
// cannot take memory in proportion to the input before its timeout fires.
const regexBacktrackLimit = 100_000

type regexDeny struct {
	res         []*regexp2.Regexp
	categories  []string
	replacement string
	timeout     time.Duration
}

func newRegexDeny(node *yaml.Node) (Guard, error) {
	var s RegexDenySettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	var errs SettingErrors
	if len(s.Patterns) == 0 {
		errs.add(lineOf(node, "patterns"), "patterns: at least one regular expression is needed")
	}
	opts := regexp2.ECMAScript
	if s.IgnoreCase {
		opts |= regexp2.IgnoreCase
	}
	g := &regexDeny{replacement: defaultReplacement}
	if s.Replacement != nil {
		g.replacement = *s.Replacement
	}
	for i, p := range s.Patterns {
		re, err := regexp2.Compile(p, opts, regexp2.OptionMaxBacktrackingStackSize(regexBacktrackLimit))
		if err != nil {
			errs.add(itemLine(node, "patterns", i), "patterns[%d] does not compile: %v", i, err)
			continue
		}
		g.res = append(g.res, re)
		g.categories = append(g.categories, "pattern["+strconv.Itoa(i)+"]")
	}
	g.SetTimeout(DefaultTimeout)
	return g, errs.err()
}

// SetTimeout sets the match timeout of every pattern.
func (g *regexDeny) SetTimeout(d time.Duration) {
	g.timeout = d
	for _, re := range g.res {
		re.MatchTimeout = d
	}
}

func (g *regexDeny) DefaultAction() Action { return ActionBlock }
func (g *regexDeny) Stages() []Stage       { return allStages }

func (g *regexDeny) Redact(text string, spans []Span) string {
	return Redact(text, spans, fixed(g.replacement))
}

func (*regexDeny) pollsContext() {}

func (g *regexDeny) Scan(ctx context.Context, text string) ([]Span, error) {
	var found []Span
	for i, re := range g.res {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		idx, err := re.FindAllStringIndex(text, -1)
		if err != nil {
			return nil, g.matchError(i, err)
		}
		var spans []Span
		for _, m := range idx {
			if m[0] < m[1] { // an empty match flags nothing
				spans = append(spans, Span{Start: m[0], End: m[1], Category: g.categories[i]})
			}
		}
		found = claim(found, spans)
	}
	return found, nil
}

// matchError names what stopped a match. regexp2's own timeout error quotes the whole input,
// so it is never passed on.
func (g *regexDeny) matchError(i int, err error) error {
	if errors.Is(err, regexp2.ErrBacktrackingStackLimit) {
		return fmt.Errorf("%s exceeded the backtracking limit", g.categories[i])
	}
	return fmt.Errorf("%s: match timeout after %v", g.categories[i], g.timeout)
}
