package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a configuration file.
type Error struct {
	// File is the path the file was loaded from, as given to Load or Parse.
	File string
	// Line is 1-based; 0 when the problem belongs to no single line (a missing section).
	Line int
	// Msg says what is wrong and, where it helps, what would be valid.
	Msg string
}

// Error formats the problem as "file:line: message", the form editors and terminals link to.
func (e Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	default:
		return e.Msg
	}
}

// Errors is every problem found in one configuration file, sorted by line. Load and Parse
// return it (as *Errors) for syntax errors too, so a caller can always list the problems.
type Errors struct {
	List []Error
}

// Error lists the problems one per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, err := range e.List {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as errors, for errors.As and errors.Is.
func (e *Errors) Unwrap() []error {
	errs := make([]error, len(e.List))
	for i, err := range e.List {
		errs[i] = err
	}
	return errs
}

func (e *Errors) add(file string, line int, format string, args ...any) {
	e.List = append(e.List, Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

// sort orders the problems by line and drops exact repeats, which an alias used several times
// can produce.
func (e *Errors) sort() {
	sort.SliceStable(e.List, func(i, j int) bool { return e.List[i].Line < e.List[j].Line })
	out := e.List[:0]
	for i, err := range e.List {
		if i > 0 && err == e.List[i-1] {
			continue
		}
		out = append(out, err)
	}
	e.List = out
}

// closest returns the candidate a misspelled key most likely meant, or "" when none is close.
// Case, "-" and "_" are ignored first (callTimeoutSec, call-timeout-sec), then one edit plus one
// more per four characters of key is allowed.
func closest(key string, candidates []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	lower := strings.ToLower(key)
	best, bestDist := "", 2+len(key)/4
	for _, c := range candidates {
		if norm(c) == norm(key) {
			return c
		}
		if d := editDistance(lower, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counted in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
