package store

import "encoding/json"

// The arguments of a call are stored in its record as encoding/json writes a json.RawMessage:
// without insignificant whitespace, with <, >, & and U+2028, U+2029 escaped (\u003c, …). The
// library gets there with its table-driven scanner, once to check and once more to compact, at
// several nanoseconds a byte; the record of every call pays for it while the caller waits. The
// scanner here reads exactly the language json.Valid accepts (the same grammar, any byte from
// 0x20 up inside strings, at most maxJSONDepth arrays and objects inside one another) in one
// pass, and most arguments, already compact, are then returned as they are
// (FuzzCompactJSON compares both with encoding/json).

// maxJSONDepth is encoding/json's nesting limit: 10,000 open arrays and objects are valid,
// 10,001 are not.
const maxJSONDepth = 10000

// CompactJSON returns b as a record stores it: the bytes json.Marshal writes for
// json.RawMessage(b). ok is false when b is not exactly one JSON value (json.Valid(b) is
// false). When b is already in that form, it is returned itself, not a copy.
func CompactJSON(b []byte) (out json.RawMessage, ok bool) {
	ok, clean := scanJSON(b)
	switch {
	case !ok:
		return nil, false
	case clean:
		return b, true
	}
	return appendCompact(make([]byte, 0, len(b)), b), true
}

// jsonSpecial marks the bytes inside a string that the scanner must look at: the quote, the
// backslash, control characters (invalid), the characters encoding/json escapes (<, >, &) and
// the first byte of U+2028 and U+2029.
var jsonSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		t[c] = true
	}
	return t
}()

// scanJSON reports whether b is exactly one JSON value, and whether it is in the form
// appendCompact writes (no whitespace outside strings, nothing to escape).
func scanJSON(b []byte) (ok, clean bool) {
	s := jsonScan{b: b, clean: true}
	return s.run(), s.clean
}

// jsonScan is the state of scanJSON: the text, where it is, and whether everything read so
// far is in compact form.
type jsonScan struct {
	b     []byte
	i     int
	clean bool
}

func (s *jsonScan) run() bool {
	b := s.b
	// The arrays and objects open, '[' or '{'.
	var stackBuf [64]byte
	stack := stackBuf[:0]
	// Each turn reads one value, then what closes the containers it ends and the comma
	// before the next value.
	for {
		s.ws()
		if s.i >= len(b) {
			return false
		}
		switch c := b[s.i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			stack = append(stack, c)
			s.i++
			s.ws()
			if s.i < len(b) && (c == '{' && b[s.i] == '}' || c == '[' && b[s.i] == ']') {
				stack = stack[:len(stack)-1]
				s.i++
				break
			}
			if c == '{' && !s.key() {
				return false
			}
			continue
		case c == '"':
			if !s.str() {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if !s.num() {
				return false
			}
		case c == 't':
			if !s.lit("true") {
				return false
			}
		case c == 'f':
			if !s.lit("false") {
				return false
			}
		case c == 'n':
			if !s.lit("null") {
				return false
			}
		default:
			return false
		}
		// After a value: close what it ends, then a comma and the next value, or the end.
		for {
			s.ws()
			if len(stack) == 0 {
				return s.i == len(b)
			}
			if s.i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			c := b[s.i]
			if c == ',' {
				s.i++
				if top == '{' && !s.key() {
					return false
				}
				break
			}
			if top == '{' && c == '}' || top == '[' && c == ']' {
				stack = stack[:len(stack)-1]
				s.i++
				continue
			}
			return false
		}
	}
}

// ws skips whitespace.
func (s *jsonScan) ws() {
	i := s.i
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			s.clean = false
			i++
			continue
		}
		break
	}
	s.i = i
}

// key reads an object's key and its colon, leaving s.i at the value.
func (s *jsonScan) key() bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
		return false
	}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != ':' {
		return false
	}
	s.i++
	return true
}

// str reads the string whose opening quote is at s.i.
func (s *jsonScan) str() bool {
	b, i := s.b, s.i+1
	for {
		for i < len(b) && !jsonSpecial[b[i]] {
			i++
		}
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		case c == 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8 {
				s.clean = false
			}
			i++
		default: // <, >, &
			s.clean = false
			i++
		}
	}
}

// num reads the number at s.i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScan) num() bool {
	b, i := s.b, s.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		end := digits(b, i+1)
		if end == i+1 {
			return false
		}
		i = end
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		end := digits(b, i)
		if end == i {
			return false
		}
		i = end
	}
	s.i = i
	return true
}

// digits is where the run of decimal digits starting at b[i] ends.
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// lit reads the literal word at s.i.
func (s *jsonScan) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// appendCompact appends b, valid JSON, to dst without whitespace outside strings and with <, >,
// & and U+2028, U+2029 escaped, as encoding/json's compact does for Marshal.
func appendCompact(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	inString := false
	start := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			switch c {
			case ' ', '\t', '\n', '\r':
				dst = append(dst, b[start:i]...)
				start = i + 1
			case '"':
				inString = true
			}
			continue
		}
		switch {
		case c == '\\':
			i++ // the escaped byte is copied with the run
		case c == '"':
			inString = false
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, b[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8:
			dst = append(dst, b[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[b[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(dst, b[start:]...)
}
