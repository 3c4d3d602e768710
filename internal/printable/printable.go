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
// including newline and tab) and every invisible format character (bidirectional overrides,
// zero-width characters, Unicode tags) written as an escape (\n, \t, \x1b, \u0085, \u202e,
// \U000e0049), so that it shows as one line and as what it is: a right-to-left override cannot
// reverse the text after it, and instructions in tag characters do not hide.
func Text(s string) string {
	return escaped(s, false)
}

// Lines is Text keeping newlines and tabs as they are, for text shown over several lines (a
// model's answer on the agent's printout): an escape sequence cannot recolour, move the cursor or
// retitle the terminal, and a carriage return cannot overwrite the line it ends (\r), but the
// text's own lines stay lines.
func Lines(s string) string {
	return escaped(s, true)
}

func escaped(s string, keepLines bool) string {
	if clean(s, keepLines) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		switch {
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			writeEscape(&b, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Clean reports whether s is valid UTF-8 without control characters, so Text leaves it as it is.
func Clean(s string) bool {
	return clean(s, false)
}

func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			if c < 0x80 {
				if keepLines && (c == '\n' || c == '\t') {
					continue
				}
				return false
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				return false
			}
			i += size - 1
		}
	}
	return true
}

// InvisibleEscaped is s with only its invisible format characters (Unicode category Cf:
// bidirectional controls, zero-width characters, tags) escaped, for text whose line breaks
// stay (a JSON document shown as it is): \u202e, \U000e0049.
func InvisibleEscaped(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			writeEscape(&b, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func writeEscape(b *strings.Builder, r rune) {
	if r > 0xFFFF {
		fmt.Fprintf(b, `\U%08x`, r)
		return
	}
	fmt.Fprintf(b, `\u%04x`, r)
}
