// Package strictjson checks that bytes are exactly one JSON value that every reader reads the
// same way (SPEC.md §15 "Strict input"): RFC 8259 JSON restricted as I-JSON (RFC 7493) is:
//
//   - one value, with only whitespace around it: no trailing data, no second value;
//   - valid UTF-8 throughout, and no \u escape that is half of a UTF-16 surrogate pair;
//   - no object with two members of the same key, at any depth, keys compared after their
//     escapes are decoded ("n\u0061me" is "name");
//   - numbers a 64-bit float holds: none that overflows to ±Inf, and no integer literal beyond
//     ±(2^53−1), where readers that keep integers and readers that keep floats part ways;
//   - at most MaxDepth arrays and objects inside one another.
//
// A body one reader takes as a robot call and another (a proxy, an audit tap, the SDK) as
// something else, or as nothing, is refused before anyone acts on it.
//
// The check is one pass over the bytes. It allocates nothing per byte: a Scanner keeps a stack
// of open arrays and objects and, for the keys of the objects open, their positions; a key with
// escapes is decoded into a buffer the Scanner reuses. An object's keys are compared with each
// other as they come while it has at most smallObject of them, and sorted once when a larger
// one closes, so a hostile object of n keys costs n log n, not n².
package strictjson

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how many arrays and objects may be open inside one another. MCP messages nest a
// handful of levels; tool schemas a few dozen at most.
const MaxDepth = 128

// MaxMembers is how many top-level members Scan locates at most.
const MaxMembers = 8

// smallObject is how many keys an object may have before its keys are checked by sorting when
// it closes instead of one by one as they come.
const smallObject = 16

// Reason says which rule a refused document broke. The set is fixed and small, so it can label
// a metric.
type Reason string

// The reasons of an *Error.
const (
	Syntax       Reason = "syntax"        // not JSON: a broken token, an unexpected byte, an empty document
	TrailingData Reason = "trailing_data" // something after the end of the value
	InvalidUTF8  Reason = "invalid_utf8"  // a byte sequence that is not UTF-8, or a lone surrogate escape
	DuplicateKey Reason = "duplicate_key" // two members of one object with the same key
	NumberRange  Reason = "number_range"  // a number a 64-bit float does not hold
	TooDeep      Reason = "too_deep"      // more than MaxDepth arrays and objects inside one another
)

// Reasons lists every Reason, in a fixed order.
var Reasons = []Reason{Syntax, TrailingData, InvalidUTF8, DuplicateKey, NumberRange, TooDeep}

// Error is why a document is not strict JSON, and where: Offset is the 0-based byte at which
// the problem is, Path the JSON path (from $, the document) of the value it is in — for a
// duplicate key, of the object holding it.
type Error struct {
	Reason Reason
	Offset int
	Path   string
	Detail string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s at %s (byte %d)", e.Detail, e.Path, e.Offset)
}

// Span is where a top-level member's value lies in a document: data[Start:End].
type Span struct {
	Start, End int
	Seen       bool
	Twice      bool // the key appeared again (a duplicate key, reported as such)
}

// Doc is what Scan learnt of a document besides whether it is strict.
type Doc struct {
	// Kind is the first byte of the value ('{', '[', '"', 't', …), 0 for an empty document.
	Kind byte
	// Complete reports that the structure of the first value was read to its end: the
	// document is a value, perhaps with a problem inside it (invalid UTF-8, a duplicate key, a
	// number out of range) or after it (trailing data), but not broken.
	Complete bool
	// Members are the spans of the top-level object's members whose keys Scan was given, in
	// that order.
	Members [MaxMembers]Span
}

// Validate checks that data is strict JSON; its error is an *Error.
func Validate(data []byte) error {
	s := scanners.Get().(*Scanner)
	defer s.release()
	if e := s.Scan(data, nil, nil); e != nil {
		return e
	}
	return nil
}

// Scan checks data as Validate does and locates the top-level members whose keys are given
// (at most MaxMembers of them; a key is matched after its escapes are decoded).
func Scan(data []byte, keys []string) (Doc, *Error) {
	s := scanners.Get().(*Scanner)
	defer s.release()
	var d Doc
	e := s.Scan(data, keys, &d)
	return d, e
}

var scanners = sync.Pool{New: func() any { return new(Scanner) }}

