package argschema

import (
	"encoding/json"
	"math/big"
	"regexp"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The library validates a decoded tree of maps and builds an error tree as it goes: about
// 70 µs for a 1 KB argument object, more than a whole governed call may take. Yet almost every
// tool schema uses a handful of keywords, and almost every call is valid. So Compile also
// restates the schema, when it can, as a plan: a graph of nodes that checks the arguments'
// JSON text in one pass (scan.go), without decoding it and without allocating. Validate asks
// the plan first. The plan can only say "valid"; when it cannot (a problem, or text it is not
// sure to read like the library), Validate runs the library as before, which finds and phrases
// the problems. So the plan must never accept what the library rejects; rejecting what the
// library accepts only costs time. FuzzFastPathAgreesWithLibrary holds it to that.
//
// The plan is built from the library's compiled schema, not from the schema's JSON, so the
// library has already decided which keywords are in force under the schema's draft (a draft-07
// "$ref" hides its siblings, draft-04's boolean "exclusiveMaximum" becomes a bound, "format"
// is kept only where it asserts) and resolved every reference. A schema gets a plan only if
// every subschema uses nothing but: type, enum and const with scalar values, properties,
// required (at most 64 names), additionalProperties, items with one schema, prefixItems,
// minItems, maxItems, minLength, maxLength, pattern (with the library's default engine),
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, $ref, anyOf, the boolean schemas and
// annotations. anyOf is there because optional fields are written as
// {"anyOf": [{...}, {"type": "null"}]}; like a property, an anyOf can only accept when one of
// its alternatives accepts. Keywords whose outcome depends on a subschema failing (not, oneOf,
// if) or on every other keyword (unevaluated*) stay with the library, as do all the others.

// plan is a compiled schema restated for the fast path. It is never changed once built, so
// one plan serves concurrent calls.
type plan struct {
	root *node
}

// typeSet is a set of JSON Schema types, one bit each.
type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

func typeNamed(name string) typeSet {
	switch name {
	case "null":
		return typeNull
	case "boolean":
		return typeBoolean
	case "number":
		return typeNumber
	case "integer":
		return typeInteger
	case "string":
		return typeString
	case "array":
		return typeArray
	case "object":
		return typeObject
	}
	return 0
}

// admits reports whether a value of kind k (see kindOf) can have one of the types in t. A
// number admitted only as an integer is checked further by the node.
func (t typeSet) admits(k typeSet) bool {
	return t == 0 || t&k != 0 || k == typeNumber && t&typeInteger != 0
}

// node is one subschema. A node without keywords accepts every value.
type node struct {
	never bool    // the false schema
	types typeSet // 0: any type
	own   bool    // whether value must read the value against this node's own keywords
	ref   *node
	anyOf []*node
	// sets are the enum and the const, each of which the value must be in.
	sets []*valueSet

	// object
	props      map[string]prop
	required   uint64 // the bits of all required names
	closed     bool   // additionalProperties: false
	additional *node  // additionalProperties as a schema

	// array
	prefix             []*node
	items              *node
	minItems, maxItems int // -1: none

	// string
	minLength, maxLength int // -1: none
	pattern              *regexp.Regexp

	// number
	integer                            bool // the value must be an integer
	minimum, maximum                   *decimal
	exclusiveMinimum, exclusiveMaximum *decimal

	// whether string and number must decode the value: the scanner checks its syntax anyway
	readsStrings, readsNumbers bool
}

// prop is what an object node knows of one property name.
type prop struct {
	node *node  // nil if the name is only required, not in "properties"
	bit  uint64 // its bit in node.required, or 0
}

// valueSet holds the scalar values of an enum or const.
type valueSet struct {
	null, yes, no bool
	strings       map[string]bool
	numbers       []decimal
}

// newPlan restates the compiled schema root as a plan, or returns nil if it uses a keyword the
// plan does not know.
func newPlan(root *jsonschema.Schema) *plan {
	b := planner{nodes: map[*jsonschema.Schema]*node{}, ok: true}
	n := b.node(root)
	if !b.ok || b.sameValueCycle() {
		return nil
	}
	return &plan{root: n}
}

type planner struct {
	nodes map[*jsonschema.Schema]*node
	ok    bool
}

// node returns the node for s, building it (and those it refers to) the first time. A schema
// the plan cannot express clears p.ok.
func (p *planner) node(s *jsonschema.Schema) *node {
	if n, done := p.nodes[s]; done {
		return n
	}
	n := &node{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
	p.nodes[s] = n
	if s.Bool != nil {
		n.never = !*s.Bool
		return n
	}
	if !plannable(s) {
		p.ok = false
		return n
	}
	if s.Ref != nil {
		n.ref = p.node(s.Ref)
	}
	for _, alt := range s.AnyOf {
		n.anyOf = append(n.anyOf, p.node(alt))
	}
	if s.Types != nil {
		for _, name := range s.Types.ToStrings() {
			n.types |= typeNamed(name)
		}
	}
	if s.Enum != nil {
		n.sets = append(n.sets, p.valueSet(s.Enum.Values))
	}
	if s.Const != nil {
		n.sets = append(n.sets, p.valueSet([]any{*s.Const}))
	}

	if len(s.Properties) > 0 || len(s.Required) > 0 {
		n.props = make(map[string]prop, len(s.Properties)+len(s.Required))
	}
	for name, sub := range s.Properties {
		n.props[name] = prop{node: p.node(sub)}
	}
	for i, name := range s.Required {
		pr := n.props[name]
		pr.bit |= 1 << i
		n.props[name] = pr
		n.required |= 1 << i
	}
	switch ap := s.AdditionalProperties.(type) {
	case bool:
		n.closed = !ap
	case *jsonschema.Schema:
		n.additional = p.node(ap)
	}

	for _, sub := range s.PrefixItems {
		n.prefix = append(n.prefix, p.node(sub))
	}
	if items, single := s.Items.(*jsonschema.Schema); single { // drafts before 2020-12
		n.items = p.node(items)
	}
	if s.Items2020 != nil {
		n.items = p.node(s.Items2020)
	}
	n.minItems, n.maxItems = intOr(s.MinItems), intOr(s.MaxItems)

	n.minLength, n.maxLength = intOr(s.MinLength), intOr(s.MaxLength)
	if s.Pattern != nil {
		n.pattern = s.Pattern.(*regexp.Regexp) // plannable checked it
	}

	n.integer = n.types&typeInteger != 0 && n.types&typeNumber == 0
	n.minimum = p.decimal(s.Minimum)
	n.maximum = p.decimal(s.Maximum)
	n.exclusiveMinimum = p.decimal(s.ExclusiveMinimum)
	n.exclusiveMaximum = p.decimal(s.ExclusiveMaximum)

	n.readsStrings = n.minLength >= 0 || n.maxLength >= 0 || n.pattern != nil || len(n.sets) > 0
	n.readsNumbers = n.integer || n.minimum != nil || n.maximum != nil ||
		n.exclusiveMinimum != nil || n.exclusiveMaximum != nil || len(n.sets) > 0
	n.own = n.types != 0 || n.readsStrings || n.readsNumbers ||
		n.props != nil || n.closed || n.additional != nil ||
		n.prefix != nil || n.items != nil || n.minItems >= 0 || n.maxItems >= 0
	return n
}

// plannable reports whether s uses only keywords a node expresses. Annotations (title,
// description, default, examples, $comment, readOnly, writeOnly, deprecated) and the
// identifiers the compiler has already resolved ($id, $anchor) change no outcome.
// TestPlanKnowsEverySchemaField fails when a new library version adds a field.
func plannable(s *jsonschema.Schema) bool {
	if _, isGo := s.Pattern.(*regexp.Regexp); s.Pattern != nil && !isGo {
		return false
	}
	if _, isTuple := s.Items.([]*jsonschema.Schema); isTuple {
		return false
	}
	return s.RecursiveRef == nil && !s.RecursiveAnchor && s.DynamicRef == nil && s.DynamicAnchor == "" &&
		s.Not == nil && s.AllOf == nil && s.OneOf == nil && s.If == nil && s.Then == nil && s.Else == nil &&
		s.Format == nil &&
		s.MaxProperties == nil && s.MinProperties == nil && len(s.Required) <= 64 &&
		s.PropertyNames == nil && s.PatternProperties == nil && s.Dependencies == nil &&
		s.DependentRequired == nil && s.DependentSchemas == nil && s.UnevaluatedProperties == nil &&
		!s.UniqueItems && s.Contains == nil && s.MinContains == nil && s.MaxContains == nil &&
		s.AdditionalItems == nil && s.UnevaluatedItems == nil &&
		s.ContentEncoding == nil && s.ContentMediaType == nil && s.ContentSchema == nil &&
		s.MultipleOf == nil && s.Extensions == nil
}

func intOr(v *int) int {
	if v == nil {
		return -1
	}
	return *v
}

// decimal is the bound r as a decimal. A bound with too many digits clears p.ok.
func (p *planner) decimal(r *big.Rat) *decimal {
	if r == nil {
		return nil
	}
	d, ok := decimalOf(r)
	if !ok {
		p.ok = false
	}
	return &d
}

// valueSet gathers the values of an enum or const. An array or object value, or a number with
// too many digits, clears p.ok.
func (p *planner) valueSet(values []any) *valueSet {
	set := &valueSet{strings: map[string]bool{}}
	for _, v := range values {
		switch v := v.(type) {
		case nil:
			set.null = true
		case bool:
			set.yes, set.no = set.yes || v, set.no || !v
		case string:
			set.strings[v] = true
		case json.Number: // the library decodes numbers as json.Number
			d, ok := parseDecimal([]byte(v))
			if !ok {
				p.ok = false
			}
			set.numbers = append(set.numbers, d)
		default:
			p.ok = false
		}
	}
	return set
}

// sameValueCycle reports whether a chain of $ref and anyOf leads from a node back to itself
// without descending into the value. The library reports such a cycle as an error; the checker
// would loop.
func (p *planner) sameValueCycle() bool {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[*node]int{}
	var cyclic func(*node) bool
	cyclic = func(n *node) bool {
		switch state[n] {
		case visiting:
			return true
		case done:
			return false
		}
		state[n] = visiting
		next := n.anyOf
		if n.ref != nil {
			next = append([]*node{n.ref}, next...)
		}
		for _, m := range next {
			if cyclic(m) {
				return true
			}
		}
		state[n] = done
		return false
	}
	for _, n := range p.nodes {
		if cyclic(n) {
			return true
		}
	}
	return false
}

// checker is one run of a plan over one call's arguments.
type checker struct {
	scanner
	// steps is how many more nodes the run may apply. anyOf reads a value once per alternative
	// tried, so nested alternatives could multiply the work; past the budget the run gives up.
	steps int
}

// Each byte of arguments pays for this many node applications, a generous bound for real
// schemas, where a value meets a few nodes at most.
const stepsPerByte = 16

// accepts reports whether args, the JSON text of a call's arguments, is valid under the plan.
// false means "not known to be valid": the library must decide.
func (p *plan) accepts(args []byte) bool {
	c := checker{scanner: scanner{b: args}, steps: stepsPerByte*len(args) + 256}
	end, ok := c.check(p.root, c.ws(0))
	return ok && c.ws(end) == len(args)
}

// check reads the value at i against n and returns the index just past it. ok means the value
// is valid JSON text and valid under n.
//
// A repeated object key is checked at every occurrence, although the decoder keeps only the
// last: checking more can only reject more, so it needs no special case.
func (c *checker) check(n *node, i int) (end int, ok bool) {
	if c.steps--; c.steps < 0 || n.never || i >= len(c.b) {
		return i, false
	}
	k := kindOf(c.b[i])
	if k == 0 || !n.types.admits(k) {
		return i, false
	}
	end = -1
	if n.own {
		if end, ok = c.value(n, k, i); !ok {
			return end, false
		}
	}
	if n.ref != nil {
		if end, ok = c.check(n.ref, i); !ok {
			return end, false
		}
	}
	if n.anyOf != nil {
		depth, matched := c.depth, false
		for _, alt := range n.anyOf {
			if !alt.types.admits(k) {
				continue
			}
			if end, matched = c.check(alt, i); matched {
				break
			}
			c.depth = depth
		}
		if !matched {
			return i, false
		}
	}
	if end < 0 {
		return c.skip(i)
	}
	return end, true
}

// value reads the value at i, of kind k, against n's own keywords.
func (c *checker) value(n *node, k typeSet, i int) (int, bool) {
	switch {
	case k&(typeObject|typeArray) != 0 && n.sets != nil:
		return i, false // the plan's enums and consts hold scalars only
	case k == typeObject:
		return c.object(n, i)
	case k == typeArray:
		return c.array(n, i)
	case k == typeString:
		return c.string(n, i)
	case k == typeNumber:
		return c.number(n, i)
	}
	return c.literal(n, i)
}

func (c *checker) object(n *node, i int) (int, bool) {
	var seen uint64
	i, more, ok := c.open(i, '}')
	for more && ok {
		var start, end, value int
		var escaped bool
		if start, end, value, escaped, ok = c.key(i); !ok {
			break
		}
		var pr prop
		if n.props != nil {
			pr = n.props[string(c.text(start, end, escaped))]
		}
		seen |= pr.bit
		sub := pr.node
		if sub == nil {
			if n.closed {
				return i, false
			}
			sub = n.additional
		}
		if sub != nil {
			i, ok = c.check(sub, value)
		} else {
			i, ok = c.skip(value)
		}
		if !ok {
			break
		}
		i, more, ok = c.next(i, '}')
	}
	return i, ok && seen == n.required
}

func (c *checker) array(n *node, i int) (int, bool) {
	count := 0
	i, more, ok := c.open(i, ']')
	for more && ok {
		sub := n.items
		if count < len(n.prefix) {
			sub = n.prefix[count]
		}
		if count++; n.maxItems >= 0 && count > n.maxItems {
			return i, false
		}
		if sub != nil {
			i, ok = c.check(sub, i)
		} else {
			i, ok = c.skip(i)
		}
		if !ok {
			break
		}
		i, more, ok = c.next(i, ']')
	}
	return i, ok && count >= n.minItems
}

func (c *checker) string(n *node, i int) (int, bool) {
	end, escaped, ok := c.str(i)
	if !ok || !n.readsStrings {
		return end, ok
	}
	text := c.text(i, end, escaped)
	if n.minLength >= 0 || n.maxLength >= 0 {
		// The library counts characters as runes.
		length := utf8.RuneCount(text)
		if length < n.minLength || n.maxLength >= 0 && length > n.maxLength {
			return end, false
		}
	}
	// Like the library, a pattern matches anywhere in the string unless it is anchored.
	if n.pattern != nil && !n.pattern.Match(text) {
		return end, false
	}
	for _, set := range n.sets {
		if !set.strings[string(text)] {
			return end, false
		}
	}
	return end, true
}

func (c *checker) number(n *node, i int) (int, bool) {
	end, ok := c.num(i)
	if !ok || !n.readsNumbers {
		return end, ok
	}
	d, ok := parseDecimal(c.b[i:end])
	switch {
	case !ok,
		n.integer && !d.isInt(),
		n.minimum != nil && d.cmp(*n.minimum) < 0,
		n.maximum != nil && d.cmp(*n.maximum) > 0,
		n.exclusiveMinimum != nil && d.cmp(*n.exclusiveMinimum) <= 0,
		n.exclusiveMaximum != nil && d.cmp(*n.exclusiveMaximum) >= 0:
		return end, false
	}
	for _, set := range n.sets {
		if !set.hasNumber(d) {
			return end, false
		}
	}
	return end, true
}

// literal reads true, false or null at i against n's enum and const.
func (c *checker) literal(n *node, i int) (int, bool) {
	var end int
	var ok bool
	switch c.b[i] {
	case 't':
		end, ok = c.lit(i, "true")
	case 'f':
		end, ok = c.lit(i, "false")
	default:
		end, ok = c.lit(i, "null")
	}
	for _, set := range n.sets {
		if ok = ok && set.hasLiteral(c.b[i]); !ok {
			break
		}
	}
	return end, ok
}

func (s *valueSet) hasNumber(d decimal) bool {
	for _, v := range s.numbers {
		if v.cmp(d) == 0 {
			return true
		}
	}
	return false
}

// hasLiteral reports whether the literal starting with first is in s.
func (s *valueSet) hasLiteral(first byte) bool {
	switch first {
	case 't':
		return s.yes
	case 'f':
		return s.no
	}
	return s.null
}
