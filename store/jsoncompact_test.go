package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkCompact compares CompactJSON with encoding/json on b: the same verdict as json.Valid,
// and, when valid, the bytes json.Marshal writes for json.RawMessage(b), b itself when those
// are b.
func checkCompact(t *testing.T, b []byte) {
	t.Helper()
	got, ok := CompactJSON(b)
	if valid := json.Valid(b); ok != valid {
		t.Fatalf("CompactJSON(%q): ok %v, json.Valid %v", b, ok, valid)
	}
	if !ok {
		return
	}
	want, err := json.Marshal(json.RawMessage(b))
	if err != nil {
		t.Fatalf("json.Marshal(%q): %v", b, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("CompactJSON(%q) = %q, json.Marshal writes %q", b, got, want)
	}
	if bytes.Equal(b, want) && len(b) > 0 && &got[0] != &b[0] {
		t.Errorf("CompactJSON(%q) copied text that was already compact", b)
	}
}

var compactCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, "{\n  \"a\" : [1, 2.5e-3, -0, true, false, null]\n}",
	`"x"`, `"<a href='x'>&amp;</a>"`, "\"\u2028\u2029\"", "\"\xe2\x80\"", "\"\xe2\x80\xa8\"", "\"\xff\xfe\"",
	`"\u00e9\"\\\/\b\f\n\r\t"`, `"\u12"`, `"\x"`, `"\u12g4"`, `"a` + "\x01" + `"`, "\"tab\there\"",
	`0`, `-0`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `1E-7`, `12.50`, `-12e10`, `1.5e3.2`, `+1`,
	`tru`, `true`, `truex`, `nul`, `null `, `false`, `[1,]`, `[,1]`, `{"a":}`, `{"a" 1}`, `{,}`,
	`{"a":1,}`, `{"a":1 "b":2}`, `{1:2}`, `[1 2]`, `{} {}`, `[]]`, `[[]`, `{"a":{"b":[{}]}}`,
	`{"a":"<",  "b" : "&>"}`, "\t[\r\n]\t", `"`, `"\`, `{"`, `{"a"`, `{"a":`, `[`, `{"a":1`,
	`{"target":"table","speed":1.2,"waypoints":[{"x":0.25,"y":1.5,"z":0.75}]}`,
}

func TestCompactJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range compactCases {
		checkCompact(t, []byte(c))
	}
}

func TestCompactJSONDepthLimit(t *testing.T) {
	for _, depth := range []int{maxJSONDepth - 1, maxJSONDepth, maxJSONDepth + 1} {
		for _, open := range []string{"[", `{"k":`} {
			closer := "]"
			if open != "[" {
				closer = "}"
			}
			b := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closer, depth))
			checkCompact(t, b)
			if _, ok := CompactJSON(b); ok != (depth <= maxJSONDepth) {
				t.Errorf("depth %d of %q: ok %v", depth, open, ok)
			}
		}
	}
}

// TestCompactJSONRandom compares random JSON texts, and random damage to them, with
// encoding/json.
func TestCompactJSONRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	for range 20000 {
		b := randomJSON(r, 0)
		checkCompact(t, b)
		if len(b) > 0 {
			d := bytes.Clone(b)
			switch r.IntN(3) {
			case 0:
				d[r.IntN(len(d))] = byte(r.IntN(256))
			case 1:
				d = d[:r.IntN(len(d))]
			default:
				i := r.IntN(len(d))
				d = append(d[:i:i], append([]byte(randomPiece(r)), d[i:]...)...)
			}
			checkCompact(t, d)
		}
	}
}

var pieces = []string{" ", "\n", "\t", ",", ":", "{", "}", "[", "]", `"`, `\`, `\u`, "<", "&", "\u2028", "\xe2\x80", "0", "-", ".", "e", "true", "\x00", "\xff"}

func randomPiece(r *rand.Rand) string { return pieces[r.IntN(len(pieces))] }

func randomJSON(r *rand.Rand, depth int) []byte {
	var b bytes.Buffer
	sp := func() {
		for r.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t", "\r"}[r.IntN(4)])
		}
	}
	sp()
	k := r.IntN(8)
	if depth > 4 {
		k = r.IntN(5)
	}
	switch k {
	case 0:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	case 1, 2:
		b.WriteString([]string{"0", "-1", "12.5", "1e9", "-0.25E-3", "123456789012345678901234567890"}[r.IntN(6)])
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, "%d", r.Int64())
		}
	case 3, 4:
		b.WriteString(randomString(r))
	case 5, 6:
		b.WriteByte('{')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			sp()
			b.WriteString(randomString(r))
			sp()
			b.WriteByte(':')
			b.Write(randomJSON(r, depth+1))
		}
		sp()
		b.WriteByte('}')
	default:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(randomJSON(r, depth+1))
		}
		sp()
		b.WriteByte(']')
	}
	sp()
	return b.Bytes()
}

func randomString(r *rand.Rand) string {
	parts := []string{"a", "waypoint", "é", "<", ">", "&", "\u2028", "\u2029", `\"`, `\\`, `\/`, `\n`, `\u00e9`, `\uD83D\uDE00`, "\xff", " ", "日本"}
	var s strings.Builder
	s.WriteByte('"')
	for range r.IntN(6) {
		s.WriteString(parts[r.IntN(len(parts))])
	}
	s.WriteByte('"')
	return s.String()
}

func FuzzCompactJSON(f *testing.F) {
	for _, c := range compactCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkCompact(t, b) })
}

func BenchmarkCompactJSON(b *testing.B) {
	var wp []string
	for i := 0; len(strings.Join(wp, ",")) < 920; i++ {
		wp = append(wp, fmt.Sprintf(`{"x":%d.25,"y":%d.5,"z":0.75}`, i, i+1))
	}
	args := []byte(`{"target":"table","speed":1.2,"mode":"careful","label":"stow-red-cup","waypoints":[` + strings.Join(wp, ",") + `]}`)
	b.Run("store", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		for range b.N {
			if _, ok := CompactJSON(args); !ok {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		for range b.N {
			var buf bytes.Buffer
			if json.Compact(&buf, args) != nil {
				b.Fatal("invalid")
			}
		}
	})
}
