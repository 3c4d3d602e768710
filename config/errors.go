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
	// Column is 1-based; 0 when only the line is known (every problem but a policy rule's).
	Column int
	// Msg says what is wrong and, where it helps, what would be valid.
	Msg string
}

// Error formats the problem as "file:line: message" ("file:line:column: message" when the
// column is known), the form editors and terminals link to.
func (e Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
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

// Errors is every problem found in one configuration file, sorted by line, then those of the
// policy files it names (Options.CheckPolicies), each file's sorted by line. Load and Parse
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

// sort orders the problems by file (those of main first, then the others in the order they
// were found) and line, and drops exact repeats, which an alias used several times can produce.
func (e *Errors) sort(main string) {
	rank := map[string]int{main: 0}
	for _, err := range e.List {
		if _, ok := rank[err.File]; !ok {
			rank[err.File] = len(rank)
		}
	}
	sort.SliceStable(e.List, func(i, j int) bool {
		a, b := e.List[i], e.List[j]
		if ra, rb := rank[a.File], rank[b.File]; ra != rb {
			return ra < rb
		}
		return a.Line < b.Line
	})
	out := e.List[:0]
	for i, err := range e.List {
		if i > 0 && err == e.List[i-1] {
			continue
		}
		out = append(out, err)
	}
	e.List = out
}
