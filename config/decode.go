package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
)

// The decoder walks the yaml.Node tree itself instead of handing it to yaml.Decoder with
// KnownFields(true). It follows that decoder's rules (unknown and duplicate keys are errors;
// anchors, aliases and << merge keys work; scalars are converted by yaml.Node.Decode), but it
// keeps going after a problem, so it can report every unknown key, wrong type and duplicate key
// with its line and where it sits ("servers[1] (arm): tools.include[0]"). It is stricter in two
// places: a setting written with no value (null) is an error rather than silently zero, and a
// fraction is not truncated into a whole number.

// maxVisits bounds the work of one Parse. Aliases let a small file name the same subtree many
// times (the "billion laughs"); a real configuration stays far below this.
const maxVisits = 200_000

// maxMergeDepth bounds merge keys that merge mappings that merge mappings, and stops a mapping
// that merges itself.
const maxMergeDepth = 16

type decoder struct {
	file    string
	data    []byte // the file's text, for positions inside block scalars
	errs    Errors
	visits  int
	tooMany bool
	// src records, for every struct, map and slice decoded (by its address), where it was
	// written and which keys it had, so the checks after decoding know what was given and where.
	src map[any]*source
	// llmErrors are the paths inside the llm section (LLM.Line's) of the problems found there
	// ("" for the section itself), so that Options.CheckLLM's problems about the same settings
	// are left out.
	llmErrors []string
	// guardErrors are the paths of the problems found in the guardrails section
	// ("guardrails.output[0].id"), so that Options.CheckGuardrails' problems about the same
	// settings are left out.
	guardErrors []string
	// policyErrors are the paths of the problems found in the policies section
	// ("policies.rules[0].id"), so that Options.CheckPolicies' problems about the same settings
	// are left out.
	policyErrors []string
}

// source is what the file said for one struct, map or slice.
type source struct {
	line  int              // of the mapping or list
	keys  map[string]entry // of a mapping
	items []entry          // the elements of a list, without names
}

// entry is one key of a mapping.
type entry struct {
	name  string
	line  int        // of the key
	value *yaml.Node // as written; may be an alias
	ok    bool       // the value decoded without a problem
	null  bool       // the value was null ("tools:" with nothing under it)
}

// has reports whether key was given, even with a bad value.
func (s *source) has(key string) bool {
	_, ok := s.keys[key]
	return ok
}

// valid reports whether key was given and its value decoded.
func (s *source) valid(key string) bool {
	return s.keys[key].ok
}

// given reports whether key was given with a value other than null.
func (s *source) given(key string) bool {
	e, ok := s.keys[key]
	return ok && !e.null
}

// lineOf is the line of key, or of the mapping when key was not given.
func (s *source) lineOf(key string) int {
	if e, ok := s.keys[key]; ok {
		return e.line
	}
	return s.line
}

// valueLine is the line of key's value, or of the mapping when key was not given.
func (s *source) valueLine(key string) int {
	if e, ok := s.keys[key]; ok {
		return e.value.Line
	}
	return s.line
}

// itemLine is the line of element i of a list, or fallback when it is not known.
func (s *source) itemLine(i, fallback int) int {
	if s != nil && i < len(s.items) {
		return s.items[i].line
	}
	return fallback
}

// itemOK reports whether element i of a list decoded without a problem.
func (s *source) itemOK(i int) bool {
	return s != nil && i < len(s.items) && s.items[i].ok
}

// location is where a value sits, for messages: head names a list element by index and name
// ("servers[1] (arm)"), path the keys below it ("tools.include[0]").
type location struct {
	head, path string
}

func (l location) field(name string) location {
	if l.path == "" {
		l.path = name
	} else {
		l.path += "." + name
	}
	return l
}

func (l location) index(i int, label string) location {
	l.path += "[" + strconv.Itoa(i) + "]"
	if label != "" {
		l.head = l.String() + " (" + label + ")"
		l.path = ""
	}
	return l
}

