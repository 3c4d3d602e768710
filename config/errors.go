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
