package policies

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// Decoding a 1 KB argument object into a tree of Go maps with encoding/json takes about 11 µs,
// more than the whole budget of a policy decision, and rules read one or two of its values. So
// the arguments become a jsonObject: one pass over the text checks it exactly as encoding/json
// would (FuzzArgsAgreeWithEncodingJSON holds it to that) and notes where each top-level member
// is; a value is decoded only when a rule reads it, and then kept for the other rules of the
// call. Nested objects are read the same way; arrays, and the whole object when a rule needs
// every entry (iteration, equality), are decoded by encoding/json. Values are what
// encoding/json gives: numbers are doubles (JSON numbers carry no integer type), a duplicate key
// keeps its last value, invalid UTF-8 in strings reads as U+FFFD.

// maxDepth is encoding/json's nesting limit; deeper text is refused, as it would refuse it.
const maxDepth = 10000

// jsonObject is a JSON object read lazily, as a CEL map(string, dyn). It belongs to one Evaluate
// and is not safe for concurrent use.
type jsonObject struct {
	raw     []byte // the object's text, from '{' to '}'
	adapter types.Adapter
	members []member // in the order written, duplicates included
	buf     [8]member
	// index maps a key to its last member; built on first lookup when there are many members.
	index map[string]int
	// full is every entry decoded, for the operations that need all of them.
	full traits.Mapper
}

// member is one "key": value of the object.
type member struct {
	k0, k1  int    // the key's text between its quotes
	key     string // the decoded key, when the text has escapes or invalid UTF-8
	decoded bool   // key holds the key
	v0, v1  int    // the value's text
	val     ref.Val
}

// newArgs returns the CEL value of a call's arguments: a map, or an error value when the text
// is not a JSON object, so that every rule reading args fails (closed) and the others still run.
func newArgs(raw []byte, adapter types.Adapter) ref.Val {
	lead := ws(raw, 0)
	raw = raw[lead:]
	if len(raw) == 0 {
		return emptyObject(adapter)
	}
	var (
		o   *jsonObject
		end int
		err error
	)
	if raw[0] == '{' {
		o = &jsonObject{adapter: adapter}
		o.members = o.buf[:0]
		end, err = scanObject(raw, 0, 1, &o.members)
	} else {
		end, err = scanValue(raw, 0, 0)
	}
	if err == nil {
		if j := ws(raw, end); j < len(raw) {
			err = syntaxErrorf(j, "invalid character %s after the arguments", quoteChar(raw[j]))
		}
	}
	switch {
	case err != nil:
		if se, ok := err.(*syntaxError); ok {
			se.off += lead
		}
		return types.NewErr("the arguments are not valid JSON: %v", err)
	case o != nil:
		o.raw = raw[:end]
		return o
	case raw[0] == 'n':
		return emptyObject(adapter)
	default:
		return types.NewErr("the arguments are a JSON %s, not an object", kindName(raw[0]))
	}
}

func emptyObject(adapter types.Adapter) *jsonObject {
	return &jsonObject{raw: []byte("{}"), adapter: adapter}
}

// lookup returns the index of the member named s (the last one, if repeated), or -1.
func (o *jsonObject) lookup(s string) int {
	if len(o.members) > 16 {
		if o.index == nil {
			o.index = make(map[string]int, len(o.members))
			for i := range o.members {
				o.index[o.keyOf(i)] = i
			}
		}
		if i, ok := o.index[s]; ok {
			return i
		}
		return -1
	}
	for i := len(o.members) - 1; i >= 0; i-- {
		m := &o.members[i]
		if m.decoded {
			if m.key == s {
				return i
			}
		} else if string(o.raw[m.k0:m.k1]) == s {
			return i
		}
	}
	return -1
}

func (o *jsonObject) keyOf(i int) string {
	m := &o.members[i]
	if m.decoded {
		return m.key
	}
	return string(o.raw[m.k0:m.k1])
}

