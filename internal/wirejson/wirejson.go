// Package wirejson encodes JSON the way the MCP SDK writes its messages: encoding/json without
// HTML escaping and without a trailing newline. The gateway's own paths for tools/call (the
// fast paths, docs/design.md) write what the SDK would write, byte for byte, with it.
package wirejson

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// Append appends the encoding of v to b. On an error b holds what was there before, and maybe
// part of v's encoding: the caller discards b.
func Append(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// Marshal is the encoding of v.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := Append(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// invalidUTF8 is what encoding/json writes for a byte of invalid UTF-8 in a string: the escape
// \ufffd, or U+FFFD itself when the toolchain's encoding/json is built on encoding/json/v2
// (GOEXPERIMENT=jsonv2), which writes the character. Asked of encoding/json once, so that
// AppendString writes what it writes under either.
var invalidUTF8 = func() string {
	b, err := json.Marshal("\xff")
	if err != nil || len(b) < 2 {
		return `\ufffd`
	}
	return string(b[1 : len(b)-1])
}()

// AppendFloat appends f as encoding/json writes a float64: the shortest decimal that reads back
// as f, in exponent form below 1e-6 and from 1e21 on, a one-digit negative exponent unpadded
// (e-7, not e-07). f must be finite: encoding/json refuses NaN and the infinities, and the
// caller decides what that means for it.
func AppendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// AppendString appends s quoted as encoding/json quotes a string: invalid UTF-8 as U+FFFD,
// U+2028 and U+2029 as escapes, the short escapes (\n, \b, …) where JSON has them, other
// control characters as \u00XX; with escapeHTML, also <, > and & as \u00XX (json.Marshal),
// without it as themselves (an Encoder with SetEscapeHTML(false), as the SDK writes).
func AppendString(b []byte, s string, escapeHTML bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, invalidUTF8...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