// A Scanner checks documents. Using one again reuses its buffers; it is not safe for
// concurrent use. The zero Scanner is ready.
type Scanner struct {
	data  []byte
	stack []frame
	keys  []key
	arena []byte // decoded keys that had escapes
	err   *Error
	stop  bool // a structural error: nothing after it can be read
	top   []string
	doc   *Doc
	// The top-level member whose value is being read, -1 for none.
	member int
}

// release puts s back in the pool unless a hostile document grew its buffers.
func (s *Scanner) release() {
	s.data, s.doc, s.top, s.err = nil, nil, nil, nil
	if cap(s.keys) > 4096 || cap(s.arena) > 64<<10 {
		return
	}
	scanners.Put(s)
}

// frame is an open array or object.
type frame struct {
	object    bool
	keysStart int // its keys are keys[keysStart:]
	count     int // members or elements so far
	lastKey   int // index in keys of the member being read; -1 before the first
}

// key is one key of an open object: its text is data[start:end], or arena[start:end] when it
// had escapes; pos is where its opening quote is.
type key struct {
	start, end int
	pos        int
	decoded    bool
}

func (s *Scanner) text(k key) []byte {
	if k.decoded {
		return s.arena[k.start:k.end]
	}
	return s.data[k.start:k.end]
}

// Where the scan is.
const (
	stValue      = iota // a value is expected
	stValueOrEnd        // after [: a value or ]
	stKeyOrEnd          // after {: a key or }
	stKey               // after , in an object: a key
	stColon             // after a key
	stAfter             // after a value
)

// Scan checks data; a nil *Error means it is strict JSON. doc, when not nil, gets what Scan
// learnt of the document, and the spans of the top-level members named by keys.
func (s *Scanner) Scan(data []byte, keys []string, doc *Doc) *Error {
	s.data, s.top, s.doc = data, keys[:min(len(keys), MaxMembers)], doc
	s.stack, s.keys, s.arena = s.stack[:0], s.keys[:0], s.arena[:0]
	s.err, s.stop, s.member = nil, false, -1
	if doc != nil {
		*doc = Doc{}
	}
	i := skipSpace(data, 0)
	if i == len(data) {
		s.fail(Syntax, i, "the document is empty: no JSON value", false)
		return s.err
	}
	if doc != nil {
		doc.Kind = data[i]
	}
	st := stValue
	for !s.stop {
		i = skipSpace(data, i)
		if i == len(data) {
			s.fail(Syntax, i, s.unfinished(st), true)
			break
		}
		c := data[i]
		switch st {
		case stValueOrEnd:
			if c == ']' {
				i = s.close(i)
				st = stAfter
				break
			}
			fallthrough
		case stValue:
			if len(s.stack) == 1 && s.member >= 0 {
				s.doc.Members[s.member].Start = i
			}
			switch {
			case c == '{' || c == '[':
				if len(s.stack) == MaxDepth {
					s.fail(TooDeep, i, fmt.Sprintf("more than %d arrays and objects inside one another", MaxDepth), true)
					break
				}
				s.stack = append(s.stack, frame{object: c == '{', keysStart: len(s.keys), lastKey: -1})
				i++
				st = stValueOrEnd
				if c == '{' {
					st = stKeyOrEnd
				}
			case c == '"':
				i, _ = s.str(i, false)
				st = s.endScalar(i)
			case c == '-' || c >= '0' && c <= '9':
				i = s.number(i)
				st = s.endScalar(i)
			case c == 't' || c == 'f' || c == 'n':
				i = s.literal(i)
				st = s.endScalar(i)
			default:
				s.fail(Syntax, i, "expected a JSON value, found "+describe(data, i), true)
			}
		case stKeyOrEnd, stKey:
			switch {
			case c == '}' && st == stKeyOrEnd:
				i = s.close(i)
				st = stAfter
			case c == '"':
				i = s.key(i)
				st = stColon
			default:
				s.fail(Syntax, i, "expected a key in double quotes, found "+describe(data, i), true)
			}
		case stColon:
			if c != ':' {
				s.fail(Syntax, i, "expected ':' after the key, found "+describe(data, i), true)
				break
			}
			i++
			st = stValue
		case stAfter:
			f := &s.stack[len(s.stack)-1]
			switch {
			case c == ',':
				i++
				st = stKey
				if !f.object {
					f.count++
					st = stValue
				}
			case c == '}' && f.object, c == ']' && !f.object:
				i = s.close(i)
			case f.object:
				s.fail(Syntax, i, "expected ',' or '}' after the member's value, found "+describe(data, i), true)
			default:
				s.fail(Syntax, i, "expected ',' or ']' after the element, found "+describe(data, i), true)
			}
		}
		if st == stAfter && len(s.stack) == 0 && !s.stop {
			break
		}
	}
	if s.stop {
		return s.err
	}
	if doc != nil {
		doc.Complete = true
	}
	if j := skipSpace(data, i); j < len(data) {
		s.fail(TrailingData, j, "data after the end of the JSON value: "+describe(data, j), false)
	}
	return s.err
}

