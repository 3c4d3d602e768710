package guards

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSizeLimit(t *testing.T) {
	tests := []struct {
		name, settings, text string
		want                 []found
		redacted             string
	}{
		{"under both", "max_chars: 5\nmax_bytes: 10", "héllo", nil, "héllo"},
		{"chars over", "max_chars: 3", "héllo", []found{f("max_chars", "lo")}, "hél"},
		{"bytes over, cut before a split character", "max_bytes: 2", "héllo", []found{f("max_bytes", "éllo")}, "h"},
		{"bytes exactly at a boundary", "max_bytes: 3", "héllo", []found{f("max_bytes", "llo")}, "hé"},
		{"the earlier cut wins", "max_chars: 4\nmax_bytes: 3", "héllo", []found{f("max_bytes", "llo")}, "hé"},
		{"emoji", "max_chars: 1", "🤖🤖", []found{f("max_chars", "🤖")}, "🤖"},
		{"four-byte character split by bytes", "max_bytes: 6", "🤖🤖", []found{f("max_bytes", "🤖")}, "🤖"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGuard(t, "size.limit", tt.settings)
			if got := spansOf(t, g, tt.text); !equalFound(got, tt.want) {
				t.Errorf("Scan(%q) = %q, want %q", tt.text, got, tt.want)
			}
			spans, _ := g.Scan(t.Context(), tt.text)
			got := g.(Redactor).Redact(tt.text, spans)
			if got != tt.redacted || !utf8.ValidString(got) {
				t.Errorf("Redact = %q, want %q", got, tt.redacted)
			}
		})
	}
}

func TestSizeLimitLargeText(t *testing.T) {
	g := newGuard(t, "size.limit", "max_bytes: 65536")
	text := strings.Repeat("ü", 40000) // 80000 bytes
	spans, _ := g.Scan(t.Context(), text)
	if len(spans) != 1 || spans[0].Start != 65536 {
		t.Fatalf("spans %+v", spans)
	}
}
