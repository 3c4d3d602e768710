package argschema

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCompileRefusesFileReferences(t *testing.T) {
	dir := t.TempDir()
	// A schema the library would compile happily if it read the file, so the refusals below can
	// only come from the file not being read.
	file := filepath.Join(dir, "other.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Relative references would resolve against the working directory if the library's file
	// loader were in use.
	t.Chdir(dir)
	fileURL := "file://" + filepath.ToSlash(file)
	tests := []struct {
		name   string
		schema map[string]any
	}{
		{"file URL", map[string]any{"$ref": fileURL}},
		{"file URL with fragment", map[string]any{"$ref": fileURL + "#/type"}},
		{"system file", map[string]any{"$ref": "file:///etc/passwd"}},
		{"absolute path", map[string]any{"$ref": filepath.ToSlash(file)}},
		{"relative file", map[string]any{"$ref": "other.json"}},
		{"parent directory", map[string]any{"$ref": "../" + filepath.Base(dir) + "/other.json"}},
		{"in a property", map[string]any{"properties": map[string]any{"p": map[string]any{"$ref": "other.json"}}}},
		{"behind an internal ref", map[string]any{"$ref": "#/$defs/x", "$defs": map[string]any{"x": map[string]any{"$ref": fileURL}}}},
		{"$schema", map[string]any{"$schema": fileURL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("move", tt.schema, Limits{})
			if err == nil {
				t.Fatalf("compiled a schema that refers to a file; Validate(1) = %v", s.Validate(json.RawMessage(`1`)))
			}
			for _, want := range []string{`tool "move"`, "outside itself", "never followed"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestCompileRefusesNetworkReferences(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()

	for name, schema := range map[string]string{
		"$ref":              `{"$ref": "` + srv.URL + `/point.json"}`,
		"$ref in property":  `{"properties": {"p": {"$ref": "` + srv.URL + `/point.json#/type"}}}`,
		"$schema":           `{"$schema": "` + srv.URL + `/meta"}`,
		"relative to $id":   `{"$id": "` + srv.URL + `/root.json", "properties": {"p": {"$ref": "point.json"}}}`,
		"$dynamicRef":       `{"$dynamicRef": "` + srv.URL + `/point.json#meta"}`,
		"draft-07 $ref":     `{"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "` + srv.URL + `/point.json"}`,
		"2019-09 recursive": `{"$schema": "https://json-schema.org/draft/2019-09/schema", "allOf": [{"$ref": "` + srv.URL + `/point.json"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Compile("move", json.RawMessage(schema), Limits{})
			if err == nil || !strings.Contains(err.Error(), "never followed") || !strings.Contains(err.Error(), srv.URL) {
				t.Fatalf("Compile(%s) error = %v, want a refusal naming %s", schema, err, srv.URL)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the server got %d requests; compiling must never reach the network", n)
	}
}

func TestCompileFollowsInternalReferences(t *testing.T) {
	tests := []struct {
		name, schema, valid, invalid, path string
	}{
		{"$defs 2020-12", `{"properties": {"p": {"$ref": "#/$defs/point"}},
			"$defs": {"point": {"type": "object", "required": ["x"]}}}`,
			`{"p": {"x": 1}}`, `{"p": {}}`, "/p"},
		{"definitions draft-07", `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"p": {"$ref": "#/definitions/point"}},
			"definitions": {"point": {"type": "object", "required": ["x"]}}}`,
			`{"p": {"x": 1}}`, `{"p": {}}`, "/p"},
		{"anchor", `{"properties": {"p": {"$ref": "#point"}},
			"$defs": {"point": {"$anchor": "point", "type": "object", "required": ["x"]}}}`,
			`{"p": {"x": 1}}`, `{"p": {}}`, "/p"},
		{"embedded $id", `{"properties": {"p": {"$ref": "point.json"}},
			"$defs": {"point": {"$id": "point.json", "type": "object", "required": ["x"]}}}`,
			`{"p": {"x": 1}}`, `{"p": {}}`, "/p"},
		{"recursive", `{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
			"properties": {"p": {"type": "object", "required": ["x"]}, "next": {"$ref": "#/$defs/node"}}}}}`,
			`{"next": {"next": {"p": {"x": 1}}}}`, `{"next": {"next": {"p": {}}}}`, "/next/next/p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("move", json.RawMessage(tt.schema), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Validate(json.RawMessage(tt.valid)); got != nil {
				t.Errorf("Validate(%s) = %v, want valid", tt.valid, got)
			}
			want := []Problem{{Path: tt.path, Message: `missing required property "x"`}}
			if got := s.Validate(json.RawMessage(tt.invalid)); !slices.Equal(got, want) {
				t.Errorf("Validate(%s) = %v, want %v", tt.invalid, got, want)
			}
		})
	}
}

func TestCompileCaps(t *testing.T) {
	// nested builds a schema whose JSON nests exactly levels deep: {"items":{"items":...{}}}.
	nested := func(levels int) string {
		return strings.Repeat(`{"items":`, levels-1) + "{}" + strings.Repeat("}", levels-1)
	}
	big := `{"description": "` + strings.Repeat("x", DefaultMaxSchemaBytes) + `"}`
	tests := []struct {
		name    string
		schema  any
		lim     Limits
		wantErr []string // all of these in the error; none means it must compile
	}{
		{"default size cap", json.RawMessage(big), Limits{}, []string{"MaxSchemaBytes", "262144"}},
		{"default size cap, decoded schema", map[string]any{"description": strings.Repeat("x", DefaultMaxSchemaBytes)}, Limits{}, []string{"MaxSchemaBytes", "262144"}},
		{"size cap set", json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string"}}}`), Limits{MaxSchemaBytes: 40}, []string{"MaxSchemaBytes", "40 bytes", "too large"}},
		{"size at the cap", json.RawMessage(`{"type":"object"}`), Limits{MaxSchemaBytes: 17}, nil},
		{"default depth cap", json.RawMessage(nested(DefaultMaxDepth + 1)), Limits{}, []string{"MaxDepth", "64 levels"}},
		{"depth at the default cap", json.RawMessage(nested(DefaultMaxDepth)), Limits{}, nil},
		{"depth cap set", json.RawMessage(nested(4)), Limits{MaxDepth: 3}, []string{"MaxDepth", "3 levels"}},
		{"decoded schema too deep", map[string]any{"items": map[string]any{"items": map[string]any{}}}, Limits{MaxDepth: 2}, []string{"MaxDepth", "2 levels"}},
		{"brackets in strings do not count", json.RawMessage(`{"pattern": "^[{[]+$", "description": "{{{{[[[[\"{{"}`), Limits{MaxDepth: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile("move", tt.schema, tt.lim)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Compile succeeded, want an error with %q", tt.wantErr)
			}
			for _, want := range append(tt.wantErr, `tool "move"`) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestCompileSchemaShapes(t *testing.T) {
	tests := []struct {
		name    string
		schema  any
		wantErr string // "" means it compiles
		args    string // checked when it compiles
		valid   bool
	}{
		{"true accepts everything", true, "", `{"anything": [1, "two"]}`, true},
		{"true as JSON text", json.RawMessage(`true`), "", `{"x": 1}`, true},
		{"false refuses everything", false, "", `{}`, false},
		{"empty object accepts everything", map[string]any{}, "", `{"x": 1}`, true},
		{"string", "object", "must be a JSON object or boolean, not a string", "", false},
		{"string as JSON text", json.RawMessage(`"object"`), "must be a JSON object or boolean, not a string", "", false},
		{"number", 3, "not a number", "", false},
		{"array", []any{map[string]any{}}, "not an array", "", false},
		{"null", nil, "not null", "", false},
		{"not JSON", json.RawMessage(`{"type": `), "is not valid JSON", "", false},
		{"trailing garbage", json.RawMessage(`{} {}`), "is not valid JSON", "", false},
		{"bad keyword value", map[string]any{"type": 5, "required": "a"},
			`is not a valid JSON Schema: /required: must be array but is string; /type: must match one of 2 alternatives`, "", false},
		{"bad pattern", map[string]any{"pattern": "(["},
			`is not a valid JSON Schema: /pattern: must be a valid regex but is "([" (error parsing regexp: missing closing ]`, "", false},
		{"pattern only ECMAScript understands", map[string]any{"properties": map[string]any{"a": map[string]any{"pattern": `^(?!\s*$).+`}}},
			"/properties/a/pattern: must be a valid regex", "", false},
		{"dangling $ref", map[string]any{"$ref": "#/$defs/missing"}, "not found", "", false},
		{"number with a huge exponent", json.RawMessage(`{"properties": {"speed": {"maximum": 1e999999}}}`),
			"cannot handle, at /properties/speed/maximum: number 1e999999", "", false},
		{"not encodable", map[string]any{"f": func() {}}, "cannot be encoded as JSON", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("move", tt.schema, Limits{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `tool "move"`) {
					t.Fatalf("error = %v, want one naming the tool and saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Validate(json.RawMessage(tt.args)); (got == nil) != tt.valid {
				t.Errorf("Validate(%s) = %v, want valid %v", tt.args, got, tt.valid)
			}
		})
	}
}

// Draft-specific behaviour: each schema means something different under its own draft than
// under 2020-12, so a passing case shows the "$schema" was honoured.
func TestCompileHonoursDraft(t *testing.T) {
	const (
		draft07     = "http://json-schema.org/draft-07/schema#"
		draft07Bare = "http://json-schema.org/draft-07/schema"
		draft04     = "http://json-schema.org/draft-04/schema#"
	)
	// Tuple "items" exists up to 2019-09; in 2020-12 "items" must be one schema.
	tuple := `{"properties": {"pair": {"items": [{"type": "string"}, {"type": "integer"}]}}}`
	// Up to draft-07, keywords beside "$ref" are ignored; from 2019-09 they apply.
	refSibling := `{"properties": {"x": {"$ref": "#/definitions/s", "maxLength": 2}}, "definitions": {"s": {"type": "string"}}}`
	// Draft-04's exclusiveMaximum is a boolean modifying "maximum"; from draft-06 it is a number.
	exclusive := `{"properties": {"speed": {"maximum": 1.5, "exclusiveMaximum": true}}}`

	withSchema := func(draft, schema string) string {
		return `{"$schema": "` + draft + `", ` + schema[1:]
	}
	tests := []struct {
		name    string
		schema  string
		args    string
		want    []Problem
		wantErr string
	}{
		{"draft-07 tuple items", withSchema(draft07, tuple), `{"pair": ["a", "b"]}`,
			[]Problem{{"/pair/1", "must be integer but is string"}}, ""},
		{"draft-07 without #", withSchema(draft07Bare, tuple), `{"pair": ["a", 1]}`, nil, ""},
		{"2020-12 refuses tuple items", tuple, "", nil, "/properties/pair/items: must be boolean or object but is array"},
		{"draft-07 ignores $ref siblings", withSchema(draft07, refSibling), `{"x": "abcd"}`, nil, ""},
		{"2020-12 applies $ref siblings", refSibling, `{"x": "abcd"}`,
			[]Problem{{"/x", "must be at most 2 characters long but is 4"}}, ""},
		{"draft-04 boolean exclusiveMaximum", withSchema(draft04, exclusive), `{"speed": 1.5}`,
			[]Problem{{"/speed", "must be < 1.5 but is 1.5"}}, ""},
		{"draft-04 boolean exclusiveMaximum, below", withSchema(draft04, exclusive), `{"speed": 1.4}`, nil, ""},
		{"2020-12 refuses boolean exclusiveMaximum", exclusive, "", nil, "/properties/speed/exclusiveMaximum: must be number but is boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("move", json.RawMessage(tt.schema), Limits{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Validate(json.RawMessage(tt.args)); !slices.Equal(got, tt.want) {
				t.Errorf("Validate(%s) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}
