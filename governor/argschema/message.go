package argschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// maxShownValue caps how much of a value a message quotes back; the model has the rest.
const maxShownValue = 80

// message says what the leaf error e means, in the form "must be X but is Y" where it can, so a
// model sees both what the schema wants and what it sent. Kinds it does not know keep the
// library's English text.
func (s *Schema) message(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return fmt.Sprintf("must be %s but is %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Required:
		return fmt.Sprintf("missing required %s %s", plural(len(k.Missing), "property", "properties"), quoted(k.Missing))
	case *kind.DependentRequired:
		return fmt.Sprintf("property %q requires %s %s", k.Prop, plural(len(k.Missing), "property", "properties"), quoted(k.Missing))
	case *kind.Dependency:
		return fmt.Sprintf("property %q requires %s %s", k.Prop, plural(len(k.Missing), "property", "properties"), quoted(k.Missing))
	case *kind.AdditionalProperties:
		names := slices.Sorted(slices.Values(k.Properties))
		msg := fmt.Sprintf("%s %s %s not allowed", plural(len(names), "property", "properties"), quoted(names), plural(len(names), "is", "are"))
		if hint := s.allowed[e.SchemaURL]; hint != "" {
			msg += " (" + hint + ")"
		}
		return msg
	case *kind.Enum:
		if len(k.Want) == 1 {
			return fmt.Sprintf("must be %s but is %s", show(k.Want[0]), show(k.Got))
		}
		want := make([]string, len(k.Want))
		for i, v := range k.Want {
			want[i] = show(v)
		}
		return fmt.Sprintf("must be one of %s but is %s", strings.Join(want, ", "), show(k.Got))
	case *kind.Const:
		return fmt.Sprintf("must be %s but is %s", show(k.Want), show(k.Got))
	case *kind.Pattern:
		return "does not match pattern " + k.Want
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s but is %s (%v)", k.Want, show(k.Got), k.Err)
	case *kind.Minimum:
		return fmt.Sprintf("must be >= %s but is %s", number(k.Want), number(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be <= %s but is %s", number(k.Want), number(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be > %s but is %s", number(k.Want), number(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be < %s but is %s", number(k.Want), number(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s but is %s", number(k.Want), number(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long but is %d", k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long but is %d", k.Want, k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items but has %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items but has %d", k.Want, k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties but has %d", k.Want, k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d properties but has %d", k.Want, k.Got)
	case *kind.AdditionalItems:
		return fmt.Sprintf("has %d more %s than the schema allows; remove the last %d", k.Count, plural(k.Count, "item", "items"), k.Count)
	case *kind.UniqueItems:
		return fmt.Sprintf("items must be unique but items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return `must contain at least one item that matches the schema's "contains"`
	case *kind.MinContains:
		return fmt.Sprintf(`must contain at least %d items that match the schema's "contains" but has %d`, k.Want, len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf(`must contain at most %d items that match the schema's "contains" but has %d`, k.Want, len(k.Got))
	case *kind.PropertyNames:
		return fmt.Sprintf("property name %q is not allowed: %s", k.Property, s.causes(e.Causes))
	case *kind.FalseSchema:
		return "is not allowed here; remove it"
	case *kind.Not:
		return `must not match the schema under "not"`
	case *kind.OneOf:
		if len(k.Subschemas) == 2 {
			return fmt.Sprintf("must match exactly one alternative (oneOf) but matches alternatives %d and %d", k.Subschemas[0]+1, k.Subschemas[1]+1)
		}
		return s.alternatives(e, "oneOf")
	case *kind.AnyOf:
		return s.alternatives(e, "anyOf")
	}
	return e.ErrorKind.LocalizedString(message.NewPrinter(language.English))
}

// alternatives explains an anyOf or oneOf that no alternative matched. The common optional
// field, {"anyOf": [{"type": "string"}, {"type": "null"}]}, reads as one type error; otherwise
// each alternative's problems are listed, numbered from 1.
func (s *Schema) alternatives(e *jsonschema.ValidationError, keyword string) string {
	branches := make([][]*jsonschema.ValidationError, len(e.Causes))
	for i, cause := range e.Causes {
		leaves(cause, &branches[i])
	}
	if msg, ok := typeAlternatives(e, branches); ok {
		return msg
	}
	here := pointer(e.InstanceLocation)
	var b strings.Builder
	fmt.Fprintf(&b, "must match one of %d alternatives (%s) but matches none:", len(branches), keyword)
	for i, branch := range branches {
		fmt.Fprintf(&b, " [%d] ", i+1)
		for j, leaf := range branch {
			if j > 0 {
				b.WriteString(", ")
			}
			if p := pointer(leaf.InstanceLocation); p != here {
				b.WriteString(p + ": ")
			}
			b.WriteString(s.message(leaf))
		}
	}
	return b.String()
}

// typeAlternatives merges alternatives that each fail only on the type of the value itself into
// one "must be A or B but is C".
func typeAlternatives(e *jsonschema.ValidationError, branches [][]*jsonschema.ValidationError) (string, bool) {
	var want []string
	var got string
	for _, branch := range branches {
		if len(branch) != 1 || !slices.Equal(branch[0].InstanceLocation, e.InstanceLocation) {
			return "", false
		}
		t, ok := branch[0].ErrorKind.(*kind.Type)
		if !ok {
			return "", false
		}
		got = t.Got
		for _, w := range t.Want {
			if !slices.Contains(want, w) {
				want = append(want, w)
			}
		}
	}
	return fmt.Sprintf("must be %s but is %s", strings.Join(want, " or "), got), len(want) > 0
}

// causes joins the messages of the leaves under errs, for kinds whose causes explain them.
func (s *Schema) causes(errs []*jsonschema.ValidationError) string {
	var found []*jsonschema.ValidationError
	for _, e := range errs {
		leaves(e, &found)
	}
	msgs := make([]string, len(found))
	for i, e := range found {
		msgs[i] = s.message(e)
	}
	return strings.Join(msgs, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, name := range names {
		q[i] = strconv.Quote(name)
	}
	return strings.Join(q, ", ")
}

// show renders a value as JSON, shortened to maxShownValue characters.
func show(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	out := strings.TrimSuffix(b.String(), "\n")
	if r := []rune(out); len(r) > maxShownValue {
		return string(r[:maxShownValue]) + "…"
	}
	return out
}

// number renders an exact number the way it would be written in JSON: exactly when it is an
// integer that fits 64 bits, otherwise as the nearest float64.
func number(r *big.Rat) string {
	if r.IsInt() && r.Num().BitLen() <= 64 {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