// fail records the first problem; structural ones end the scan, the others let it read on to
// the end of the value's structure (Doc.Complete).
func (s *Scanner) fail(r Reason, at int, detail string, structural bool) {
	if structural {
		s.stop = true
	}
	if s.err != nil {
		return
	}
	s.err = &Error{Reason: r, Offset: at, Path: s.path(r != DuplicateKey), Detail: detail}
}

// endScalar is the state after a string, number or literal that ends before end.
func (s *Scanner) endScalar(end int) int {
	if len(s.stack) == 1 && s.member >= 0 {
		s.doc.Members[s.member].End = end
		s.member = -1
	}
	return stAfter
}

// close ends the array or object whose closing bracket is at i.
func (s *Scanner) close(i int) int {
	f := s.stack[len(s.stack)-1]
	if f.object && len(s.keys)-f.keysStart > smallObject {
		s.sortedDuplicates(f)
	}
	s.keys = s.keys[:f.keysStart]
	s.stack = s.stack[:len(s.stack)-1]
	if len(s.stack) == 1 && s.member >= 0 {
		s.doc.Members[s.member].End = i + 1
		s.member = -1
	}
	return i + 1
}

// sortedDuplicates finds a duplicate among the keys of a large object f that is closing; it
// reports the later of the two.
func (s *Scanner) sortedDuplicates(f frame) {
	ks := s.keys[f.keysStart:]
	slices.SortFunc(ks, func(a, b key) int {
		if c := bytes.Compare(s.text(a), s.text(b)); c != 0 {
			return c
		}
		return a.pos - b.pos
	})
	for j := 1; j < len(ks); j++ {
		if bytes.Equal(s.text(ks[j-1]), s.text(ks[j])) {
			// The object's own frame is still on the stack; its path ends at the object.
			s.failDuplicate(ks[j])
			return
		}
	}
}

func (s *Scanner) failDuplicate(k key) {
	s.fail(DuplicateKey, k.pos, "duplicate key "+quoteKey(s.text(k)), false)
}

// key reads the key whose opening quote is at i, checks it against the object's other keys and
// makes it the member being read.
func (s *Scanner) key(i int) int {
	end, escaped := s.str(i, true)
	if s.stop {
		return end
	}
	k := key{start: i + 1, end: end - 1, pos: i}
	if escaped {
		k.start = len(s.arena)
		s.arena = decode(s.arena, s.data[i+1:end-1])
		k.end, k.decoded = len(s.arena), true
	}
	f := &s.stack[len(s.stack)-1]
	if n := len(s.keys) - f.keysStart; n < smallObject {
		t := s.text(k)
		for _, o := range s.keys[f.keysStart:] {
			if bytes.Equal(s.text(o), t) {
				s.failDuplicate(k)
				break
			}
		}
	}
	f.lastKey = len(s.keys)
	f.count++
	s.keys = append(s.keys, k)
	if len(s.stack) == 1 && s.doc != nil {
		s.member = -1
		t := s.text(k)
		for m, name := range s.top {
			if string(t) == name {
				if s.doc.Members[m].Seen {
					s.doc.Members[m].Twice = true
				}
				s.doc.Members[m].Seen = true
				s.member = m
			}
		}
	}
	return end
}