// plain is l's full path without the elements' labels: "servers[1].tools.include[0]".
func (l location) plain() string {
	p := l.path
	if head := l.head; head != "" {
		if i := strings.LastIndex(head, " ("); i >= 0 && strings.HasSuffix(head, ")") {
			head = head[:i] // the element's label
		}
		if p != "" && !strings.HasPrefix(p, "[") {
			p = "." + p
		}
		p = head + p
	}
	return p
}

// llmPath is the path of l inside the llm section (LLM.Line's: "rules[0].reply.text"), and
// whether l is inside it.
func (l location) llmPath() (string, bool) {
	p := l.plain()
	switch {
	case p == "llm":
		return "", true
	case strings.HasPrefix(p, "llm."):
		return p[len("llm."):], true
	}
	return "", false
}

func (l location) String() string {
	switch {
	case l.head == "":
		return l.path
	case l.path == "":
		return l.head
	default:
		return l.head + ": " + l.path
	}
}

func newDecoder(file string) *decoder {
	return &decoder{file: file, src: map[any]*source{}}
}

// errorf records a problem at line, prefixed with where it is.
func (d *decoder) errorf(line int, loc location, format string, args ...any) {
	if p, ok := loc.llmPath(); ok {
		d.llmErrors = append(d.llmErrors, p)
	}
	if p := loc.plain(); strings.HasPrefix(p, "guardrails.") {
		d.guardErrors = append(d.guardErrors, p)
	} else if strings.HasPrefix(p, "policies.") {
		d.policyErrors = append(d.policyErrors, p)
	}
	if where := loc.String(); where != "" {
		format = "%s: " + format
		args = append([]any{where}, args...)
	}
	d.errs.add(d.file, line, format, args...)
}

// spend counts n units of work and reports whether the budget allows them.
func (d *decoder) spend(n int) bool {
	d.visits += n
	if d.visits <= maxVisits {
		return true
	}
	if !d.tooMany {
		d.tooMany = true
		d.errorf(0, location{}, "the file expands to more than %d values through aliases; write it out plainly", maxVisits)
	}
	return false
}

// resolve follows an alias to the node it names.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// nodeDecoder is a type that reads its own value, one that may take more than one shape
// (env_inherit: a list or the word all). decodeNode reports its problems with d.errorf and
// whether n decoded without one; n is never an alias.
type nodeDecoder interface {
	decodeNode(d *decoder, n *yaml.Node, loc location) bool
}

