package wirejson

import (
	"bytes"
	"math"
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
