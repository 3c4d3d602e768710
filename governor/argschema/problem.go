package argschema

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a call's arguments.
type Problem struct {
	// Path is the JSON pointer (RFC 6901) of the offending value, like "/items/2/speed"; "" is
	// the arguments object itself.
	Path string
	// Message says what is wrong in words a model can act on, like "must be <= 1.5 but is 2".
	Message string
}

// String is the problem as it appears in a reason text: "/speed: must be <= 1.5 but is 2", or
// "(arguments): ..." for the arguments object.
func (p Problem) String() string {
	if p.Path == "" {
		return "(arguments): " + p.Message
	}
	return p.Path + ": " + p.Message
}

// MaxDescribed is how many problems [Describe] spells out. The rest are counted, so a call with
// a thousand bad array items still gets a reason a model can read; fixing the listed ones
// usually fixes their like.
const MaxDescribed = 50

// Describe is the reason text of the failure envelope for problems found in a call to tool:
//
//	invalid arguments for move: 2 problems: /speed: must be <= 1.5 but is 2; (arguments):
//	missing required property "target". Fix all of them and call move again.
func Describe(tool string, problems []Problem) string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid arguments for %s: ", tool)
	switch len(problems) {
	case 0:
		fmt.Fprintf(&b, "they do not match its input schema. Check them against it and call %s again.", tool)
		return b.String()
	case 1:
		b.WriteString("1 problem: ")
	default:
		fmt.Fprintf(&b, "%d problems: ", len(problems))
	}
	for i, p := range problems[:min(len(problems), MaxDescribed)] {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if more := len(problems) - MaxDescribed; more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	if len(problems) == 1 {
		fmt.Fprintf(&b, ". Fix it and call %s again.", tool)
	} else {
		fmt.Fprintf(&b, ". Fix all of them and call %s again.", tool)
	}
	return b.String()
}

// sortProblems orders problems by path, array indices by number, then by message, and drops
// repeats (two subschemas can fail the same way on the same value).
func sortProblems(problems []Problem) []Problem {
	slices.SortFunc(problems, func(a, b Problem) int {
		if c := comparePaths(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(problems)
}

// comparePaths orders JSON pointers token by token, so /items/2 comes before /items/10.
func comparePaths(a, b string) int {
	ta, tb := strings.Split(a, "/"), strings.Split(b, "/")
	for i := range min(len(ta), len(tb)) {
		x, y := ta[i], tb[i]
		if isIndex(x) && isIndex(y) && len(x) != len(y) {
			return len(x) - len(y)
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return len(ta) - len(tb)
}

func isIndex(tok string) bool {
	if tok == "" {
		return false
	}
	for _, c := range []byte(tok) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// pointer renders an instance location as a JSON pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteByte('/')
		pointerEscaper.WriteString(&b, tok)
	}
	return b.String()
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