// value decodes n into v and reports whether it decoded without a problem.
func (d *decoder) value(n *yaml.Node, v reflect.Value, loc location) bool {
	n = d.resolve(n)
	if n == nil || !d.spend(1) {
		return false
	}
	if v.CanAddr() {
		if own, ok := v.Addr().Interface().(nodeDecoder); ok {
			return own.decodeNode(d, n, loc)
		}
	}
	if v.Type() == reflect.TypeFor[*yaml.Node]() {
		// A value of any shape (a scripted tool call's arguments), decoded by its user.
		v.Set(reflect.ValueOf(n))
		return true
	}
	switch v.Kind() {
	case reflect.Struct:
		if isNull(n) {
			return true // "tools:" with nothing under it is the same as no tools key
		}
		return d.structure(n, v, loc)
	case reflect.Slice:
		if isNull(n) {
			return true
		}
		return d.sequence(n, v, loc)
	case reflect.Map:
		if isNull(n) {
			return true
		}
		return d.mapping(n, v, loc)
	case reflect.Pointer:
		if v.Type().Elem().Kind() != reflect.Struct {
			return d.scalar(n, v, loc)
		}
		if isNull(n) {
			return true
		}
		p := reflect.New(v.Type().Elem())
		ok := d.structure(n, p.Elem(), loc)
		v.Set(p)
		return ok
	default:
		return d.scalar(n, v, loc)
	}
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, loc location) bool {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, v.Type(), loc)
		return false
	}
	t := v.Type()
	known := yamlFields(t)
	src := &source{line: n.Line, keys: map[string]entry{}}
	var rest *yaml.Node
	for _, e := range d.entries(n, loc, 0) {
		i, ok := known.index[e.name]
		if !ok && known.rest >= 0 {
			if rest == nil {
				rest = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: e.line}
			}
			rest.Content = append(rest.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: e.name, Line: e.line}, d.resolve(e.value))
			continue
		}
		if !ok {
			d.unknownKey(e, t, known.names, loc)
			continue
		}
		e.ok = d.value(e.value, v.Field(i), loc.field(e.name))
		if val := d.resolve(e.value); val != nil {
			e.null = isNull(val)
		}
		src.keys[e.name] = e
	}
	if rest != nil {
		v.Field(known.rest).Set(reflect.ValueOf(rest))
	}
	d.record(v, src)
	return true
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, loc location) bool {
	if n.Kind != yaml.SequenceNode {
		d.typeError(n, v.Type(), loc)
		return false
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	src := &source{line: n.Line}
	ok := true
	for i, el := range n.Content {
		item := entry{line: el.Line, value: el}
		if r := d.resolve(el); r != nil && isNull(r) && s.Index(i).Kind() == reflect.Struct {
			// A bare "-" in servers is a missing server, not a server with every default.
			d.typeError(r, s.Index(i).Type(), loc.index(i, ""))
		} else {
			item.ok = d.value(el, s.Index(i), loc.index(i, d.label(el)))
		}
		ok = ok && item.ok
		src.items = append(src.items, item)
	}
	v.Set(s)
	d.record(v, src)
	return ok
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, loc location) bool {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, v.Type(), loc)
		return false
	}
	m := reflect.MakeMap(v.Type())
	src := &source{line: n.Line, keys: map[string]entry{}}
	ok := true
	for _, e := range d.entries(n, loc, 0) {
		ev := reflect.New(v.Type().Elem()).Elem()
		e.ok = d.value(e.value, ev, loc.field(e.name))
		ok = ok && e.ok
		src.keys[e.name] = e
		m.SetMapIndex(reflect.ValueOf(e.name).Convert(v.Type().Key()), ev)
	}
	v.Set(m)
	d.record(v, src)
	return ok
}

// record remembers where v was written. A value inside a map is decoded into a copy, so its
// record is never looked up; the checks reach it through the map's own record.
func (d *decoder) record(v reflect.Value, src *source) {
	if v.CanAddr() {
		d.src[v.Addr().Interface()] = src
	}
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, loc location) bool {
	if n.Kind != yaml.ScalarNode {
		d.typeError(n, v.Type(), loc)
		return false
	}
	if isNull(n) {
		d.errorf(n.Line, loc, "no value; give %s, or remove the key to get the default", expect(v.Type()))
		return false
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		d.typeError(n, v.Type(), loc)
		return false
	}
	if v.CanInt() && n.ShortTag() == "!!float" {
		// yaml.v3 truncates 1.5 to 1 in an int; only a whole number is one.
		var f float64
		if err := n.Decode(&f); err != nil || f != math.Trunc(f) {
			d.typeError(n, v.Type(), loc)
			return false
		}
	}
	return true
}

// entries lists the keys of mapping n in order, with << merge keys expanded: a key written in
// n wins over a merged one, and an earlier merged mapping over a later one, as YAML says. A key
// written twice in n, or a key that is not a scalar, is reported and left out.
func (d *decoder) entries(n *yaml.Node, loc location, depth int) []entry {
	if !d.spend(len(n.Content) / 2) {
		return nil
	}
	var own, merged []entry
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.merge(k, val, loc, depth)...)
			continue
		}
		key := d.resolve(k)
		if key == nil {
			continue
		}
		if key.Kind != yaml.ScalarNode {
			d.errorf(k.Line, loc, "a key must be a plain name, not %s", describe(key))
			continue
		}
		if first, dup := seen[key.Value]; dup {
			d.errorf(k.Line, loc, "duplicate key %q; it is already given at line %d", key.Value, first)
			continue
		}
		seen[key.Value] = k.Line
		own = append(own, entry{name: key.Value, line: k.Line, value: val})
	}
	for _, e := range merged {
		if _, dup := seen[e.name]; !dup {
			seen[e.name] = e.line
			own = append(own, e)
		}
	}
	return own
}

