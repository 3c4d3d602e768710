package gateway

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
)

// idCases are JSON values an "id" or a "method" may hold: the plain ones readID and
// plainString take without a decoder, and every neighbour they must leave to it.
func idCases(r *rand.Rand, n int) []string {
	cases := []string{
		`0`, `-0`, `1`, `-1`, `05`, `-05`, `00`, `123456789012345`, `-123456789012345`,
		`1234567890123456`, `12345678901234567890`, `1.0`, `1.5`, `1e3`, `1E3`, `-`, `+1`, `1 `,
		`""`, `"a"`, `"tools/call"`, `"a\"b"`, `"a\\b"`, `"\u00e9"`, `"é"`, "\"\x01\"", "\"\xff\"",
		`"\ud800"`, `"a"b"`, `"`, `null`, `true`, `{}`, `[]`, `"x`, `x"`,
	}
	alphabet := []string{"a", "Z", "0", "-", "/", "_", " ", "é", "☃", "😀", "\\n", "\\\"", "\\\\", "\\u0041", "\x7f", "\x00", "\"", "\xc3"}
	for len(cases) < n {
		switch r.IntN(3) {
		case 0:
			s := `"`
			for range r.IntN(12) {
				s += alphabet[r.IntN(len(alphabet))]
			}
			cases = append(cases, s+`"`)
		case 1:
			d := strconv.FormatInt(r.Int64N(1<<53)>>r.IntN(53), 10)
			if r.IntN(3) == 0 {
				d = "-" + d
			}
			if r.IntN(8) == 0 {
				d = "0" + d
			}
			cases = append(cases, d)
		default:
			cases = append(cases, strconv.FormatFloat(r.NormFloat64()*1e6, 'g', -1, 64))
		}
	}
	return cases
}

// checkIDAsDecoded holds readID to readIDDecoded, and plainString to encoding/json, for raw.
func checkIDAsDecoded(t *testing.T, raw string) {
	t.Helper()
	got, gotErr := readID([]byte(raw))
	want, wantErr := readIDDecoded([]byte(raw))
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("readID(%q) = %#v, %v; decoded: %#v, %v", raw, got, gotErr, want, wantErr)
	}
	if s, ok := plainString([]byte(raw)); ok {
		var dec string
		if err := json.Unmarshal([]byte(raw), &dec); err != nil || dec != s {
			t.Fatalf("plainString(%q) = %q; encoding/json: %q, %v", raw, s, dec, err)
		}
	}
}

func TestReadIDAsDecoded(t *testing.T) {
	for _, raw := range idCases(rand.New(rand.NewPCG(8, 21)), 20000) {
		checkIDAsDecoded(t, raw)
	}
	if _, ok := plainString([]byte(`"tools/call"`)); !ok {
		t.Fatal(`plainString does not take "tools/call"`)
	}
	if _, ok := plainInt([]byte(`42`)); !ok {
		t.Fatal("plainInt does not take 42")
	}
}

func FuzzReadIDAsDecoded(f *testing.F) {
	for _, raw := range idCases(rand.New(rand.NewPCG(1, 2)), 60) {
		f.Add(raw)
	}
	f.Fuzz(checkIDAsDecoded)
}
