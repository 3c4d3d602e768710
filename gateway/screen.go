package gateway

// Definition screening (SPEC.md §5 and §15, "everything a model reads is screened"). Models read
// much more of a tool than its description: the descriptions, titles, enum values, defaults and
// examples of its parameters at any depth, its output schema, its annotations, and the names of
// its properties. Tool poisoning hides in exactly those places, so the tool_definition guards see
// every string a client is shown — of tools, prompts, resources and resource templates — each
// named by its path (inputSchema.properties.target.description), never by its text.
//
// What is screened:
//   - tools: name, title, description, annotations.title, and every string of the input and
//     output schemas: the values of every keyword (description, title, enum, const, default,
//     examples, pattern, format, $ref, vendor extensions, …) at any depth, through properties,
//     patternProperties, $defs/definitions, items/prefixItems, allOf/anyOf/oneOf, not/if/then/
//     else, dependentSchemas and the rest; and every name an upstream chose: property names,
//     patternProperties patterns, $defs names, vendor keyword names, and the keys of objects
//     inside enum, const, default and examples. JSON Schema's own keyword names are not
//     screened: they are the vocabulary, not upstream text.
//   - prompts: name, title, description, and each argument's name, title and description.
//   - resources: uri, name, title, description, mimeType; templates: uriTemplate and the same.
//
// Paths spell a name only when it is plain (letters, digits, _ - $, at most 64) and no guard
// flagged it; otherwise the name is given by position among its object's keys in sorted order,
// <key N>, so that a path never quotes flagged text.
//
// A redacting guard's redaction replaces a text only where rewriting cannot change what the
// item accepts or how it is called: titles, descriptions, examples, defaults, $comment, vendor
// extensions. Everywhere else (enum and const values, patterns, formats, types, references,
// required lists, names, URIs, MIME types) a redact finding withholds the item like a block:
// a rewritten enum value would change which arguments are valid.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
)

// defText is one string of a definition a client sees.
type defText struct {
	path string
	text string
	// name: the text is an object key (a property name, …), spelled in the paths below it.
	name bool
	// rewritable: a redaction may replace it without changing what the item accepts.
	rewritable bool
	// set writes a redaction back into the copy being screened; nil when not rewritable.
	set func(string)
}

// defWalker collects the texts of one definition.
type defWalker struct {
	texts []defText
	// hide holds the paths of name texts a guard flagged: the paths below them give the name
	// by position.
	hide map[string]bool
}

func (w *defWalker) add(path, text string, rewritable bool, set func(string)) {
	if text == "" {
		return
	}
	if !rewritable {
		set = nil
	}
	w.texts = append(w.texts, defText{path: path, text: text, rewritable: rewritable, set: set})
}

// plainName is a key a path may spell as it is.
var plainName = regexp.MustCompile(`^[A-Za-z0-9_$-]{1,64}$`)

func join(parent, step string) string {
	if parent == "" {
		return step
	}
	return parent + "." + step
}

// key screens the key at position pos (1-based, sorted order) of the object at parent and
// returns the path of its value.
func (w *defWalker) key(parent, key string, pos int) string {
	at := join(parent, "<key "+strconv.Itoa(pos)+">")
	if key != "" {
		w.texts = append(w.texts, defText{path: at, text: key, name: true})
	}
	if w.hide[at] || !plainName.MatchString(key) {
		return at
	}
	return join(parent, key)
}

