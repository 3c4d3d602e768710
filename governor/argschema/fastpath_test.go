package argschema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// planSchemas all get a plan; between them they use every keyword a plan knows, in every draft
// the library reads differently. FuzzFastPathAgreesWithLibrary runs arguments against each.
var planSchemas = []string{
	robotSchema,
	`{"type": "object", "required": ["s"], "additionalProperties": false, "properties": {
		"s":     {"type": "string", "minLength": 2, "maxLength": 5},
		"p":     {"type": "string", "pattern": "b+"},
		"e":     {"enum": ["a", "é", 1, 2.5, true, null, "\u00e9x"]},
		"c":     {"const": "x\ny"},
		"f":     {"const": false},
		"i":     {"type": "integer", "minimum": -3, "exclusiveMaximum": 9007199254740993},
		"n":     {"type": ["number", "null"], "exclusiveMinimum": -1.5, "maximum": 1e3},
		"big":   {"type": "integer", "maximum": 9007199254740992},
		"tiny":  {"minimum": 1e-400, "maximum": 1e400},
		"a":     {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
		"o":     {"type": "object", "additionalProperties": {"type": "number"}},
		"k":     {"type": ["string", "integer"]},
		"u":     true,
		"never": false}}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "properties": {
		"speed": {"maximum": 1.5, "exclusiveMaximum": true},
		"n":     {"minimum": 0, "exclusiveMinimum": true}}}`,
	`{"$schema": "http://json-schema.org/draft-07/schema#", "items": {"type": "integer"},
		"properties": {"x": {"$ref": "#/definitions/s", "maxLength": 2}},
		"definitions": {"s": {"type": "string"}}}`,
	`{"$schema": "https://json-schema.org/draft/2019-09/schema",
		"properties": {"x": {"$ref": "#/$defs/s", "maxLength": 2}}, "$defs": {"s": {"type": "string"}}}`,
	`{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "required": ["v"],
		"properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}}`,
	`{"anyOf": [
		{"type": "string", "maxLength": 3},
		{"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"}, {"const": "z"}]}},
		{"type": "object", "required": ["a"], "properties": {"a": {"enum": [1, 2]}}},
		{"type": "object", "required": ["b"]}]}`,
	`{"type": "object", "properties": {
		"when": {"type": "string", "format": "date-time", "description": "d", "default": "x", "examples": ["y"]},
		"tag":  {"$comment": "c", "title": "t", "deprecated": true, "readOnly": true}}}`,
	`{"properties": {"a/b~c": {"type": "string"}, "é": {"type": "integer"}, "\u0000": {"const": 0}},
		"required": ["é"], "additionalProperties": false}`,
	`{"type": "string", "pattern": "^\\p{L}+$", "maxLength": 4}`,
	`true`,
	`{}`,
}

