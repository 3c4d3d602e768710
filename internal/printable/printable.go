// Package printable makes text that came from a person or a program safe to show on a terminal
// or in a line of a report: an operator's reason, a server's last words on stderr, a tool's
// description. Control characters would let that text move the cursor, clear the screen, recolour
// or forge lines of what a person reads ("robot: unlocked by root").
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text is s with invalid UTF-8 replaced by U+FFFD and every control character (C0, DEL, C1,
// including newline and tab) written as a Go escape (\n, \t, \x1b, \u0085), so that it shows
// as one line and as what it is.
func Text(s string) string {
	if Clean(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Clean reports whether s is valid UTF-8 without control characters, so Text leaves it as it is.
func Clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			if c < 0x80 {
				return false
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 || unicode.IsControl(r) {
				return false
			}
			i += size - 1
		}
	}
	return true
}
