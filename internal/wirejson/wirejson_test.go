package wirejson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestEncodesAsTheSDK(t *testing.T) {
	b := bytes.NewBufferString("head:")
	if err := Append(b, map[string]any{"t": "<a & b>", "n": 1.5}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `head:{"n":1.5,"t":"<a & b>"}`; got != want {
		t.Fatalf("Append = %s, want %s (no HTML escaping, no newline)", got, want)
	}
	out, err := Marshal([]string{"\u2028"})
	if err != nil || string(out) != `["\u2028"]` {
		t.Fatalf("Marshal = %s, %v", out, err)
	}
	if _, err := Marshal(math.NaN()); err == nil {
		t.Fatal("Marshal of NaN: no error")
	}
}

// TestAppendStringIsEncodingJSON: strings drawn over every byte encoding/json treats apart
// quote as encoding/json quotes them, with HTML escaping (json.Marshal) and without (the SDK's
// encoder).
func TestAppendStringIsEncodingJSON(t *testing.T) {
	pieces := []string{"a", " ", "\"", "\\", "/", "<", ">", "&", "\x00", "\x01", "\x1f", "\b", "\f", "\n", "\r", "\t", "\x7f",
		"\u2028", "\u2029", "\u2027", "\u202a", "é", "日本", "🤖", "\xff", "\xe2\x80", "\xe2", "\xc3", "\xed\xa0\x80", "\uFFFD"}
	rng := rand.New(rand.NewPCG(3, 17))
	for range 20000 {
		var s strings.Builder
		for range rng.IntN(10) {
			s.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := s.String()
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(text); err != nil {
				t.Fatal(err)
			}
			got := AppendString([]byte("x"), text, html)
			if string(got[1:]) != strings.TrimSuffix(want.String(), "\n") || got[0] != 'x' {
				t.Fatalf("AppendString(%q, html %v) = %s, encoding/json %s", text, html, got[1:], want.String())
			}
		}
	}
}

// TestAppendFloatIsEncodingJSON: finite floats of every bit pattern, and the edges of the
// exponent form, are written as encoding/json writes them.
func TestAppendFloatIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 23))
	edges := []float64{0, math.Copysign(0, -1), 1e-6, math.Nextafter(1e-6, 0), 1e21, math.Nextafter(1e21, 0), 1e-7, 1e-10, 1e-100,
		5e-324, math.MaxFloat64, -math.MaxFloat64, 0.1, 123456789, 1e20, -2.5e-300, 1.5}
	for i := range 50000 {
		f := math.Float64frombits(rng.Uint64())
		if i < len(edges) {
			f = edges[i]
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat([]byte("x"), f); string(got[1:]) != string(want) || got[0] != 'x' {
			t.Fatalf("AppendFloat(%v) = %s, encoding/json %s", f, got[1:], want)
		}
	}
}