// str reads the string whose opening quote is at i and returns the index after its closing
// quote and whether it holds escapes.
func (s *Scanner) str(i int, isKey bool) (int, bool) {
	data := s.data
	escaped := false
	j := i + 1
	for j < len(data) {
		c := data[j]
		switch {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			escaped = true
			j = s.escape(j)
			if s.stop {
				return j, escaped
			}
		case c < 0x20:
			s.fail(Syntax, j, fmt.Sprintf("control character U+%04X inside a string; escape it (\\n, \\t, \\u%04x)", c, c), true)
			return j, escaped
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(data[j:])
			if r == utf8.RuneError && size == 1 {
				s.fail(InvalidUTF8, j, fmt.Sprintf("byte 0x%02x inside a string is not UTF-8", c), false)
			}
			j += size
		}
	}
	what := "a string"
	if isKey {
		what = "a key"
	}
	s.fail(Syntax, i, what+" that is not closed: no '\"' before the end", true)
	return j, escaped
}

// escape checks the escape whose backslash is at j and returns the index after it.
func (s *Scanner) escape(j int) int {
	data := s.data
	if j+1 == len(data) {
		s.fail(Syntax, j, "a string that is not closed: it ends in a backslash", true)
		return j + 1
	}
	switch data[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return j + 2
	case 'u':
	default:
		s.fail(Syntax, j, "invalid escape "+describe(data, j)+" in a string", true)
		return j
	}
	r, ok := hex4(data, j+2)
	if !ok {
		s.fail(Syntax, j, "invalid \\u escape "+describe(data, j)+": it needs four hex digits", true)
		return j
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00:
		if r2, ok := hex4(data, j+8); ok && j+7 < len(data) && data[j+6] == '\\' && data[j+7] == 'u' && r2 >= 0xdc00 && r2 <= 0xdfff {
			return j + 12
		}
		s.fail(InvalidUTF8, j, fmt.Sprintf("\\u%04x is the first half of a UTF-16 surrogate pair without its second half", r), false)
	case utf16.IsSurrogate(r):
		s.fail(InvalidUTF8, j, fmt.Sprintf("\\u%04x is the second half of a UTF-16 surrogate pair without its first half", r), false)
	}
	return j + 6
}

// String reads the JSON string at the start of b as this package accepts one (valid UTF-8, no
// control character, every escape whole, no half of a UTF-16 surrogate pair) and returns its
// text and the bytes after it; ok is false for anything else. A string without escapes costs
// one copy; one with escapes is decoded as a key is (decode).
func String(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	escaped, ascii := false, true
	for i := 1; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			raw := b[1:i]
			if !ascii && !utf8.Valid(raw) {
				return "", nil, false
			}
			if escaped {
				return string(decode(make([]byte, 0, len(raw)), raw)), b[i+1:], true
			}
			return string(raw), b[i+1:], true
		case c < 0x20:
			return "", nil, false
		case c == '\\':
			n, ok := escapeLen(b, i)
			if !ok {
				return "", nil, false
			}
			escaped, i = true, i+n
			continue
		case c >= 0x80:
			ascii = false
		}
		i++
	}
	return "", nil, false
}

// escapeLen is the length of the escape at data[j] (a backslash) that the scanner accepts: a
// single character, a \u escape outside the surrogates, or a whole surrogate pair.
func escapeLen(data []byte, j int) (int, bool) {
	if j+1 >= len(data) {
		return 0, false
	}
	switch data[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
	default:
		return 0, false
	}
	r, ok := hex4(data, j+2)
	switch {
	case !ok || (utf16.IsSurrogate(r) && r >= 0xdc00):
		return 0, false
	case !utf16.IsSurrogate(r):
		return 6, true
	}
	if r2, ok := hex4(data, j+8); ok && data[j+6] == '\\' && data[j+7] == 'u' && r2 >= 0xdc00 && r2 <= 0xdfff {
		return 12, true
	}
	return 0, false
}