// fastPathArgs are seeds for the fuzzer and the table tests: valid and invalid calls of the
// schemas above, and text the scanner must read exactly as the library's decoder does.
var fastPathArgs = []string{
	``, `{}`, `null`, `[]`, `"a"`, `1`, ` {} `, "\t{\n}\r\n", `{} x`, `{}{}`, `{`, `}`, `{"s"}`, `{"s":}`,
	`{"target": "kitchen_table", "speed": 0.5, "mode": "slow"}`,
	`{"target": "home", "speed": 2, "mode": "turbo", "colour": 1, "note": 5, "waypoints": [{"x": "a", "y": 0, "z": 0, "w": 1}, {}]}`,
	`{"target": "home", "note": null, "waypoints": [{"x": 0, "y": 1e300, "z": 1E-300}]}`,
	`{"target": "home", "note": "` + strings.Repeat("n", 201) + `"}`,
	`{"target": "home", "repeat": 3.0}`, `{"target": "home", "repeat": 1e1}`, `{"target": "home", "repeat": 10.5e-1}`,
	`{"s": "ab"}`, `{"s": "a"}`, `{"s": "abcdef"}`, `{"s": "ééééé"}`, `{"s": "\u00e9\u00e9"}`, `{"s": "\ud83d\ude00x"}`,
	`{"s": "\ud800"}`, `{"s": "\udc00\ud800"}`, `{"s": "\ud800\u0041"}`, `{"s": "a\u0062"}`, `{"s": "a\/b"}`, `{"s": "\x"}`,
	"{\"s\": \"\xff\xfe\"}", "{\"s\": \"a\tb\"}", "{\"s\": \"\xef\xbf\xbd!\"}",
	`{"s": "ab", "s": 5}`, `{"s": 5, "s": "ab"}`, `{"s": "ab", "i": 1e999999, "i": 1}`,
	`{"s": "ab", "p": "abbc"}`, `{"s": "ab", "p": "ac"}`,
	`{"s": "ab", "e": "\u00e9"}`, `{"s": "ab", "e": "é"}`, `{"s": "ab", "e": 2.50}`, `{"s": "ab", "e": 25e-1}`, `{"s": "ab", "e": 1.0}`,
	`{"s": "ab", "e": false}`, `{"s": "ab", "e": null}`, `{"s": "ab", "e": "éx"}`, `{"s": "ab", "e": [1]}`,
	`{"s": "ab", "c": "x\ny"}`, `{"s": "ab", "c": "x\u000ay"}`, `{"s": "ab", "c": "x\\ny"}`, `{"s": "ab", "f": false}`, `{"s": "ab", "f": 0}`,
	`{"s": "ab", "i": -3}`, `{"s": "ab", "i": -3.5}`, `{"s": "ab", "i": -4}`, `{"s": "ab", "i": 9007199254740992}`,
	`{"s": "ab", "i": 9007199254740993}`, `{"s": "ab", "i": 9007199254740993.0}`, `{"s": "ab", "i": -0}`, `{"s": "ab", "i": -0.0e-0}`,
	`{"s": "ab", "big": 9007199254740992.0}`, `{"s": "ab", "big": 9007199254740993}`, `{"s": "ab", "big": 12345678901234567890123}`,
	`{"s": "ab", "big": 1` + strings.Repeat("0", 64) + `}`,
	`{"s": "ab", "n": -1.5}`, `{"s": "ab", "n": -1.4999}`, `{"s": "ab", "n": 1e3}`, `{"s": "ab", "n": 1000.0000000000001}`, `{"s": "ab", "n": null}`,
	`{"s": "ab", "tiny": 1e-400}`, `{"s": "ab", "tiny": 1e-401}`, `{"s": "ab", "tiny": 0.5}`, `{"s": "ab", "tiny": 1e400}`, `{"s": "ab", "tiny": "1"}`,
	`{"s": "ab", "a": ["x", true, 1, 2]}`, `{"s": "ab", "a": []}`, `{"s": "ab", "a": ["x", true, 1, 2, 3]}`, `{"s": "ab", "a": [1]}`,
	`{"s": "ab", "o": {"x": 1, "y": -2.5}}`, `{"s": "ab", "o": {"x": "1"}}`, `{"s": "ab", "k": "x"}`, `{"s": "ab", "k": 2.0}`, `{"s": "ab", "k": 2.5}`,
	`{"s": "ab", "u": {"deep": [1, {"x": null}, "\u0000"]}}`, `{"s": "ab", "never": 1}`, `{"s": "ab", "zzz": 1}`,
	`{"s": "ab", "i": 01}`, `{"s": "ab", "i": -}`, `{"s": "ab", "i": 1.}`, `{"s": "ab", "i": .5}`, `{"s": "ab", "i": 1e}`,
	`{"s": "ab", "i": +1}`, `{"s": "ab", "i": NaN}`, `{"s": "ab", "f": fals}`, `{"s": "ab", "f": nul}`, `{"s": "ab",}`, `[1,]`,
	`{"speed": 1.5}`, `{"speed": 1.4}`, `{"n": 0}`, `{"n": 0.001}`,
	`{"x": "abc"}`, `{"x": "ab"}`, `{"x": 1}`, `[1, 2, "3"]`, `[1, 2.0]`,
	`{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3.0}]}`, `{"v": 1, "kids": [{"kids": []}]}`, `{"v": 1, "kids": [{"v": 1, "kids": [{"v": "x"}]}]}`,
	`"abcd"`, `"abc"`, `[1, null, "z", "y"]`, `[1, null, "z"]`, `{"a": 2}`, `{"a": 3}`, `{"b": null}`, `{"a": 3, "b": 0}`,
	`{"when": "yesterday"}`, `{"when": 1}`, `{"tag": {}}`,
	`{"a/b~c": "x", "é": 1}`, `{"\u00e9": 1}`, `{"\u00e9": 1, "\u0000": 0}`, `{"é": 1, "\u0000": 0.0}`, `{"é": 1, "a\/b~c": 1}`,
	`"Ωμέγα"`, `"Ωμέγαα"`, `"\u03a9"`, `"a1"`, `""`,
	strings.Repeat(`[`, 1200) + strings.Repeat(`]`, 1200),
	`{"s": "ab", "u": ` + strings.Repeat(`[`, 1200) + strings.Repeat(`]`, 1200) + `}`,
}

