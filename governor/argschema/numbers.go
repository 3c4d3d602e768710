package argschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// The library turns every number it checks into an exact big.Rat. For a literal like 1e999999
// that costs a million-digit integer and a tenth of a second of CPU; for a larger exponent the
// conversion fails and the library dereferences nil. No tool argument or schema needs such a
// number, so numbers beyond these bounds are refused before the library sees them.
const (
	maxNumberLen = 64  // characters in the literal
	maxExponent  = 400 // magnitude of the exponent after "e"; float64 ends near 1e308
)

// scan makes one pass over the JSON text raw, allocating nothing, and reports how deeply its
// objects and arrays nest and whether it holds a number beyond the bounds above. Malformed
// text is left for the decoder.
func scan(raw []byte) (depth int, oddNumbers bool) {
	d := 0
	for i := 0; i < len(raw); i++ {
		switch b := raw[i]; {
		case b == '"':
			i = stringEnd(raw, i)
		case b == '{' || b == '[':
			d++
			depth = max(depth, d)
		case b == '}' || b == ']':
			d--
		case b == '-' || '0' <= b && b <= '9':
			j := i + 1
			for j < len(raw) && isNumberByte(raw[j]) {
				j++
			}
			oddNumbers = oddNumbers || oddNumber(raw[i:j])
			i = j - 1
		}
	}
	return depth, oddNumbers
}

// stringEnd returns the index of the quote that closes the string opening at raw[open], or
// len(raw) if there is none.
func stringEnd(raw []byte, open int) int {
	for i := open + 1; ; i++ {
		q := bytes.IndexByte(raw[i:], '"')
		if q < 0 {
			return len(raw)
		}
		i += q
		backslashes := 0
		for j := i - 1; j > open && raw[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return i
		}
	}
}

func isNumberByte(b byte) bool {
	return '0' <= b && b <= '9' || b == '.' || b == 'e' || b == 'E' || b == '+' || b == '-'
}

// oddNumber reports whether the number literal lit is beyond the bounds above.
func oddNumber(lit []byte) bool {
	if len(lit) > maxNumberLen {
		return true
	}
	for i, c := range lit {
		if c != 'e' && c != 'E' {
			continue
		}
		exp := lit[i+1:]
		if len(exp) > 0 && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		n := 0
		for _, d := range exp {
			if n = n*10 + int(d-'0'); n > maxExponent {
				return true
			}
		}
		return false
	}
	return false
}

// oddNumbers appends a Problem for every odd number in the decoded JSON value v, which sits at
// loc. It runs only once scan has found one, to say where.
func oddNumbers(v any, loc []string, out *[]Problem) {
	switch v := v.(type) {
	case json.Number:
		if oddNumber([]byte(v)) {
			*out = append(*out, Problem{Path: pointer(loc), Message: fmt.Sprintf(
				"number %s is too long or too large to check; write it in plain decimal form, at most %d characters",
				show(v), maxNumberLen)})
		}
	case map[string]any:
		for key, child := range v {
			oddNumbers(child, append(loc[:len(loc):len(loc)], key), out)
		}
	case []any:
		for i, child := range v {
			oddNumbers(child, append(loc[:len(loc):len(loc)], strconv.Itoa(i)), out)
		}
	}
}
