package guards

import (
	"fmt"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
)

// Problem is one thing wrong with one configured guard.
type Problem struct {
	// File and Line locate the problem: the setting's own line when it is known, otherwise the
	// guard's entry.
	File string
	Line int
	// Guard is the entry's id ("" when it has none).
	Guard string
	// Msg says what is wrong and, where it helps, what would be valid.
	Msg string
	// Entry is the index of the entry in the specs given to Build (-1 for a problem of the
	// stage itself), and Key the entry's own setting the problem is about ("id", "use",
	// "action", "mode", "fail_mode", "timeout", "servers", "tools"; "" for the guard's own
	// settings), so that a caller that already reported a problem of that setting can leave
	// this one out.
	Entry int
	Key   string
}

// Error formats the problem as "FILE:LINE: guard ID: message".
func (p Problem) Error() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.File, p.Line)
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Guard != "" {
		b.WriteString("guard " + p.Guard + ": ")
	} else {
		b.WriteString("guard: ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// BuildError is every problem Build found in the entries of one stage, in entry order.
type BuildError struct {
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *BuildError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as errors, for errors.As.
func (e *BuildError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// SettingError is one problem in a guard's own settings, at the line it was written on (0 when
// it belongs to no line, such as a missing required setting).
type SettingError struct {
	Line int
	Msg  string
}

// SettingErrors is what a [Factory] returns for bad settings: every problem, not just the first.
type SettingErrors []SettingError

// Error lists the problems, "line N: message", one per line.
func (e SettingErrors) Error() string {
	lines := make([]string, len(e))
	for i, s := range e {
		if s.Line > 0 {
			lines[i] = fmt.Sprintf("line %d: %s", s.Line, s.Msg)
		} else {
			lines[i] = s.Msg
		}
	}
	return strings.Join(lines, "\n")
}

func (e *SettingErrors) add(line int, format string, args ...any) {
	*e = append(*e, SettingError{Line: line, Msg: fmt.Sprintf(format, args...)})
}

// err returns e as an error, or nil when it is empty.
func (e SettingErrors) err() error {
	if len(e) == 0 {
		return nil
	}
	return e
}

// suggestion is " (did you mean X?)" or, without a close candidate, " (one of: a, b, c)".
func suggestion(name string, candidates []string) string {
	if c := suggest.Closest(name, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return " (one of: " + strings.Join(candidates, ", ") + ")"
}