// libraryOnly is what Validate returns without a plan: the library's answer.
func libraryOnly(s *Schema, args json.RawMessage) []Problem {
	slow := *s
	slow.plan = nil
	return slow.Validate(args)
}

// FuzzFastPathAgreesWithLibrary holds the fast path to its one promise: Validate answers
// exactly as the library alone does. In particular the plan never accepts arguments the
// library rejects.
func FuzzFastPathAgreesWithLibrary(f *testing.F) {
	schemas := make([]*Schema, len(planSchemas))
	for i, text := range planSchemas {
		if schemas[i] = mustCompile(f, text); schemas[i].plan == nil {
			f.Fatalf("schema %d has no plan, so fuzzing it tests nothing: %s", i, text)
		}
		for _, args := range fastPathArgs {
			f.Add(uint8(i), []byte(args))
		}
	}
	f.Add(uint8(0), []byte(args1KB(f)))
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		s := schemas[int(which)%len(schemas)]
		want := libraryOnly(s, args)
		if s.plan.accepts(args) && want != nil {
			t.Fatalf("the plan accepts %q, which the library rejects: %v", args, want)
		}
		if got := s.Validate(args); !slices.Equal(got, want) {
			t.Fatalf("Validate(%q)\n got %q\nwant %q (library)", args, got, want)
		}
	})
}

// FuzzScannerAcceptsOnlyJSON: whatever the schema, the fast path reads no text as a value that
// encoding/json, which the library decodes with, would refuse.
func FuzzScannerAcceptsOnlyJSON(f *testing.F) {
	for _, args := range fastPathArgs {
		f.Add([]byte(args))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		s := scanner{b: text}
		end, ok := s.skip(s.ws(0))
		if ok && s.ws(end) == len(text) && !json.Valid(text) {
			t.Fatalf("the scanner reads %q as one JSON value; encoding/json does not", text)
		}
	})
}