// value decodes member i, once.
func (o *jsonObject) value(i int) ref.Val {
	m := &o.members[i]
	if m.val == nil {
		m.val = decodeValue(o.raw[m.v0:m.v1], o.adapter)
	}
	return m.val
}

// decodeValue returns the CEL value of one JSON value's text, already checked by scanValue.
func decodeValue(b []byte, adapter types.Adapter) ref.Val {
	switch b[0] {
	case '"':
		if plainString(b) {
			return types.String(b[1 : len(b)-1])
		}
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return types.NewErr("decoding the arguments: %v", err)
		}
		return types.String(s)
	case 't':
		return types.True
	case 'f':
		return types.False
	case 'n':
		return types.NullValue
	case '{':
		o := &jsonObject{raw: b, adapter: adapter}
		o.members = o.buf[:0]
		if _, err := scanObject(b, 0, 1, &o.members); err != nil {
			return types.NewErr("decoding the arguments: %v", err)
		}
		return o
	case '[':
		var list []any
		if err := json.Unmarshal(b, &list); err != nil {
			return types.NewErr("decoding the arguments: %v", err)
		}
		return adapter.NativeToValue(list)
	default:
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return types.NewErr("decoding the arguments: number %s: %v", b, err)
		}
		return types.Double(f)
	}
}

// whole returns every entry decoded.
func (o *jsonObject) whole() traits.Mapper {
	if o.full == nil {
		var m map[string]any
		if err := json.Unmarshal(o.raw, &m); err != nil {
			// Unreachable: scanObject accepts exactly what encoding/json does.
			m = map[string]any{}
		}
		o.full = types.NewStringInterfaceMap(o.adapter, m)
	}
	return o.full
}

// FindStringKey is the interpreter's fast path for a field or constant-key access (args.speed).
func (o *jsonObject) FindStringKey(s string) (any, bool) {
	i := o.lookup(s)
	if i < 0 {
		return nil, false
	}
	return o.value(i), true
}

// Find implements traits.Mapper.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	s, ok := key.(types.String)
	if !ok {
		if types.IsUnknownOrError(key) {
			return key, false
		}
		return nil, false
	}
	i := o.lookup(string(s))
	if i < 0 {
		return nil, false
	}
	return o.value(i), true
}

// Get implements traits.Indexer.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	v, found := o.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Contains implements traits.Container.
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	_, found := o.Find(key)
	return types.Bool(found)
}

// Size implements traits.Sizer: the number of distinct keys.
func (o *jsonObject) Size() ref.Val {
	n := 0
	for i := range o.members {
		if o.lookup(o.keyOf(i)) == i {
			n++
		}
	}
	return types.Int(n)
}

// Iterator implements traits.Iterable.
func (o *jsonObject) Iterator() traits.Iterator { return o.whole().Iterator() }

// IsZeroValue reports whether the object is empty.
func (o *jsonObject) IsZeroValue() bool { return len(o.members) == 0 }

// ConvertToNative implements ref.Val.
func (o *jsonObject) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return o.whole().ConvertToNative(typeDesc)
}

// ConvertToType implements ref.Val.
func (o *jsonObject) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, typeVal)
}

// Equal implements ref.Val.
func (o *jsonObject) Equal(other ref.Val) ref.Val { return o.whole().Equal(other) }

// Type implements ref.Val.
func (o *jsonObject) Type() ref.Type { return types.MapType }

// Value implements ref.Val.
func (o *jsonObject) Value() any { return o.whole().Value() }

// String formats the object as CEL formats maps, for error messages.
func (o *jsonObject) String() string { return fmt.Sprint(o.whole()) }

// The scanner below accepts exactly the JSON that encoding/json accepts. Each function starts at
// the first byte of what it reads and returns the index just past it.

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("at byte %d: %s", e.off, e.msg) }

func syntaxErrorf(off int, format string, args ...any) error {
	return &syntaxError{off: off, msg: fmt.Sprintf(format, args...)}
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(c))
	return "'" + s[1:len(s)-1] + "'"
}

