package argschema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// robotSchema is a typical tool input schema: a robot arm move with a target, a bounded speed,
// an enum, an integer, nested waypoints through a $ref, and an optional note.
const robotSchema = `{
	"type": "object",
	"properties": {
		"target":    {"type": "string", "pattern": "^[a-z_]+$"},
		"speed":     {"type": "number", "minimum": 0, "maximum": 1.5},
		"mode":      {"enum": ["fast", "slow"]},
		"repeat":    {"type": "integer", "minimum": 1, "maximum": 10},
		"color":     {"type": "string"},
		"waypoints": {"type": "array", "maxItems": 64, "items": {"$ref": "#/$defs/point"}},
		"note":      {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}]}
	},
	"required": ["target"],
	"additionalProperties": false,
	"$defs": {
		"point": {
			"type": "object",
			"properties": {
				"x": {"type": "number"},
				"y": {"type": "number"},
				"z": {"type": "number", "exclusiveMinimum": 0}
			},
			"required": ["x", "y", "z"],
			"additionalProperties": false
		}
	}
}`

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile("move", json.RawMessage(schema), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestValidate(t *testing.T) {
	robot := mustCompile(t, robotSchema)
	const allowed = "(allowed: color, mode, note, repeat, speed, target, waypoints)"
	tests := []struct {
		name string
		args string
		want []Problem
	}{
		{"valid", `{"target": "home", "speed": 1.5, "mode": "slow", "repeat": 3, "note": null,
			"waypoints": [{"x": 0, "y": -1.25, "z": 0.5}]}`, nil},
		{"missing required", `{"speed": 1}`,
			[]Problem{{"", `missing required property "target"`}}},
		{"no arguments means an empty object", ``,
			[]Problem{{"", `missing required property "target"`}}},
		{"wrong type", `{"target": 7}`,
			[]Problem{{"/target", "must be string but is number"}}},
		{"arguments not an object", `["home"]`,
			[]Problem{{"", "must be object but is array"}}},
		{"enum", `{"target": "home", "mode": "turbo"}`,
			[]Problem{{"/mode", `must be one of "fast", "slow" but is "turbo"`}}},
		{"pattern", `{"target": "Home Base"}`,
			[]Problem{{"/target", "does not match pattern ^[a-z_]+$"}}},
		{"additionalProperties", `{"target": "home", "colour": "red"}`,
			[]Problem{{"", `property "colour" is not allowed ` + allowed}}},
		{"two additional properties, sorted", `{"target": "home", "zeta": 1, "colour": "red"}`,
			[]Problem{{"", `properties "colour", "zeta" are not allowed ` + allowed}}},
		{"nested array item", `{"target": "home", "waypoints": [{"x": 0, "y": 0, "z": 1}, {"x": 0, "y": 0, "z": 1}, {"x": "1", "y": 0, "z": 1}]}`,
			[]Problem{{"/waypoints/2/x", "must be number but is string"}}},
		{"nested additionalProperties lists its own schema's names", `{"target": "home", "waypoints": [{"x": 0, "y": 0, "z": 1, "w": 0}]}`,
			[]Problem{{"/waypoints/0", `property "w" is not allowed (allowed: x, y, z)`}}},
		{"maximum", `{"target": "home", "speed": 2}`,
			[]Problem{{"/speed", "must be <= 1.5 but is 2"}}},
		{"minimum", `{"target": "home", "speed": -0.25}`,
			[]Problem{{"/speed", "must be >= 0 but is -0.25"}}},
		{"exclusiveMinimum", `{"target": "home", "waypoints": [{"x": 0, "y": 0, "z": 0}]}`,
			[]Problem{{"/waypoints/0/z", "must be > 0 but is 0"}}},
		{"integer written as 3.0 is an integer", `{"target": "home", "repeat": 3.0}`, nil},
		{"integer in exponent form", `{"target": "home", "repeat": 1e1}`, nil},
		{"fraction is not an integer", `{"target": "home", "repeat": 2.5}`,
			[]Problem{{"/repeat", "must be integer but is number"}}},
		{"optional field: wrong type", `{"target": "home", "note": 5}`,
			[]Problem{{"/note", "must be string or null but is number"}}},
		{"optional field: right type, too long", `{"target": "home", "note": "` + strings.Repeat("n", 201) + `"}`,
			[]Problem{{"/note", "must match one of 2 alternatives (anyOf) but matches none: [1] must be at most 200 characters long but is 201 [2] must be null but is string"}}},
		{"several errors at once, all with paths, sorted", `{"speed": 2, "mode": "turbo", "colour": "red", "repeat": 0,
			"waypoints": [{"x": 0, "y": 0, "z": 1}, {"x": 0, "y": 0}, {"x": "a", "y": 0, "z": 1}]}`,
			[]Problem{
				{"", `missing required property "target"`},
				{"", `property "colour" is not allowed ` + allowed},
				{"/mode", `must be one of "fast", "slow" but is "turbo"`},
				{"/repeat", "must be >= 1 but is 0"},
				{"/speed", "must be <= 1.5 but is 2"},
				{"/waypoints/1", `missing required property "z"`},
				{"/waypoints/2/x", "must be number but is string"},
			}},
		{"huge exponent is refused unchecked", `{"target": "home", "speed": 1e999999, "waypoints": [{"x": 1, "y": 2, "z": 1E-9999999}]}`,
			[]Problem{
				{"/speed", "number 1e999999 is too long or too large to check; write it in plain decimal form, at most 64 characters"},
				{"/waypoints/0/z", "number 1E-9999999 is too long or too large to check; write it in plain decimal form, at most 64 characters"},
			}},
		{"overlong number is refused unchecked", `{"target": "home", "repeat": 1` + strings.Repeat("0", 64) + `}`,
			[]Problem{{"/repeat", `number 1` + strings.Repeat("0", 64) + ` is too long or too large to check; write it in plain decimal form, at most 64 characters`}}},
		{"a number in a string is text", `{"target": "home", "note": "1e999999 \\\" 1e999999"}`, nil},
		{"odd number after a string ending in a backslash", `{"note": "C:\\", "speed": 1e999999}`,
			[]Problem{{"/speed", "number 1e999999 is too long or too large to check; write it in plain decimal form, at most 64 characters"}}},
		{"odd number dropped by a repeated key", `{"target": 5, "speed": 1e999999, "speed": 1}`,
			[]Problem{{"/target", "must be string but is number"}}},
		{"ordinary exponents are fine", `{"target": "home", "speed": 1.5e-3, "waypoints": [{"x": 1e300, "y": -2E+2, "z": 1e0}]}`, nil},
		{"not JSON", `{"target": `,
			[]Problem{{"", "must be one JSON object, but the arguments are not valid JSON: unexpected EOF"}}},
		{"two JSON values", `{"target": "home"} {}`,
			[]Problem{{"", "must be one JSON object, but the arguments are not valid JSON: invalid character after top-level value"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := robot.Validate(json.RawMessage(tt.args)); !slices.Equal(got, tt.want) {
				t.Errorf("Validate(%s)\n got %q\nwant %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestValidateMessages(t *testing.T) {
	tests := []struct {
		name, schema, args string
		want               []Problem
	}{
		{"const", `{"properties": {"unit": {"const": "mm"}}}`, `{"unit": "cm"}`,
			[]Problem{{"/unit", `must be "mm" but is "cm"`}}},
		{"single enum value", `{"properties": {"unit": {"enum": [1]}}}`, `{"unit": 2}`,
			[]Problem{{"/unit", `must be 1 but is 2`}}},
		{"long value is shortened", `{"properties": {"unit": {"enum": ["mm"]}}}`, `{"unit": "` + strings.Repeat("a", 100) + `"}`,
			[]Problem{{"/unit", `must be "mm" but is "` + strings.Repeat("a", 79) + `…`}}},
		{"format, asserted by draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"when": {"format": "date-time"}}}`, `{"when": "yesterday"}`,
			[]Problem{{"/when", `must be a valid date-time but is "yesterday" (less than 20 characters long)`}}},
		{"format, only an annotation in 2020-12", `{"properties": {"when": {"format": "date-time"}}}`, `{"when": "yesterday"}`, nil},
		{"exclusiveMaximum", `{"properties": {"v": {"exclusiveMaximum": 1}}}`, `{"v": 1}`,
			[]Problem{{"/v", "must be < 1 but is 1"}}},
		{"multipleOf", `{"properties": {"v": {"multipleOf": 0.5}}}`, `{"v": 0.75}`,
			[]Problem{{"/v", "must be a multiple of 0.5 but is 0.75"}}},
		{"large integers compare exactly", `{"properties": {"id": {"maximum": 9007199254740992}}}`, `{"id": 9007199254740993}`,
			[]Problem{{"/id", "must be <= 9007199254740992 but is 9007199254740993"}}},
		{"integers beyond 64 bits are shown as floats", `{"properties": {"id": {"maximum": 1}}}`, `{"id": 123456789012345678901234567890}`,
			[]Problem{{"/id", "must be <= 1 but is 1.2345678901234568e+29"}}},
		{"minLength", `{"properties": {"s": {"minLength": 2}}}`, `{"s": "é"}`,
			[]Problem{{"/s", "must be at least 2 characters long but is 1"}}},
		{"minItems and uniqueItems", `{"properties": {"a": {"minItems": 4, "uniqueItems": true}}}`, `{"a": [1, 2, 1]}`,
			[]Problem{{"/a", "items must be unique but items 0 and 2 are equal"}, {"/a", "must have at least 4 items but has 3"}}},
		{"maxProperties", `{"maxProperties": 1}`, `{"a": 1, "b": 2}`,
			[]Problem{{"", "must have at most 1 properties but has 2"}}},
		{"missing several", `{"required": ["b", "a"]}`, `{}`,
			[]Problem{{"", `missing required properties "b", "a"`}}},
		{"dependentRequired", `{"dependentRequired": {"speed": ["unit"]}}`, `{"speed": 1}`,
			[]Problem{{"", `property "speed" requires property "unit"`}}},
		{"additionalProperties false on an empty object", `{"additionalProperties": false}`, `{"a": 1}`,
			[]Problem{{"", `property "a" is not allowed (this object takes no properties)`}}},
		{"additionalProperties with patternProperties", `{"properties": {"a": {}}, "patternProperties": {"^x_": {}}, "additionalProperties": false}`, `{"b": 1}`,
			[]Problem{{"", `property "b" is not allowed (allowed: a, names matching ^x_)`}}},
		{"too many properties to list", manyProperties(maxListedProperties + 1), `{"nope": 1}`,
			[]Problem{{"", `property "nope" is not allowed`}}},
		{"unevaluatedProperties", `{"properties": {"a": {}}, "unevaluatedProperties": false}`, `{"b": 1}`,
			[]Problem{{"/b", "is not allowed here; remove it"}}},
		{"propertyNames", `{"propertyNames": {"pattern": "^[a-z]+$"}}`, `{"Bad": 1}`,
			[]Problem{{"", `property name "Bad" is not allowed: does not match pattern ^[a-z]+$`}}},
		{"contains", `{"properties": {"a": {"contains": {"const": 1}}}}`, `{"a": [2, 3]}`,
			[]Problem{{"/a", `must contain at least one item that matches the schema's "contains"`}}},
		{"not", `{"properties": {"a": {"not": {"type": "string"}}}}`, `{"a": "x"}`,
			[]Problem{{"/a", `must not match the schema under "not"`}}},
		{"oneOf matching two", `{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1, "b": 2}`,
			[]Problem{{"", "must match exactly one alternative (oneOf) but matches alternatives 1 and 2"}}},
		{"oneOf matching none", `{"oneOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}`, `{"b": 2}`,
			[]Problem{{"", `must match one of 2 alternatives (oneOf) but matches none: [1] missing required property "a" [2] /b: must be string but is number`}}},
		{"allOf reports every branch, once", `{"allOf": [{"required": ["a"]}, {"required": ["a"]}, {"properties": {"b": {"type": "string"}}}]}`, `{"b": 1}`,
			[]Problem{{"", `missing required property "a"`}, {"/b", "must be string but is number"}}},
		{"if/then", `{"if": {"required": ["speed"]}, "then": {"required": ["unit"]}}`, `{"speed": 1}`,
			[]Problem{{"", `missing required property "unit"`}}},
		{"paths sort by array index", `{"items": {"type": "string"}}`, `[` + strings.Repeat(`"s", `, 10) + `1, 2]`,
			[]Problem{{"/10", "must be string but is number"}, {"/11", "must be string but is number"}}},
		{"pointer tokens are escaped", `{"properties": {"a/b~c": {"type": "string"}}}`, `{"a/b~c": 1}`,
			[]Problem{{"/a~1b~0c", "must be string but is number"}}},
		{"kinds without a phrasing keep the library's text", `{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}`, `{"x": 1}`,
			[]Problem{{"/x", `both /properties/x/$ref/$ref/$ref and /properties/x/$ref resolve to "tool:///input-schema.json#/$defs/a" causing reference cycle`}}},
		{"false schema for a property", `{"properties": {"legacy": false}}`, `{"legacy": 1}`,
			[]Problem{{"/legacy", "is not allowed here; remove it"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			if got := s.Validate(json.RawMessage(tt.args)); !slices.Equal(got, tt.want) {
				t.Errorf("Validate(%s)\n got %q\nwant %q", tt.args, got, tt.want)
			}
		})
	}
}

func manyProperties(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%02d": {}`, i)
	}
	return `{"properties": {` + strings.Join(props, ", ") + `}, "additionalProperties": false}`
}

// A compiled Schema is shared by every call to its tool; run with -race.
func TestValidateConcurrently(t *testing.T) {
	s := mustCompile(t, robotSchema)
	valid := json.RawMessage(`{"target": "home", "waypoints": [{"x": 1, "y": 2, "z": 3}]}`)
	invalid := json.RawMessage(`{"target": "Home", "speed": 9, "colour": 1}`)
	want := s.Validate(invalid)
	if len(want) != 3 {
		t.Fatalf("want 3 problems, got %v", want)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := s.Validate(valid); got != nil {
					t.Errorf("valid arguments: %v", got)
					return
				}
				if got := s.Validate(invalid); !slices.Equal(got, want) {
					t.Errorf("got %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
