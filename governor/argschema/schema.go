package argschema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The caps a zero [Limits] field stands for.
const (
	DefaultMaxSchemaBytes = 256 << 10
	DefaultMaxDepth       = 64
)

// Limits caps the input schemas [Compile] accepts. A field that is zero or negative takes its
// default.
type Limits struct {
	// MaxSchemaBytes caps the length of the schema's JSON text (default 256 KiB).
	MaxSchemaBytes int
	// MaxDepth caps how deeply objects and arrays nest in the schema's JSON text (default 64).
	MaxDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSchemaBytes <= 0 {
		l.MaxSchemaBytes = DefaultMaxSchemaBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// Schema is a compiled input schema. It is never changed after [Compile] returns it, so one
// Schema serves concurrent calls.
type Schema struct {
	sch *jsonschema.Schema
	// allowed holds, for each subschema with "additionalProperties": false, the text that tells
	// a model which property names it accepts, keyed by the subschema's location.
	allowed map[string]string
	// plan checks valid arguments without the library (fastpath.go); nil if the schema uses
	// keywords it does not know.
	plan *plan
}

// location is the URL every schema is compiled under. It names no file and no host; a relative
// reference resolves against it to another URL of the same scheme, which noLoader refuses like
// any other.
const location = "tool:///input-schema.json"

// maxListedProperties is how many property names a "not allowed" message lists at most; beyond
// that the list would drown the error it explains.
const maxListedProperties = 20

// Compile checks schema against lim and compiles it. schema is the tool's inputSchema as decoded
// JSON (map[string]any, bool) or its JSON text (json.RawMessage, []byte). The error names the
// tool and says what is wrong: a cap exceeded (and its limit), a reference outside the schema,
// a keyword the schema's draft does not allow. Compile never panics.
func Compile(tool string, schema any, lim Limits) (s *Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("input schema of tool %q could not be compiled: the compiler failed on it (%v)", tool, r)
		}
	}()
	doc, err := decode(schema, lim.withDefaults())
	if err != nil {
		return nil, fmt.Errorf("input schema of tool %q %w", tool, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(location, doc); err != nil {
		return nil, fmt.Errorf("input schema of tool %q could not be compiled: %w", tool, err)
	}
	sch, err := c.Compile(location)
	var refused *jsonschema.LoadURLError
	if errors.As(err, &refused) {
		return nil, fmt.Errorf("input schema of tool %q refers to %q, outside itself: %w", tool, refused.URL, refused.Err)
	}
	var invalid *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if errors.As(err, &invalid) && errors.As(invalid.Err, &verr) {
		return nil, fmt.Errorf("input schema of tool %q is not a valid JSON Schema: %s", tool, schemaProblems(verr))
	}
	if err != nil {
		return nil, fmt.Errorf("input schema of tool %q could not be compiled: %w", tool, err)
	}
	return &Schema{sch: sch, allowed: allowedHints(sch), plan: newPlan(sch)}, nil
}

// decode returns the schema as the library wants it (numbers as json.Number), after checking
// the caps on its JSON text, so an oversized or deeply nested schema is refused before it is
// decoded. Its errors complete the sentence "input schema of tool X ...".
func decode(schema any, lim Limits) (any, error) {
	var raw []byte
	switch v := schema.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("cannot be encoded as JSON: %w", err)
		}
		raw = b
	}
	if len(raw) > lim.MaxSchemaBytes {
		return nil, fmt.Errorf("is too large: %d bytes, over the MaxSchemaBytes cap of %d bytes", len(raw), lim.MaxSchemaBytes)
	}
	depth, odd := scan(raw)
	if depth > lim.MaxDepth {
		return nil, fmt.Errorf("is nested too deeply: over the MaxDepth cap of %d levels", lim.MaxDepth)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("is not valid JSON: %w", err)
	}
	switch doc.(type) {
	case map[string]any, bool:
	default:
		return nil, fmt.Errorf("must be a JSON object or boolean, not %s", typeName(doc))
	}
	if odd {
		var found []Problem
		oddNumbers(doc, nil, &found)
		if len(found) > 0 {
			return nil, fmt.Errorf("has a number the validator cannot handle, at %s", sortProblems(found)[0])
		}
	}
	return doc, nil
}

// schemaProblems is the one-line account of why a schema fails its metaschema: each problem
// with its JSON pointer into the schema.
func schemaProblems(verr *jsonschema.ValidationError) string {
	problems := new(Schema).problems(verr)
	texts := make([]string, len(problems))
	for i, p := range problems {
		texts[i] = cmp.Or(p.Path, "(schema root)") + ": " + p.Message
	}
	return strings.Join(texts, "; ")
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// noLoader is the compiler's only loader. It refuses every URL, so compiling a schema never
// reads a file or opens a connection, whatever its "$ref", "$id" or "$schema" say. The
// metaschemas of the known drafts are embedded in the library and never reach a loader.
type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New(`references to files and URLs are never followed; refer inside the schema instead, like "#/$defs/name"`)
}

// allowedHints walks every subschema reachable from root and, for those that forbid additional
// properties, writes down which names they accept. Done once here, a failing call only looks up
// a string.
func allowedHints(root *jsonschema.Schema) map[string]string {
	hints := map[string]string{}
	seen := map[*jsonschema.Schema]bool{}
	var visit func(*jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		if ap, ok := s.AdditionalProperties.(bool); ok && !ap {
			hints[s.Location] = allowedHint(s)
		}
		for _, sub := range subschemas(s) {
			visit(sub)
		}
	}
	visit(root)
	return hints
}

// allowedHint is the parenthesis of a "property ... is not allowed" message, or "" when the
// schema allows too many names to list.
func allowedHint(s *jsonschema.Schema) string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	patterns := make([]string, 0, len(s.PatternProperties))
	for re := range s.PatternProperties {
		patterns = append(patterns, "names matching "+re.String())
	}
	slices.Sort(patterns)
	allowed := append(names, patterns...)
	switch {
	case len(allowed) == 0:
		return "this object takes no properties"
	case len(allowed) > maxListedProperties:
		return ""
	}
	return "allowed: " + strings.Join(allowed, ", ")
}

// subschemas lists the schemas s applies directly, through any keyword.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	subs := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else,
		s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems,
		s.ContentSchema}
	if s.DynamicRef != nil {
		subs = append(subs, s.DynamicRef.Ref)
	}
	subs = append(subs, s.AllOf...)
	subs = append(subs, s.AnyOf...)
	subs = append(subs, s.OneOf...)
	subs = append(subs, s.PrefixItems...)
	for _, sub := range s.Properties {
		subs = append(subs, sub)
	}
	for _, sub := range s.PatternProperties {
		subs = append(subs, sub)
	}
	for _, sub := range s.DependentSchemas {
		subs = append(subs, sub)
	}
	for _, dep := range s.Dependencies {
		if sub, ok := dep.(*jsonschema.Schema); ok {
			subs = append(subs, sub)
		}
	}
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			subs = append(subs, v)
		case []*jsonschema.Schema:
			subs = append(subs, v...)
		}
	}
	return subs
}
