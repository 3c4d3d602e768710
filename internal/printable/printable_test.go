package printable

import "testing"

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"a person is in the cell":   "a person is in the cell",
		"grüße, 机器人":                "grüße, 机器人",
		"esc \x1b[31mRED\x1b[0m":    `esc \x1b[31mRED\x1b[0m`,
		"line\nLOCKOUTS\n  robot":   `line\nLOCKOUTS\n  robot`,
		"tab\there\r":               `tab\there\r`,
		"del\x7f c1\u0085 bad\xff!": `del\x7f c1\u0085 bad` + "\uFFFD!",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
		if Clean(in) != (in == want) {
			t.Errorf("Clean(%q) = %v", in, Clean(in))
		}
	}
}

func TestInvisibleCharactersAreShown(t *testing.T) {
	for in, want := range map[string]string{
		"lock\u202Elive":            `lock\u202elive`,
		"Safe.\U000E0049\U000E0067": `Safe.\U000e0049\U000e0067`,
		"zero\u200Bwidth":           `zero\u200bwidth`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
		if got := InvisibleEscaped(in + "\n"); got != want+"\n" {
			t.Errorf("InvisibleEscaped(%q) = %q", in, got)
		}
	}
}

func TestLinesKeepsLinesAndEscapesTheRest(t *testing.T) {
	for in, want := range map[string]string{
		"two\nlines\tand a tab":                  "two\nlines\tand a tab",
		"esc \x1b[31mRED\x1b[0m\n":               `esc \x1b[31mRED\x1b[0m` + "\n",
		"title \x1b]0;owned\x07 bell":            `title \x1b]0;owned\x07 bell`,
		"over\rwrite":                            `over\rwrite`,
		"c1\u009b2J nel\u0085 rlo\u202e bad\xff": `c1\u009b2J nel\u0085 rlo\u202e bad` + "\uFFFD",
		"grüße, 机器人":                             "grüße, 机器人",
	} {
		if got := Lines(in); got != want {
			t.Errorf("Lines(%q) = %q, want %q", in, got, want)
		}
	}
}