func kindName(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

func ws(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func errAt(b []byte, i int, context string) error {
	if i >= len(b) {
		return syntaxErrorf(i, "unexpected end of JSON input")
	}
	return syntaxErrorf(i, "invalid character %s %s", quoteChar(b[i]), context)
}

// scanValue checks the value at b[i]; depth is the nesting depth of its container.
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(b, i, "")
	}
	switch c := b[i]; {
	case c == '{':
		return scanObject(b, i, depth+1, nil)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == '"':
		return scanString(b, i)
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return i, errAt(b, i, "looking for beginning of value")
}

// scanObject checks the object at b[i] == '{' and, when members is not nil, appends its members.
func scanObject(b []byte, i, depth int, members *[]member) (int, error) {
	if depth > maxDepth {
		return i, syntaxErrorf(i, "exceeded max depth")
	}
	i = ws(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, errAt(b, i, "looking for beginning of object key string")
		}
		end, err := scanString(b, i)
		if err != nil {
			return end, err
		}
		var m member
		if members != nil {
			m.k0, m.k1 = i+1, end-1
			if !plainString(b[i:end]) {
				var key string // declared here so that only this rare path allocates it
				if err := json.Unmarshal(b[i:end], &key); err != nil {
					return i, syntaxErrorf(i, "%v", err)
				}
				m.key, m.decoded = key, true
			}
		}
		i = ws(b, end)
		if i >= len(b) || b[i] != ':' {
			return i, errAt(b, i, "after object key")
		}
		i = ws(b, i+1)
		m.v0 = i
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		if members != nil {
			m.v1 = i
			*members = append(*members, m)
		}
		i = ws(b, i)
		if i < len(b) && b[i] == ',' {
			i = ws(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return i, errAt(b, i, "after object key:value pair")
	}
}

func scanArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErrorf(i, "exceeded max depth")
	}
	i = ws(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		i = ws(b, i)
		if i < len(b) && b[i] == ',' {
			i = ws(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		return i, errAt(b, i, "after array element")
	}
}

// scanString checks the string at b[i] == '"'.
func scanString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		if !stringSpecial[b[i]] {
			continue
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			i++
			if i >= len(b) {
				return i, errAt(b, i, "")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for k := 0; k < 4; k++ {
					i++
					if i >= len(b) || !isHex(b[i]) {
						return i, errAt(b, i, "in \\u hexadecimal character escape")
					}
				}
			default:
				return i, errAt(b, i, "in string escape code")
			}
		default:
			return i, errAt(b, i, "in string literal")
		}
	}
	return i, errAt(b, i, "")
}

// stringSpecial marks the bytes that end the plain run of a string: the quote, the backslash and
// the control characters JSON does not allow in strings.
var stringSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// plainString reports whether the checked string literal s can be used as it is written: no
// escapes and valid UTF-8 (encoding/json rewrites invalid bytes as U+FFFD).
func plainString(s []byte) bool {
	ascii := true
	for _, c := range s[1 : len(s)-1] {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii || utf8.Valid(s[1:len(s)-1])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber checks the number at b[i], including that it fits a double: encoding/json refuses
// arguments with a number it cannot hold in a float64.
func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) || !isDigit(b[i]) {
		return i, errAt(b, i, "in numeric literal")
	}
	intDigits := 0
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && isDigit(b[i]) {
			i++
			intDigits++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "after decimal point in numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, errAt(b, i, "in exponent of numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			if exp < 1_000_000 {
				exp = exp*10 + int(b[i]-'0')
			}
			i++
		}
		if neg {
			exp = -exp
		}
	}
	// The number is below 10^(intDigits+exp); only then can it be too large for a float64
	// (about 1.8e308), and only then is it worth parsing.
	if intDigits+exp > 307 {
		if _, err := strconv.ParseFloat(string(b[start:i]), 64); err != nil {
			return start, syntaxErrorf(start, "number %s does not fit a double", b[start:i])
		}
	}
	return i, nil
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return i + k, errAt(b, i+k, "in literal "+lit+" (expecting '"+lit[k:k+1]+"')")
		}
	}
	return i + len(lit), nil
}