func index(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// JSON Schema keywords (draft-07 and 2020-12) by what their values hold.
var (
	// schemaMaps hold names chosen by the upstream, each leading to a schema.
	schemaMaps = keywords("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
	// schemaOne hold one schema (items also an array of them, in draft-07).
	schemaOne = keywords("additionalProperties", "additionalItems", "unevaluatedItems", "unevaluatedProperties",
		"propertyNames", "contains", "not", "if", "then", "else", "items", "contentSchema")
	// schemaLists hold arrays of schemas.
	schemaLists = keywords("allOf", "anyOf", "oneOf", "prefixItems")
	// annotations change nothing a validator checks: a redaction may rewrite them.
	annotationKeywords = keywords("description", "title", "examples", "example", "default", "$comment")
	// validating keywords (and identifiers) whose strings must not be rewritten.
	otherKeywords = keywords("type", "enum", "const", "pattern", "format", "required", "dependentRequired",
		"dependencies", "$ref", "$dynamicRef", "$recursiveRef", "$id", "$schema", "$anchor", "$dynamicAnchor",
		"$recursiveAnchor", "$vocabulary", "contentMediaType", "contentEncoding", "minLength", "maxLength",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
		"uniqueItems", "minContains", "maxContains", "minProperties", "maxProperties", "readOnly", "writeOnly",
		"deprecated", "nullable")
)

func keywords(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// schema collects the strings of a schema at path. v is a plain decoded value (maps, slices,
// strings, json.Number, bools); the setters write into it.
func (w *defWalker) schema(path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return // true, false, or not a schema: nothing a model reads as text
	}
	for pos, k := range sortedKeys(m) {
		val := m[k]
		at := join(path, k)
		switch {
		case schemaMaps[k]:
			sub, ok := val.(map[string]any)
			if !ok {
				w.data(at, val, false, nil)
				continue
			}
			for i, name := range sortedKeys(sub) {
				w.schema(w.key(at, name, i+1), sub[name])
			}
		case schemaOne[k]:
			if list, ok := val.([]any); ok {
				for i, s := range list {
					w.schema(index(at, i), s)
				}
			} else {
				w.schema(at, val)
			}
		case schemaLists[k]:
			list, _ := val.([]any)
			for i, s := range list {
				w.schema(index(at, i), s)
			}
		case k == "dependencies":
			// draft-07: a property's dependencies are names, or a schema.
			deps, ok := val.(map[string]any)
			if !ok {
				w.data(at, val, false, nil)
				continue
			}
			for i, name := range sortedKeys(deps) {
				p := w.key(at, name, i+1)
				if _, isSchema := deps[name].(map[string]any); isSchema {
					w.schema(p, deps[name])
				} else {
					w.data(p, deps[name], false, nil)
				}
			}
		case annotationKeywords[k]:
			w.data(at, val, true, func(s string) { m[k] = s })
		case otherKeywords[k]:
			w.data(at, val, false, nil)
		default:
			// A vendor extension ("x-llm-hint"): its name and its value are upstream text, and
			// no validator reads it.
			w.data(w.key(path, k, pos+1), val, true, func(s string) { m[k] = s })
		}
	}
}

// data collects every string of a JSON value at path, the keys of its objects included.
func (w *defWalker) data(path string, v any, rewritable bool, set func(string)) {
	switch x := v.(type) {
	case string:
		w.add(path, x, rewritable, set)
	case []any:
		for i, e := range x {
			w.data(index(path, i), e, rewritable, func(s string) { x[i] = s })
		}
	case map[string]any:
		for i, k := range sortedKeys(x) {
			w.data(w.key(path, k, i+1), x[k], rewritable, func(s string) { x[k] = s })
		}
	}
}

// toolTexts collects the texts of a tool definition as clients see it. It screens a copy of the
// schemas; the returned function gives the definition with the redactions written back.
func toolTexts(def *mcp.Tool, hide map[string]bool) ([]defText, func() *mcp.Tool, error) {
	in, err := canonicalValue(def.InputSchema)
	if err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	out, err := canonicalValue(def.OutputSchema)
	if err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	c := *def
	if def.Annotations != nil {
		a := *def.Annotations
		c.Annotations = &a
	}
	schemasChanged := false
	w := &defWalker{hide: hide}
	w.add("name", c.Name, false, nil)
	w.add("title", c.Title, true, func(s string) { c.Title = s })
	w.add("description", c.Description, true, func(s string) { c.Description = s })
	if c.Annotations != nil {
		w.add("annotations.title", c.Annotations.Title, true, func(s string) { c.Annotations.Title = s })
	}
	n := len(w.texts)
	w.schema("inputSchema", in)
	w.schema("outputSchema", out)
	for i := n; i < len(w.texts); i++ {
		if write := w.texts[i].set; write != nil {
			w.texts[i].set = func(s string) { write(s); schemasChanged = true }
		}
	}
	return w.texts, func() *mcp.Tool {
		if schemasChanged {
			c.InputSchema = in
			if def.OutputSchema != nil {
				c.OutputSchema = out
			}
		}
		return &c
	}, nil
}

// promptTexts collects the texts of a prompt; the redactions are written into p, a copy of the
// upstream's prompt whose arguments it copies in turn.
func promptTexts(p *mcp.Prompt, hide map[string]bool) []defText {
	p.Arguments = slices.Clone(p.Arguments)
	w := &defWalker{hide: hide}
	w.add("name", p.Name, false, nil)
	w.add("title", p.Title, true, func(s string) { p.Title = s })
	w.add("description", p.Description, true, func(s string) { p.Description = s })
	for i, a := range p.Arguments {
		if a == nil {
			continue
		}
		c := *a
		p.Arguments[i] = &c
		at := index("arguments", i)
		w.add(at+".name", c.Name, false, nil)
		w.add(at+".title", c.Title, true, func(s string) { c.Title = s })
		w.add(at+".description", c.Description, true, func(s string) { c.Description = s })
	}
	return w.texts
}

// resourceTexts collects the texts of a resource or resource template (uri is its URI or URI
// template); the redactions go through the setters given.
func resourceTexts(uriKey, uri, name string, title, desc *string, mime string) []defText {
	w := &defWalker{}
	w.add(uriKey, uri, false, nil)
	w.add("name", name, false, nil)
	w.add("title", *title, true, func(s string) { *title = s })
	w.add("description", *desc, true, func(s string) { *desc = s })
	w.add("mimeType", mime, false, nil)
	return w.texts
}

// screened is the outcome of screening one definition.
type screened struct {
	res guards.Result
	// withheld: a finding keeps the item out; reason says which guard, what and where.
	withheld bool
	reason   string
	// nameFlagged: a guard flagged the item's own name (or URI), which messages must not spell.
	nameFlagged bool
}

// screenTexts runs set over the texts collect gives and applies the redactions that may be
// applied. When a guard flags a name, the texts are collected again with that name hidden from
// the paths below it and screened again, so that no finding's path spells it.
func screenTexts(ctx context.Context, set *guards.Set, server, public, nameKey string, collect func(hide map[string]bool) []defText) screened {
	texts := collect(nil)
	res, out := set.CheckTexts(ctx, server, public, asGuardTexts(texts))
	if hide := flaggedNames(texts, res); len(hide) > 0 {
		texts = collect(hide)
		res, out = set.CheckTexts(ctx, server, public, asGuardTexts(texts))
	}
	s := screened{res: res}
	byPath := make(map[string]*defText, len(texts))
	for i := range texts {
		byPath[texts[i].path] = &texts[i]
	}
	for _, f := range res.Findings {
		if f.Path == nameKey {
			s.nameFlagged = true
		}
	}
	switch res.Action {
	case guards.ActionBlock, guards.ActionEscalate:
		s.withheld, s.reason = true, res.Reason
		return s
	case guards.ActionRedact:
		for _, f := range res.Findings {
			if f.Mode != guards.ModeEnforce || f.Action != guards.ActionRedact {
				continue
			}
			if t := byPath[f.Path]; t == nil || !t.rewritable {
				s.withheld = true
				s.reason = fmt.Sprintf("guard %q found %s at %s, which a redaction cannot rewrite without changing what the item accepts, so it counts as a block", f.Guard, f.Category, f.Path)
				s.res.Action, s.res.Blocked, s.res.Reason = guards.ActionBlock, true, s.reason
				return s
			}
		}
		for i, t := range texts {
			if out[i] != t.text && t.set != nil {
				t.set(out[i])
			}
		}
	}
	return s
}

func asGuardTexts(texts []defText) []guards.Text {
	out := make([]guards.Text, len(texts))
	for i, t := range texts {
		out[i] = guards.Text{Path: t.path, Text: t.text}
	}
	return out
}

// flaggedNames are the paths of the name texts with a finding.
func flaggedNames(texts []defText, res guards.Result) map[string]bool {
	var hide map[string]bool
	for _, f := range res.Findings {
		for _, t := range texts {
			if t.name && t.path == f.Path {
				if hide == nil {
					hide = map[string]bool{}
				}
				hide[f.Path] = true
			}
		}
	}
	return hide
}

// The kinds of withheld items.
const (
	KindTool             = "tool"
	KindPrompt           = "prompt"
	KindResource         = "resource"
	KindResourceTemplate = "resource_template"
)

// Withheld is an upstream definition that tool_definition guards keep out of the lists: not
// listed, not callable, not readable. It is what the running gateway last screened.
type Withheld struct {
	Kind   string `json:"kind"`
	Server string `json:"server"`
	// Name is the upstream's name for it (a resource's URI, a template's URI template); ""
	// when a guard flagged that name itself.
	Name string `json:"name,omitempty"`
	// Findings name the guard, category and path of each finding, never the text.
	Findings []guards.Finding `json:"findings"`
	Reason   string           `json:"reason"`
}

// withheldItems are the items the last catalog rebuild withheld. Written under syncMu.
type withheldItems struct {
	mu       sync.Mutex
	tools    []Withheld
	features []Withheld
}

func (w *withheldItems) setTools(list []Withheld) {
	w.mu.Lock()
	w.tools = list
	w.mu.Unlock()
}

func (w *withheldItems) setFeatures(list []Withheld) {
	w.mu.Lock()
	w.features = list
	w.mu.Unlock()
}

// all is every withheld item: tools first, then prompts, resources and templates.
func (w *withheldItems) all() []Withheld {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(slices.Clone(w.tools), w.features...)
}

// withheldMessage is the log line and refusal for a withheld item: what was kept out, why,
// and what an operator can do.
func withheldMessage(kind, server, name string, s screened) string {
	word := strings.ReplaceAll(kind, "_", " ")
	what := word + " " + name
	if name == "" || s.nameFlagged {
		what = "a " + word + " (its name is not repeated: a guard flagged it)"
	}
	return fmt.Sprintf("%s of server %s is withheld: its definition failed a tool_definition guard (%s). "+
		"It is not listed and cannot be used. An operator must review the server (`%s` names the path of each finding); "+
		"it returns once its definition passes the guards", what, server, s.reason, pastable.Command("pins", "list"))
}

func withheldEntry(kind, server, name string, s screened) Withheld {
	if s.nameFlagged {
		name = ""
	}
	findings := s.res.Findings
	if findings == nil {
		findings = []guards.Finding{}
	}
	return Withheld{Kind: kind, Server: server, Name: name, Findings: findings, Reason: s.reason}
}