// merge returns the entries a << key brings in: one mapping, or a list of mappings.
func (d *decoder) merge(k, val *yaml.Node, loc location, depth int) []entry {
	if depth >= maxMergeDepth {
		d.errorf(k.Line, loc, "<< merges are nested more than %d deep (does a mapping merge itself?)", maxMergeDepth)
		return nil
	}
	n := d.resolve(val)
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		return d.entries(n, loc, depth+1)
	case yaml.SequenceNode:
		var out []entry
		for _, el := range n.Content {
			m := d.resolve(el)
			if m == nil || m.Kind != yaml.MappingNode {
				d.errorf(el.Line, loc, "<< merges mappings only, not %s", describe(m))
				continue
			}
			out = append(out, d.entries(m, loc, depth+1)...)
		}
		return out
	default:
		d.errorf(k.Line, loc, "<< merges a mapping or a list of mappings, not %s", describe(n))
		return nil
	}
}

// label is the name of a list element that is a mapping with a scalar name key, for messages.
func (d *decoder) label(el *yaml.Node) string {
	n := d.resolve(el)
	if n == nil || n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], d.resolve(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Value == "name" && v != nil && v.Kind == yaml.ScalarNode && v.Value != "" {
			return truncate(v.Value)
		}
	}
	return ""
}

// nouns name each struct in "unknown key ... in <noun>".
var nouns = map[reflect.Type]string{
	reflect.TypeFor[Config]():         "at the top level",
	reflect.TypeFor[Gateway]():        "in the gateway section",
	reflect.TypeFor[Server]():         "in a server",
	reflect.TypeFor[Tools]():          "in tools",
	reflect.TypeFor[ToolOverride]():   "in a tool override",
	reflect.TypeFor[LLM]():            "in the llm section",
	reflect.TypeFor[ScriptRule]():     "in a scripted rule",
	reflect.TypeFor[ScriptReply]():    "in a scripted reply",
	reflect.TypeFor[ScriptToolCall](): "in a scripted tool call",
	reflect.TypeFor[ScriptUsage]():    "in a scripted usage",
}

func (d *decoder) unknownKey(e entry, t reflect.Type, known []string, loc location) {
	knownList := strings.Join(known, ", ")
	hint := ""
	if c := suggest.Closest(e.name, known); c != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", c)
	}
	where := ""
	if n := nouns[t]; n != "" {
		where = " " + n
	}
	d.errorf(e.line, loc, "unknown key %q%s%s; known keys: %s", truncate(e.name), where, hint, knownList)
}

func (d *decoder) typeError(n *yaml.Node, t reflect.Type, loc location) {
	got := describe(n)
	if n.Kind == yaml.ScalarNode && (strings.HasPrefix(loc.path, "headers_env") || strings.HasPrefix(loc.path, "llm.headers_env")) {
		// Someone who writes the header's value here instead of a variable name wrote a secret.
		got = "a single value"
	}
	d.errorf(n.Line, loc, "expected %s, got %s", expect(t), got)
}

// expect says what a value of Go type t looks like in YAML.
func expect(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem() // an optional value (temperature, max_retries) looks like the value
	}
	if t == reflect.TypeFor[Duration]() {
		return "a duration such as 90s, 5m or 1h30m"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "a mapping of names to strings"
		}
		return "a mapping"
	default:
		return "a mapping"
	}
}

// describe says what a node is, for messages.
func describe(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "no value"
	default:
		return strconv.Quote(truncate(n.Value))
	}
}

// truncate keeps messages readable when a value is long.
func truncate(s string) string {
	const limit = 60
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// fields is the yaml keys of a struct type, in declaration order, and their field indexes.
type fields struct {
	names []string
	index map[string]int
	// rest is the index of a *yaml.Node field tagged `yaml:",inline"`, which collects the keys
	// the struct does not know (a guard's own settings, checked by the guard); -1 when none.
	rest int
}

func yamlFields(t reflect.Type) fields {
	f := fields{index: map[string]int{}, rest: -1}
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" && opts == "inline" && t.Field(i).Type == reflect.TypeFor[*yaml.Node]() {
			f.rest = i
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		f.names = append(f.names, name)
		f.index[name] = i
	}
	return f
}
