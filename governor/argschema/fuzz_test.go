package argschema

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzCompile feeds arbitrary text to Compile as a schema: it must return a Schema or an error,
// and a Schema it returns must validate, with or without its plan alike. A panic the package
// recovered from still fails: it is handled, but it means some input gets a worse answer than
// it should.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		robotSchema,
		`true`, `false`, `{}`, `"object"`, `null`, `[]`, `1e400`,
		`{"$ref": "#"}`,
		`{"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}`,
		`{"$ref": "file:///etc/passwd"}`,
		`{"$ref": "http://127.0.0.1:9/x.json"}`,
		`{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": false}`,
		`{"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 1, "exclusiveMaximum": true}`,
		`{"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveAnchor": true, "items": {"$recursiveRef": "#"}}`,
		`{"$dynamicAnchor": "n", "items": {"$dynamicRef": "#n"}}`,
		`{"$id": "a.json", "$defs": {"b": {"$id": "a.json"}}}`,
		`{"pattern": "(["}`, `{"format": "regex"}`, `{"type": ["string", 5]}`,
		`{"multipleOf": 0}`, `{"multipleOf": 1e-400}`, `{"minimum": 1e999999}`,
		`{"properties": {"a": {"enum": [1, 1.0, "1"]}}, "uniqueItems": true}`,
		`{"anyOf": [{"oneOf": [{"not": {}}]}], "if": true, "then": false}`,
		`{"contentMediaType": "application/json", "contentSchema": {"type": "object"}}`,
	} {
		f.Add([]byte(seed))
	}
	for _, seed := range planSchemas {
		f.Add([]byte(seed))
	}
	args := []json.RawMessage{
		json.RawMessage(`{}`),
		json.RawMessage(`{"target": "home", "speed": 2, "waypoints": [{"x": "a"}], "a": [1, 1]}`),
		json.RawMessage(`[1, "a", null, {"b": []}]`),
		json.RawMessage(`{"a": "b", "c": 3.0, "d": [true, null, "\u00e9"]}`),
		json.RawMessage(`"text"`), json.RawMessage(`-1e1`), json.RawMessage(`null`), json.RawMessage(`false`),
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		s, err := Compile("fuzz", json.RawMessage(schema), Limits{})
		if err != nil {
			if strings.Contains(err.Error(), "the compiler failed") {
				t.Fatal(err)
			}
			return
		}
		for _, a := range args {
			got := s.Validate(a)
			checkProblems(t, got)
			if want := libraryOnly(s, a); !slices.Equal(got, want) {
				t.Fatalf("Validate(%s)\n got %q\nwant %q (library)", a, got, want)
			}
		}
	})
}

// FuzzValidate feeds arbitrary text to Validate as arguments: a model writes them.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `{"target": "home"}`, `{"target": 1e999999}`, `{"repeat": 1e-999999}`,
		`{"target": "home", "speed": 2, "mode": "turbo", "colour": 1, "note": 5,
			"waypoints": [{"x": "a", "y": 0, "z": 0, "w": 1}, {}]}`,
		`{"speed": 123456789012345678901234567890.5}`, `{"speed": 1e9999999}`, `{"repeat": 1e-400}`, `{"target": "\ud800"}`, `{"a": {"a": {"a": [[[]]]}}}`,
	} {
		f.Add([]byte(seed))
	}
	s, err := Compile("move", json.RawMessage(robotSchema), Limits{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		problems := s.Validate(args)
		if isJSON := len(args) == 0 || json.Valid(args); !isJSON && len(problems) != 1 {
			t.Fatalf("arguments that are not JSON: want one problem, got %v", problems)
		}
		checkProblems(t, problems)
	})
}

func checkProblems(t *testing.T, problems []Problem) {
	t.Helper()
	for i, p := range problems {
		if p.Message == "" || (p.Path != "" && p.Path[0] != '/') {
			t.Fatalf("malformed problem %q", p)
		}
		if strings.Contains(p.Message, "could not be checked") {
			t.Fatalf("Validate recovered from a panic: %q", p)
		}
		if i > 0 && problems[i-1] == p {
			t.Fatalf("duplicate problem %q", p)
		}
	}
}