// hex4 reads four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// decode appends the text of a key's contents (between its quotes, already checked) to dst.
func decode(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'u':
			r, _ := hex4(raw, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(raw, i+2); ok && i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' && r < 0xdc00 && r2 >= 0xdc00 {
					r = utf16.DecodeRune(r, r2)
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		default: // " \ /
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}

// maxSafe is 2^53−1, the largest integer every JSON reader holds exactly (RFC 7493 §2.2).
const maxSafe = "9007199254740991"

// number reads the number that starts at i.
func (s *Scanner) number(i int) int {
	data := s.data
	j := i
	if data[j] == '-' {
		j++
	}
	intStart := j
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case j < len(data) && data[j] >= '1' && data[j] <= '9':
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
	default:
		s.fail(Syntax, i, "invalid number "+describe(data, i)+": a digit must follow '-'", true)
		return j
	}
	intDigits := j - intStart
	float := false
	if j < len(data) && data[j] == '.' {
		float = true
		j++
		k := j
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		if j == k {
			s.fail(Syntax, i, "invalid number "+describe(data, i)+": a digit must follow '.'", true)
			return j
		}
	}
	exp, negExp := 0, false
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		float = true
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			negExp = data[j] == '-'
			j++
		}
		k := j
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			if exp < 1e6 {
				exp = exp*10 + int(data[j]-'0')
			}
			j++
		}
		if j == k {
			s.fail(Syntax, i, "invalid number "+describe(data, i)+": a digit must follow the exponent's 'e'", true)
			return j
		}
	}
	if negExp {
		exp = -exp
	}
	lit := data[i:j]
	switch {
	case !float:
		if intDigits > len(maxSafe) || intDigits == len(maxSafe) && string(data[intStart:j]) > maxSafe {
			s.fail(NumberRange, i, fmt.Sprintf("the integer %s is beyond ±(2^53−1), where JSON readers that keep integers and those that keep floats read different numbers; send it as a string",
				clip(lit)), false)
		}
	case intDigits+exp >= 300: // may overflow: only then is it worth parsing
		if _, err := strconv.ParseFloat(string(lit), 64); err != nil {
			s.fail(NumberRange, i, fmt.Sprintf("the number %s is beyond what a 64-bit float holds (about ±1.8e308)", clip(lit)), false)
		}
	}
	return j
}

// literal reads true, false or null at i.
func (s *Scanner) literal(i int) int {
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(s.data[i:], []byte(lit)) {
			return i + len(lit)
		}
	}
	s.fail(Syntax, i, "expected a JSON value, found "+describe(s.data, i), true)
	return i
}

// unfinished says what the document lacks when it ends in state st.
func (s *Scanner) unfinished(st int) string {
	switch {
	case len(s.stack) == 0:
		return "the document ends before its value"
	case st == stColon:
		return "the document ends after a key, before its ':' and value"
	case s.stack[len(s.stack)-1].object:
		return "the document ends inside an object: a '}' is missing"
	default:
		return "the document ends inside an array: a ']' is missing"
	}
}

// path is the JSON path of the open array or object, and with inner of the member or element
// being read in it.
func (s *Scanner) path(inner bool) string {
	var b strings.Builder
	b.WriteByte('$')
	for d, f := range s.stack {
		if d == len(s.stack)-1 && !inner {
			break
		}
		switch {
		case !f.object:
			fmt.Fprintf(&b, "[%d]", f.count)
		case f.lastKey >= 0:
			t := s.text(s.keys[f.lastKey])
			if plainKey(t) {
				b.WriteByte('.')
				b.Write(t)
			} else {
				b.WriteByte('[')
				b.WriteString(quoteKey(t))
				b.WriteByte(']')
			}
		}
	}
	return b.String()
}

// plainKey reports whether a key can be written after a dot in a path.
func plainKey(t []byte) bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	for i, c := range t {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// quoteKey quotes a key for a message, shortened past 64 bytes.
func quoteKey(t []byte) string {
	if len(t) > 64 {
		return strconv.Quote(string(t[:64])) + "…"
	}
	return strconv.Quote(string(t))
}

// clip is a literal for a message, shortened past 40 bytes.
func clip(lit []byte) string {
	if len(lit) > 40 {
		return string(lit[:40]) + "…"
	}
	return string(lit)
}

// describe quotes what is at data[i:] for a message: a few bytes, or "the end".
func describe(data []byte, i int) string {
	if i >= len(data) {
		return "the end"
	}
	n := min(len(data)-i, 12)
	if c := data[i]; c >= utf8.RuneSelf {
		if r, size := utf8.DecodeRune(data[i:]); r == utf8.RuneError && size == 1 {
			return fmt.Sprintf("byte 0x%02x", c)
		}
	}
	q := strconv.Quote(string(data[i : i+n]))
	if i+n < len(data) {
		q += "…"
	}
	return q
}

// skipSpace is the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}