// TestFastPathAccepts lists valid calls the plan must accept by itself: the fast path is only
// fast if it does.
func TestFastPathAccepts(t *testing.T) {
	tests := []struct {
		name   string
		schema int // index in planSchemas
		args   string
	}{
		{"robot, 1 KB", 0, string(args1KB(t))},
		{"robot, small", 0, `{"target": "kitchen_table", "speed": 0.5, "mode": "slow"}`},
		{"nullable anyOf, null", 0, `{"target": "home", "note": null}`},
		{"nullable anyOf, string", 0, `{"target": "home", "note": "gently"}`},
		{"integer written 3.0", 0, `{"target": "home", "repeat": 3.0}`},
		{"integer written 1e1", 0, `{"target": "home", "repeat": 1e1}`},
		{"integer written 10.0e-1", 1, `{"s": "ab", "i": 10.0e-1}`},
		{"big integer below exclusive maximum", 1, `{"s": "ab", "i": 9007199254740992}`},
		{"big integer at maximum", 1, `{"s": "ab", "big": 9007199254740992.0}`},
		{"length in runes", 1, `{"s": "ééééé"}`},
		{"escaped characters count once", 1, `{"s": "\u00e9\ud83d\ude00"}`},
		{"pattern matches anywhere", 1, `{"s": "ab", "p": "abbc"}`},
		{"enum, escaped", 1, `{"s": "ab", "e": "\u00e9x"}`},
		{"enum, number written differently", 1, `{"s": "ab", "e": 25e-1}`},
		{"enum, literal", 1, `{"s": "ab", "e": true}`},
		{"const with an escape", 1, `{"s": "ab", "c": "x\u000ay", "f": false}`},
		{"bounds at 1e±400", 1, `{"s": "ab", "tiny": 1e-400, "n": -1.4999}`},
		{"prefixItems then items", 1, `{"s": "ab", "a": ["x", true, 1, 2]}`},
		{"additionalProperties schema", 1, `{"s": "ab", "o": {"x": 1, "y": -2.5}}`},
		{"type list", 1, `{"s": "ab", "k": 2.0, "n": null}`},
		{"true schema takes anything", 1, `{"s": "ab", "u": {"deep": [1, {"x": null}, "\u0000"]}}`},
		{"repeated key, both valid", 1, `{"s": "ab", "s": "cd"}`},
		{"draft-04 exclusive maximum", 2, `{"speed": 1.4, "n": 0.001}`},
		{"draft-07 ignores $ref siblings", 3, `{"x": "abcd"}`},
		{"draft-07 items", 3, `[1, 2.0]`},
		{"2019-09 applies $ref siblings", 4, `{"x": "ab"}`},
		{"recursive schema", 5, `{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3.0}]}`},
		{"anyOf, array", 6, `[1, null, "z"]`},
		{"anyOf, second object", 6, `{"a": 3, "b": 0}`},
		{"format is an annotation in 2020-12", 7, `{"when": "yesterday", "tag": {}}`},
		{"escaped property names", 8, `{"\u00e9": 1, "\u0000": 0.0, "a\/b~c": "x"}`},
		{"unicode pattern", 9, `"\u03a9μέγ"`},
		{"true schema", 10, `[{"a": [1e300]}]`},
		{"empty schema", 11, `"x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, planSchemas[tt.schema])
			if p := libraryOnly(s, json.RawMessage(tt.args)); p != nil {
				t.Fatalf("the library finds %s invalid: %v", tt.args, p)
			}
			if !s.plan.accepts([]byte(tt.args)) {
				t.Errorf("the plan does not accept %s", tt.args)
			}
		})
	}
}

// TestFastPathDeclines lists valid calls the plan leaves to the library, because it cannot be
// sure to read them as the library does; Validate still finds them valid.
func TestFastPathDeclines(t *testing.T) {
	manyAlternatives := make([]string, 60)
	for i := range manyAlternatives {
		manyAlternatives[i] = fmt.Sprintf(`{"type": "integer", "minimum": %d}`, 100-i)
	}
	tests := []struct {
		name, schema, args string
	}{
		{"unpaired surrogate in a checked string", planSchemas[1], `{"s": "ab\ud800"}`},
		{"invalid UTF-8", planSchemas[1], "{\"s\": \"ab\xff\"}"},
		{"integer with more than 19 digits", planSchemas[1], `{"s": "ab", "k": 12345678901234567890123}`},
		{"repeated key, the dropped value invalid", planSchemas[1], `{"s": 5, "s": "ab"}`},
		{"nesting deeper than the scanner follows", `{}`, strings.Repeat(`[`, maxScanDepth+1) + strings.Repeat(`]`, maxScanDepth+1)},
		{"too many alternatives tried", `{"items": {"anyOf": [` + strings.Join(manyAlternatives, ", ") + `]}}`,
			`[` + strings.Repeat(`41,`, 500) + `41]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			if s.plan == nil {
				t.Fatal("no plan")
			}
			if s.plan.accepts([]byte(tt.args)) {
				t.Errorf("the plan accepts %.80s", tt.args)
			}
			if p := s.Validate(json.RawMessage(tt.args)); p != nil {
				t.Errorf("Validate(%.80s) = %v, want valid", tt.args, p)
			}
		})
	}
}

