package argschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Validate checks a call's arguments and returns nil when they are valid. Otherwise it returns
// one Problem for every failing value, sorted by path, without duplicates. Empty args stand for
// an empty object: MCP lets a client leave arguments out. Arguments that are not JSON are one
// Problem. Validate never panics; if the library does, the arguments are refused.
//
// Numbers are compared exactly, so a large integer is not rounded, and a number such as 3.0
// counts as an integer, as JSON Schema 2020-12 says. A number literal longer than 64 characters
// or with an exponent beyond ±400 is refused without being checked: the library would spend
// seconds on it, or panic.
//
// Valid arguments are usually recognised by the schema's plan (fastpath.go) in one pass over
// their text, without the library; all others go to the library, so the answer is the
// library's either way.
func (s *Schema) Validate(args json.RawMessage) (problems []Problem) {
	defer func() {
		if r := recover(); r != nil {
			problems = []Problem{{Message: fmt.Sprintf("could not be checked against the tool's input schema (%v); the call is refused", r)}}
		}
	}()
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if s.plan != nil && s.plan.accepts(args) {
		return nil
	}
	return s.libraryProblems(args)
}

// libraryProblems decodes args and has the library validate them: the slow path, which finds
// and phrases every problem.
func (s *Schema) libraryProblems(args json.RawMessage) (problems []Problem) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return []Problem{{Message: "must be one JSON object, but the arguments are not valid JSON: " + err.Error()}}
	}
	// An odd number the decoder dropped (a repeated key) is found by scan but not by
	// oddNumbers; the value is then checked like any other.
	if _, odd := scan(args); odd {
		if oddNumbers(v, nil, &problems); len(problems) > 0 {
			return sortProblems(problems)
		}
	}
	err = s.sch.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Problem{{Message: err.Error()}}
	}
	return s.problems(verr)
}

// problems turns the library's tree of errors into one Problem per leaf, sorted by path, without
// duplicates.
func (s *Schema) problems(verr *jsonschema.ValidationError) []Problem {
	var found []*jsonschema.ValidationError
	leaves(verr, &found)
	problems := make([]Problem, len(found))
	for i, e := range found {
		problems[i] = Problem{Path: pointer(e.InstanceLocation), Message: s.message(e)}
	}
	return sortProblems(problems)
}

// leaves appends to out the errors under e that say what is wrong with a value, skipping the
// nodes that only say that a (sub)schema failed. An anyOf, oneOf or contains failure is a leaf:
// its causes are alternatives, and message explains them together.
func leaves(e *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		for _, cause := range e.Causes {
			leaves(cause, out)
		}
	default:
		*out = append(*out, e)
	}
}
