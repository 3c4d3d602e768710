package argschema

import (
	"unicode/utf16"
	"unicode/utf8"
)

// scanner reads JSON text in place for the fast path (fastpath.go): decoding arguments into a
// tree of maps costs more than a whole governed call may take, so the fast path walks the bytes
// instead and allocates nothing unless a string it must compare holds escapes.
//
// Every method answers ok == false on text it cannot read exactly as encoding/json would (the
// library decodes with it), and the fast path then leaves the arguments to the library. That
// includes malformed JSON, but also valid text the decoder would rewrite: invalid UTF-8 and
// unpaired surrogate escapes (both become U+FFFD), nesting beyond maxScanDepth, and number
// literals that numbers.go refuses. Being stricter than the decoder only costs speed; being
// laxer would let the fast path accept text the library rejects.
type scanner struct {
	b     []byte
	depth int
	// buf holds the last string read with text that had escapes; it is reused.
	buf []byte
}

// maxScanDepth is how deeply the fast path follows nested objects and arrays; deeper text is
// left to the library (encoding/json itself stops at 10000).
const maxScanDepth = 1000

// kindOf is the JSON type of the value that starts with c, as a typeSet with one bit (never
// typeInteger), or 0 if no value starts so.
func kindOf(c byte) typeSet {
	switch {
	case c == '{':
		return typeObject
	case c == '[':
		return typeArray
	case c == '"':
		return typeString
	case c == '-' || '0' <= c && c <= '9':
		return typeNumber
	case c == 't' || c == 'f':
		return typeBoolean
	case c == 'n':
		return typeNull
	}
	return 0
}

// ws returns the index of the first byte at or after i that is not JSON whitespace.
func (s *scanner) ws(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skip reads the value at i, whatever it is, and returns the index just past it.
func (s *scanner) skip(i int) (int, bool) {
	if i >= len(s.b) {
		return i, false
	}
	switch kindOf(s.b[i]) {
	case typeObject:
		return s.skipObject(i)
	case typeArray:
		return s.skipArray(i)
	case typeString:
		end, _, ok := s.str(i)
		return end, ok
	case typeNumber:
		return s.num(i)
	case typeBoolean:
		if s.b[i] == 't' {
			return s.lit(i, "true")
		}
		return s.lit(i, "false")
	case typeNull:
		return s.lit(i, "null")
	}
	return i, false
}

func (s *scanner) skipObject(i int) (int, bool) {
	i, more, ok := s.open(i, '}')
	for more && ok {
		var value int
		if _, _, value, _, ok = s.key(i); !ok {
			break
		}
		if i, ok = s.skip(value); !ok {
			break
		}
		i, more, ok = s.next(i, '}')
	}
	return i, ok
}

func (s *scanner) skipArray(i int) (int, bool) {
	i, more, ok := s.open(i, ']')
	for more && ok {
		if i, ok = s.skip(i); !ok {
			break
		}
		i, more, ok = s.next(i, ']')
	}
	return i, ok
}

// open steps into the object or array whose bracket is at i. It returns the index of the first
// member, or, with more == false, the index just past an empty container's closing bracket.
// A container that open enters must be left with next.
func (s *scanner) open(i int, closing byte) (at int, more, ok bool) {
	if s.depth++; s.depth > maxScanDepth {
		return i, false, false
	}
	i = s.ws(i + 1)
	if i < len(s.b) && s.b[i] == closing {
		s.depth--
		return i + 1, false, true
	}
	return i, true, true
}

// next steps over the separator after the member ending at i. It returns the index of the next
// member, or, with more == false, the index just past the closing bracket.
func (s *scanner) next(i int, closing byte) (at int, more, ok bool) {
	i = s.ws(i)
	switch {
	case i >= len(s.b):
		return i, false, false
	case s.b[i] == ',':
		return s.ws(i + 1), true, true
	case s.b[i] == closing:
		s.depth--
		return i + 1, false, true
	}
	return i, false, false
}

// key reads an object member's name at i and the colon after it. start and end delimit the
// quoted name, for text; value is the index of the member's value.
func (s *scanner) key(i int) (start, end, value int, escaped, ok bool) {
	end, escaped, ok = s.str(i)
	if !ok {
		return i, i, i, false, false
	}
	colon := s.ws(end)
	if colon >= len(s.b) || s.b[colon] != ':' {
		return i, end, colon, false, false
	}
	return i, end, s.ws(colon + 1), escaped, true
}

// lit reads the literal word (true, false or null) at i.
func (s *scanner) lit(i int, word string) (int, bool) {
	end := i + len(word)
	if end > len(s.b) || string(s.b[i:end]) != word {
		return i, false
	}
	return end, true
}

// num reads the number at i, following the JSON grammar exactly, and refuses the literals
// numbers.go refuses.
func (s *scanner) num(i int) (int, bool) {
	b, j := s.b, i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && '1' <= b[j] && b[j] <= '9':
		j = s.digits(j)
	default:
		return i, false
	}
	if j < len(b) && b[j] == '.' {
		if j++; j >= len(b) || !isDigit(b[j]) {
			return i, false
		}
		j = s.digits(j)
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		if j++; j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || !isDigit(b[j]) {
			return i, false
		}
		j = s.digits(j)
	}
	return j, !oddNumber(b[i:j])
}

func (s *scanner) digits(i int) int {
	for i < len(s.b) && isDigit(s.b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// str reads the string whose opening quote is at i and returns the index just past its closing
// quote, and whether it holds escapes (so that text must decode it).
func (s *scanner) str(i int) (end int, escaped, ok bool) {
	if i >= len(s.b) || s.b[i] != '"' {
		return i, false, false
	}
	for j := i + 1; j < len(s.b); {
		switch c := s.b[j]; {
		case c == '"':
			return j + 1, escaped, true
		case c == '\\':
			n, _ := escape(s.b[j:])
			if n == 0 {
				return j, false, false
			}
			escaped = true
			j += n
		case c < 0x20:
			return j, false, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(s.b[j:])
			if r == utf8.RuneError && size == 1 {
				return j, false, false
			}
			j += size
		}
	}
	return len(s.b), false, false
}

// text is the content of the string that str read from start to end, with its escapes
// decoded. Without escapes it is a slice of the arguments; otherwise it is s.buf, valid until
// the next call.
func (s *scanner) text(start, end int, escaped bool) []byte {
	raw := s.b[start+1 : end-1]
	if !escaped {
		return raw
	}
	out := s.buf[:0]
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			out = append(out, raw[i])
			i++
			continue
		}
		n, r := escape(raw[i:])
		out = utf8.AppendRune(out, r)
		i += n
	}
	s.buf = out
	return out
}

// escape reads the escape sequence that starts with the backslash at b[0] and returns its
// length and the character it stands for, or length 0 if it is malformed or an unpaired
// surrogate. A surrogate pair counts as one sequence.
func escape(b []byte) (n int, r rune) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return 2, rune(b[1])
	case 'b':
		return 2, '\b'
	case 'f':
		return 2, '\f'
	case 'n':
		return 2, '\n'
	case 'r':
		return 2, '\r'
	case 't':
		return 2, '\t'
	case 'u':
		r, ok := hex4(b[2:])
		switch {
		case !ok:
			return 0, 0
		case !utf16.IsSurrogate(r):
			return 6, r
		case len(b) >= 12 && b[6] == '\\' && b[7] == 'u':
			low, ok := hex4(b[8:])
			if r = utf16.DecodeRune(r, low); ok && r != utf8.RuneError {
				return 12, r
			}
		}
	}
	return 0, 0
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