// TestNoPlan lists schemas with keywords the plan does not know: they get no plan and are
// validated by the library alone, as before.
func TestNoPlan(t *testing.T) {
	required65 := make([]string, 65)
	for i := range required65 {
		required65[i] = fmt.Sprintf(`"p%d"`, i)
	}
	tests := []struct {
		name, schema, valid, invalid string
	}{
		{"oneOf", `{"properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}`, `{"a": 1}`, `{"a": 1.5}`},
		{"allOf", `{"allOf": [{"required": ["a"]}, {"required": ["b"]}]}`, `{"a": 1, "b": 2}`, `{"a": 1}`},
		{"not", `{"properties": {"a": {"not": {"type": "string"}}}}`, `{"a": 1}`, `{"a": "x"}`},
		{"if/then/else", `{"if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {"required": ["c"]}}`, `{"c": 1}`, `{"a": 1}`},
		{"anyOf with an unknown keyword inside", `{"anyOf": [{"type": "string"}, {"type": "integer", "multipleOf": 2}]}`, `4`, `3`},
		{"patternProperties", `{"patternProperties": {"^x_": {"type": "integer"}}}`, `{"x_a": 1}`, `{"x_a": "1"}`},
		{"uniqueItems", `{"uniqueItems": true}`, `[1, 2]`, `[1, 1.0]`},
		{"multipleOf", `{"multipleOf": 0.5}`, `1.5`, `0.75`},
		{"contains", `{"contains": {"const": 1}}`, `[2, 1]`, `[2]`},
		{"propertyNames", `{"propertyNames": {"maxLength": 2}}`, `{"ab": 1}`, `{"abc": 1}`},
		{"dependentRequired", `{"dependentRequired": {"a": ["b"]}}`, `{"a": 1, "b": 1}`, `{"a": 1}`},
		{"dependentSchemas", `{"dependentSchemas": {"a": {"required": ["b"]}}}`, `{"a": 1, "b": 1}`, `{"a": 1}`},
		{"unevaluatedProperties", `{"properties": {"a": {}}, "unevaluatedProperties": false}`, `{"a": 1}`, `{"b": 1}`},
		{"minProperties", `{"minProperties": 1}`, `{"a": 1}`, `{}`},
		{"format asserted by draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#", "format": "date-time"}`, `"2024-01-01T00:00:00Z"`, `"yesterday"`},
		{"draft-07 tuple items", `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}`, `["a", 1]`, `[1]`},
		{"$dynamicRef", `{"$dynamicAnchor": "n", "type": "object", "properties": {"next": {"$dynamicRef": "#n"}}}`, `{"next": {}}`, `{"next": 1}`},
		{"enum with an object", `{"enum": [{"a": 1}, 2]}`, `{"a": 1.0}`, `{"a": 2}`},
		{"bound with more than 19 digits", `{"maximum": 12345678901234567890.5}`, `12345678901234567890`, `12345678901234567891`},
		{"more than 64 required names", `{"required": [` + strings.Join(required65, ", ") + `]}`, `[]`, `{}`},
		{"$ref cycle on one value", `{"$ref": "#/$defs/a", "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"$ref": "#/$defs/a"}}}`, ``, `1`},
		{"unknown keyword behind a $ref", `{"properties": {"p": {"$ref": "#/$defs/p"}}, "$defs": {"p": {"not": {}}}}`, `{}`, `{"p": 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			if s.plan != nil {
				t.Fatal("got a plan, want none")
			}
			if tt.valid != "" {
				if p := s.Validate(json.RawMessage(tt.valid)); p != nil {
					t.Errorf("Validate(%s) = %v, want valid", tt.valid, p)
				}
			}
			if p := s.Validate(json.RawMessage(tt.invalid)); p == nil {
				t.Errorf("Validate(%s) = valid, want problems", tt.invalid)
			}
		})
	}
}

// TestPlanKnowsEverySchemaField sorts every field of the library's compiled schema into what a
// plan checks, what leaves a schema without a plan, and what changes no outcome. A new library
// version with a new keyword fails here until someone decides where the keyword goes; until
// then, plannable would ignore it and the plan could accept what the library rejects.
func TestPlanKnowsEverySchemaField(t *testing.T) {
	planned := []string{"Bool", "Ref", "Types", "Enum", "Const", "AnyOf", "Required", "Properties",
		"AdditionalProperties", "MinItems", "MaxItems", "Items", "PrefixItems", "Items2020",
		"MinLength", "MaxLength", "Pattern", "Maximum", "Minimum", "ExclusiveMaximum", "ExclusiveMinimum"}
	refused := []string{"RecursiveRef", "RecursiveAnchor", "DynamicRef", "DynamicAnchor", "Not",
		"AllOf", "OneOf", "If", "Then", "Else", "Format", "MaxProperties", "MinProperties",
		"PropertyNames", "PatternProperties", "Dependencies", "DependentRequired", "DependentSchemas",
		"UnevaluatedProperties", "UniqueItems", "Contains", "MinContains", "MaxContains",
		"AdditionalItems", "UnevaluatedItems", "ContentEncoding", "ContentMediaType", "ContentSchema",
		"MultipleOf", "Extensions"}
	inert := []string{"DraftVersion", "Location", "ID", "Anchor", "Title", "Description", "Default",
		"Comment", "ReadOnly", "WriteOnly", "Examples", "Deprecated"}

	typ := reflect.TypeFor[jsonschema.Schema]()
	for field := range typ.Fields() {
		if field.IsExported() && !slices.Contains(planned, field.Name) && !slices.Contains(refused, field.Name) && !slices.Contains(inert, field.Name) {
			t.Errorf("jsonschema.Schema has a field %s the plan does not know; sort it into planned (and check it in fastpath.go), refused (and refuse it in plannable) or inert", field.Name)
		}
	}
	for _, name := range refused {
		s := &jsonschema.Schema{}
		field := reflect.ValueOf(s).Elem().FieldByName(name)
		switch field.Kind() {
		case reflect.Pointer:
			field.Set(reflect.New(field.Type().Elem()))
		case reflect.Slice:
			field.Set(reflect.MakeSlice(field.Type(), 0, 0))
		case reflect.Map:
			field.Set(reflect.MakeMap(field.Type()))
		case reflect.Bool:
			field.SetBool(true)
		case reflect.String:
			field.SetString("x")
		case reflect.Interface:
			field.Set(reflect.ValueOf(true))
		default:
			t.Fatalf("field %s: cannot set a %s", name, field.Kind())
		}
		if plannable(s) {
			t.Errorf("plannable accepts a schema with %s", name)
		}
	}
	if plannable(&jsonschema.Schema{Items: []*jsonschema.Schema{}}) {
		t.Error("plannable accepts tuple items")
	}
}

// FuzzDecimal holds decimal to big.Rat, which the library compares numbers with.
func FuzzDecimal(f *testing.F) {
	for _, pair := range [][2]string{
		{"0", "-0"}, {"3.0", "3"}, {"1e1", "10"}, {"9007199254740993", "9007199254740992"},
		{"1.5", "15e-1"}, {"-0.00012e5", "-12"}, {"1234567890123456789", "1234567890123456789.5"},
		{"9999999999999999999", "1e19"}, {"1e-400", "0"}, {"1E400", "-1e400"}, {"10000000000000000000", "1e19"},
		{"-2.5", "-2.49"}, {"0.1", "0.10000000000000000001"},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		da, ok := fuzzDecimal(t, a)
		if !ok {
			return
		}
		db, ok := fuzzDecimal(t, b)
		if !ok {
			return
		}
		ra, _ := new(big.Rat).SetString(a)
		rb, _ := new(big.Rat).SetString(b)
		if got, want := da.cmp(db), ra.Cmp(rb); got != want {
			t.Errorf("cmp(%s, %s) = %d, want %d", a, b, got, want)
		}
	})
}

// fuzzDecimal parses lit as the checker would, and checks it against big.Rat on its own.
func fuzzDecimal(t *testing.T, lit string) (decimal, bool) {
	s := scanner{b: []byte(lit)}
	if end, ok := s.num(0); !ok || end != len(lit) {
		return decimal{}, false
	}
	d, ok := parseDecimal([]byte(lit))
	if !ok {
		return decimal{}, false
	}
	r, _ := new(big.Rat).SetString(lit)
	if d.isInt() != r.IsInt() {
		t.Errorf("isInt(%s) = %t, want %t", lit, d.isInt(), r.IsInt())
	}
	if back, ok := decimalOf(r); !ok || back != d {
		t.Errorf("decimalOf(%s) = %+v, %t; want %+v", lit, back, ok, d)
	}
	return d, true
}
