package guards

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRegexDeny(t *testing.T) {
	tests := []struct {
		name, settings, text string
		want                 []found
	}{
		{"literal", `patterns: ['rm\s+-rf']`, "run rm  -rf / now", []found{f("pattern[0]", "rm  -rf")}},
		{"case matters by default", `patterns: ["^i'm sorry, but i can't"]`, "I'm sorry, but I can't", nil},
		{"ignore_case", "patterns: [\"^i'm sorry, but i can't\"]\nignore_case: true", "I'm sorry, but I can't help", []found{f("pattern[0]", "I'm sorry, but I can't")}},
		{"lookahead (not RE2)", `patterns: ['speed=(?!0\b)\d+']`, "speed=0 speed=3", []found{f("pattern[0]", "speed=3")}},
		{"backreference (not RE2)", `patterns: ['\b(\w+) \1\b']`, "move move arm", []found{f("pattern[0]", "move move")}},
		{"earlier pattern wins an overlap", `patterns: ['arm \d', 'arm']`, "arm 1, arm x", []found{f("pattern[0]", "arm 1"), f("pattern[1]", "arm")}},
		{"empty matches flag nothing", `patterns: ['x*']`, "abc", nil},
		{"byte offsets with multibyte text", `patterns: ['bé+']`, "ñ abéé", []found{f("pattern[0]", "béé")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spansOf(t, newGuard(t, "regex.deny", tt.settings), tt.text); !equalFound(got, tt.want) {
				t.Errorf("Scan(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestRegexDenyRedaction(t *testing.T) {
	g := newGuard(t, "regex.deny", "patterns: ['e-?stop']\nignore_case: true\nreplacement: '<x>'").(*regexDeny)
	text := "disable the E-STOP and estop"
	spans, _ := g.Scan(t.Context(), text)
	if got, want := g.Redact(text, spans), "disable the <x> and <x>"; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
}

// catastrophic is the classic exponential-backtracking input for (a+)+$.
var catastrophic = strings.Repeat("a", 57) + "!"

func TestRegexDenyTimeoutNeverQuotesText(t *testing.T) {
	g := newGuard(t, "regex.deny", "patterns: ['(a+)+$']")
	g.(Bounded).SetTimeout(20 * time.Millisecond)
	start := time.Now()
	_, err := g.Scan(context.Background(), catastrophic)
	if err == nil {
		t.Fatal("want a timeout error")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the timeout took %v", took)
	}
	if !strings.Contains(err.Error(), "timeout") {
		t.Errorf("error %q does not say timeout", err)
	}
	assertNoLeak(t, "error", err.Error(), "aaaaa")
}
