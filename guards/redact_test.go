package guards

import (
	"reflect"
	"testing"
)

func TestRedact(t *testing.T) {
	rep := func(s Span) string { return "[" + s.Category + "]" }
	tests := []struct {
		name  string
		text  string
		spans []Span
		want  string
	}{
		{"none", "abc", nil, "abc"},
		{"one", "my key is X1 ok", []Span{{10, 12, "K", ""}}, "my key is [K] ok"},
		{"unsorted", "a1 b2 c3", []Span{{6, 8, "C", ""}, {0, 2, "A", ""}}, "[A] b2 [C]"},
		{"overlapping merge, first span's replacement", "0123456789", []Span{{2, 6, "X", ""}, {4, 8, "Y", ""}}, "01[X]89"},
		{"adjacent stay apart", "0123", []Span{{0, 2, "A", ""}, {2, 4, "B", ""}}, "[A][B]"},
		{"out of range is clamped", "abc", []Span{{-5, 1, "A", ""}, {2, 99, "B", ""}}, "[A]b[B]"},
		{"empty and reversed are ignored", "abc", []Span{{1, 1, "A", ""}, {2, 1, "B", ""}}, "abc"},
		{"widened to whole characters", "aéb", []Span{{2, 3, "X", ""}}, "a[X]b"},
		{"nil replacement deletes", "keep this, drop that", []Span{{9, 20, "", ""}}, "keep this"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rep
			if tt.name == "nil replacement deletes" {
				r = nil
			}
			before := append([]Span(nil), tt.spans...)
			if got := Redact(tt.text, tt.spans, r); got != tt.want {
				t.Errorf("Redact = %q, want %q", got, tt.want)
			}
			if !reflect.DeepEqual(before, tt.spans) {
				t.Error("Redact changed the caller's spans")
			}
		})
	}
}

func TestClaim(t *testing.T) {
	claimed := []Span{{0, 5, "A", ""}, {10, 15, "A", ""}}
	got := claim(claimed, []Span{{3, 7, "B", ""}, {6, 9, "B", ""}, {14, 20, "B", ""}, {20, 22, "B", ""}})
	want := []Span{{0, 5, "A", ""}, {6, 9, "B", ""}, {10, 15, "A", ""}, {20, 22, "B", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("claim = %v, want %v", got, want)
	}
}
