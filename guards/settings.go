package guards

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeSettings decodes a guard's settings (a mapping node, or nil for none) into out, a
// pointer to the guard's settings struct, strictly: an unknown or duplicate key, a key with no
// value, or a value of the wrong type is an error at its line. yaml.Node.Decode has no
// KnownFields switch, so the keys are checked against the struct's yaml tags first.
func decodeSettings(node *yaml.Node, out any) error {
	node = resolve(node)
	if node == nil || isNull(node) {
		return nil
	}
	var errs SettingErrors
	if node.Kind != yaml.MappingNode {
		errs.add(node.Line, "the guard's own settings must be keys with values")
		return errs
	}
	checkKeys(node, reflect.TypeOf(out).Elem(), &errs, 0)
	if len(errs) > 0 {
		return errs
	}
	if err := node.Decode(out); err != nil {
		return typeErrors(err, node.Line)
	}
	return nil
}

// resolve follows a document node to its content and an alias to its anchor.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch {
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		default:
			return n
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// checkKeys reports the unknown, duplicate and empty keys of mapping m against struct type t,
// following merge keys (<<) and nested structs.
func checkKeys(m *yaml.Node, t reflect.Type, errs *SettingErrors, depth int) {
	if depth > 16 { // a merge key that merges itself
		return
	}
	fields := yamlFields(t)
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k == nil || v == nil {
			continue
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, mm := range merged {
				if mm = resolve(mm); mm != nil && mm.Kind == yaml.MappingNode {
					checkKeys(mm, t, errs, depth+1)
				}
			}
			continue
		}
		ft, known := fields[k.Value]
		switch {
		case !known:
			errs.add(k.Line, "unknown setting %q%s", k.Value, suggestion(k.Value, names))
			continue
		case seen[k.Value]:
			errs.add(k.Line, "setting %q is given twice", k.Value)
			continue
		case isNull(v):
			errs.add(k.Line, "setting %q has no value", k.Value)
		}
		seen[k.Value] = true
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && v.Kind == yaml.MappingNode {
			checkKeys(v, ft, errs, depth+1)
		}
	}
}

// yamlFields maps the yaml names of t's exported fields to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// typeErrors turns a yaml decoding error into SettingErrors with their lines.
func typeErrors(err error, fallback int) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return SettingErrors{{Line: fallback, Msg: err.Error()}}
	}
	var errs SettingErrors
	for _, msg := range te.Errors {
		line := fallback
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		errs.add(line, "%s", msg)
	}
	return errs
}

// valueOf returns the value node of key in mapping m (following merge keys), or nil.
func valueOf(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := resolve(m.Content[i])
		if k != nil && k.Value == key {
			return resolve(m.Content[i+1])
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k != nil && k.Value == "<<" {
			if v := valueOf(m.Content[i+1], key); v != nil {
				return v
			}
		}
	}
	return nil
}

// lineOf is the line of key's value in settings, or of the settings when the key is absent.
func lineOf(settings *yaml.Node, key string) int {
	if v := valueOf(settings, key); v != nil {
		return v.Line
	}
	if s := resolve(settings); s != nil {
		return s.Line
	}
	return 0
}

// itemLine is the line of element i of the list under key, or lineOf(key) when not known.
func itemLine(settings *yaml.Node, key string, i int) int {
	if v := valueOf(settings, key); v != nil && v.Kind == yaml.SequenceNode && i < len(v.Content) {
		return v.Content[i].Line
	}
	return lineOf(settings, key)
}
