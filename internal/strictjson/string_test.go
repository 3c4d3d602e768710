package strictjson

import (
	"encoding/json"
	"testing"
)

// FuzzString: a string String reads is one Validate accepts and encoding/json decodes to the
// same text; one Validate accepts as a whole value, String reads.
func FuzzString(f *testing.F) {
	for _, c := range []string{`""`, `"a"`, `"é😀"`, `"\u00e9\ud83d\ude00\b\f\n\r\t\/\\\""`, `"\ud83d"`, `"\ude00\ud83d"`,
		`"\ud83d\u0041"`, `"\u12"`, `"\x"`, "\"a\x00b\"", "\"\xff\"", `"a" x`, `"a`, `a"`} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, c string) {
		s, rest, ok := String([]byte(c))
		if !ok {
			if Validate([]byte(c)) == nil && len(c) > 0 && c[0] == '"' {
				t.Fatalf("String refused %q, which Validate accepts", c)
			}
			return
		}
		raw := c[:len(c)-len(rest)]
		if err := Validate([]byte(raw)); err != nil {
			t.Fatalf("String read %q from %q, which Validate refuses: %v", s, raw, err)
		}
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil || want != s {
			t.Fatalf("String(%q) = %q; encoding/json %q (%v)", raw, s, want, err)
		}
	})
}
