package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidate(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	tooDeep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	var many strings.Builder
	many.WriteString("{")
	for i := range 100 {
		fmt.Fprintf(&many, `"k%d":%d,`, i, i)
	}
	manyOK := many.String() + `"last":0}`
	manyDup := many.String() + `"k\u0037":0}` // "k7" again, found when the large object closes
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"table"}}}`
	tests := []struct {
		name   string
		in     string
		reason Reason // "" for strict
		offset int
		path   string
		detail string // a part of the message
	}{
		{name: "call", in: call},
		{name: "whitespace around", in: " \t\r\n" + call + "\r\n "},
		{name: "scalars", in: `[true,false,null,"",0,-0,1.5e3,-2E-10,9007199254740991,-9007199254740991,"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"]`},
		{name: "empty containers", in: `{"a":{},"b":[],"c":[{}]}`},
		{name: "depth at the bound", in: deep},
		{name: "large object", in: manyOK},
		{name: "same key in sibling objects", in: `[{"a":1},{"a":2}]`},
		{name: "same key at other depths", in: `{"a":{"a":{"a":1}}}`},
		{name: "underflow is zero", in: `1e-400`},
		{name: "utf8 text", in: `{"ключ":"значение ✓"}`},

		{name: "empty", in: "  ", reason: Syntax, offset: 2, path: "$", detail: "empty"},
		{name: "trailing garbage", in: call + `}}}garbage]]`, reason: TrailingData, offset: len(call), path: "$", detail: "data after the end"},
		{name: "two objects", in: call + "\n" + call, reason: TrailingData, offset: len(call) + 1, path: "$"},
		{name: "duplicate name", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"robot__get_scene","name":"robot__navigate_to"}}`,
			reason: DuplicateKey, offset: 82, path: "$.params", detail: `duplicate key "name"`},
		{name: "escaped duplicate", in: `{"params":{"name":"a","n\u0061me":"b"}}`, reason: DuplicateKey, offset: 22, path: "$.params", detail: `duplicate key "name"`},
		{name: "duplicate deep in an array", in: `{"a":[1,{"x":1,"y":2,"x":3}]}`, reason: DuplicateKey, offset: 21, path: "$.a[1]"},
		{name: "duplicate in a large object", in: manyDup, reason: DuplicateKey, path: "$", detail: `duplicate key "k7"`},
		{name: "duplicate top-level id", in: `{"id":1,"id":2}`, reason: DuplicateKey, offset: 8, path: "$"},
		{name: "invalid utf8 in a value", in: "{\"a\":\"x\xffy\"}", reason: InvalidUTF8, offset: 7, path: "$.a", detail: "0xff"},
		{name: "invalid utf8 in a key", in: "{\"a\xc3\":1}", reason: InvalidUTF8, offset: 3, path: "$"},
		{name: "utf8 encoded surrogate", in: "\"\xed\xa0\x80\"", reason: InvalidUTF8, offset: 1, path: "$"},
		{name: "overlong utf8", in: "\"\xc0\xaf\"", reason: InvalidUTF8, offset: 1},
		{name: "lone high surrogate", in: `["\ud800x"]`, reason: InvalidUTF8, offset: 2, path: "$[0]", detail: "first half"},
		{name: "lone low surrogate", in: `"\udc00"`, reason: InvalidUTF8, offset: 1, detail: "second half"},
		{name: "utf8 outside strings", in: "[1,\xff]", reason: Syntax, offset: 3, detail: "byte 0xff"},
		{name: "huge number", in: `{"x":1e400}`, reason: NumberRange, offset: 5, path: "$.x", detail: "64-bit float"},
		{name: "huge negative number", in: `[-1.5E+999]`, reason: NumberRange, offset: 1},
		{name: "many digits", in: `[` + strings.Repeat("9", 400) + `.0]`, reason: NumberRange, offset: 1},
		{name: "unsafe integer", in: `{"id":9007199254740993}`, reason: NumberRange, offset: 6, path: "$.id", detail: "2^53"},
		{name: "unsafe negative integer", in: `-12345678901234567890`, reason: NumberRange, offset: 0},
		{name: "too deep", in: tooDeep, reason: TooDeep, offset: MaxDepth, detail: "128"},
		{name: "bare word", in: `{"a":garbage}`, reason: Syntax, offset: 5, path: "$.a"},
		{name: "unclosed object", in: `{"a":1`, reason: Syntax, offset: 6, detail: "'}' is missing"},
		{name: "unclosed string", in: `{"a":"x`, reason: Syntax, offset: 5, detail: "not closed"},
		{name: "control character", in: "\"a\nb\"", reason: Syntax, offset: 2, detail: "U+000A"},
		{name: "bad escape", in: `"\x"`, reason: Syntax, offset: 1},
		{name: "short unicode escape", in: `"\u12"`, reason: Syntax, offset: 1},
		{name: "leading zero", in: `[01]`, reason: Syntax, offset: 2},
		{name: "trailing comma", in: `[1,]`, reason: Syntax, offset: 3},
		{name: "missing colon", in: `{"a" 1}`, reason: Syntax, offset: 5},
		{name: "single quotes", in: `{'a':1}`, reason: Syntax, offset: 1},
		{name: "bad literal", in: `[tru]`, reason: Syntax, offset: 1},
		{name: "lone minus", in: `-`, reason: Syntax, offset: 0},
		{name: "nan", in: `NaN`, reason: Syntax, offset: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate([]byte(tt.in))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("accepted, want %s", tt.reason)
			}
			if e.Reason != tt.reason {
				t.Errorf("reason %s (%v), want %s", e.Reason, e, tt.reason)
			}
			if tt.offset != 0 && e.Offset != tt.offset {
				t.Errorf("offset %d (%v), want %d", e.Offset, e, tt.offset)
			}
			if tt.path != "" && e.Path != tt.path {
				t.Errorf("path %s (%v), want %s", e.Path, e, tt.path)
			}
			if !strings.Contains(e.Error(), tt.detail) {
				t.Errorf("message %q does not say %q", e.Error(), tt.detail)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":7,"params":{"name":"a","name":"b"}}`
	err := Validate([]byte(in))
	if want := `duplicate key "name" at $.params (byte 45)`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestScanMembers(t *testing.T) {
	keys := []string{"jsonrpc", "id", "method", "params"}
	part := func(in string, s Span) string { return in[s.Start:s.End] }
	in := ` {"jsonrpc":"2.0","i\u0064":"x-1","method" : "tools/call","params":{"a":[1,{"b":2}]},"extra":true} `
	d, e := Scan([]byte(in), keys)
	if e != nil {
		t.Fatal(e)
	}
	if d.Kind != '{' || !d.Complete {
		t.Errorf("kind %q complete %t", d.Kind, d.Complete)
	}
	for i, want := range []string{`"2.0"`, `"x-1"`, `"tools/call"`, `{"a":[1,{"b":2}]}`} {
		if got := part(in, d.Members[i]); !d.Members[i].Seen || got != want {
			t.Errorf("%s: %q, want %q", keys[i], got, want)
		}
	}

	// A problem inside the value leaves its structure readable; a second id is seen twice.
	in = "{\"id\":3,\"params\":{\"x\":\"\xff\"},\"id\":4}"
	d, e = Scan([]byte(in), keys)
	if e == nil || e.Reason != InvalidUTF8 || !d.Complete || !d.Members[1].Twice {
		t.Errorf("got %v, complete %t, id twice %t", e, d.Complete, d.Members[1].Twice)
	}
	// Trailing data: the first value is complete.
	d, e = Scan([]byte(`{"id":5} x`), keys)
	if e == nil || e.Reason != TrailingData || !d.Complete || part(`{"id":5} x`, d.Members[1]) != "5" {
		t.Errorf("got %v, complete %t", e, d.Complete)
	}
	// A syntax error: not complete.
	if d, e = Scan([]byte(`{"id":5,`), keys); e == nil || d.Complete {
		t.Errorf("got %v, complete %t", e, d.Complete)
	}
}

func TestValidateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector (it empties sync.Pools at random); `make test` checks them in a run without it")
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"t\u00e9ble","speed":0.5,"n":[1,2,3]}}}`)
	Validate(body) // warm the pool
	if n := testing.AllocsPerRun(100, func() {
		if err := Validate(body); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("%v allocations per valid call, want 0", n)
	}
}

// FuzzStrictJSON holds the scanner to a reference built from encoding/json: what it accepts is
// valid JSON, valid UTF-8 and has no duplicate key; what the reference accepts it accepts too,
// except where it names one of its own further rules (number range, lone surrogates, depth),
// each checked here on its own; and it never panics.
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"table"}}}`,
		`{"a":1}}}garbage]]`, `{"a":1}{"a":2}`, `{"name":"x","name":"y"}`, `{"n\u0061me":1,"name":2}`,
		"\"\xff\"", `"\ud800"`, `1e400`, `9007199254740993`, `[[[[[]]]]]`, `{"a":[{"b":1,"c":{"b":2}}]}`, ``, ` `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := Validate(data)
		refErr := reference(data)
		if err == nil {
			if refErr != nil {
				t.Fatalf("accepted %q, which the reference refuses: %v", data, refErr)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error %v is not an *Error", err)
		}
		if e.Offset < 0 || e.Offset > len(data) {
			t.Fatalf("offset %d outside the %d bytes", e.Offset, len(data))
		}
		if refErr != nil {
			return
		}
		// The reference accepts: the refusal must be one of the rules beyond it, and true.
		switch e.Reason {
		case NumberRange:
			lit := numberAt(data, e.Offset)
			f, perr := strconv.ParseFloat(lit, 64)
			bigInt := !strings.ContainsAny(lit, ".eE") && (f > 9007199254740991 || f < -9007199254740991)
			if perr == nil && !bigInt {
				t.Fatalf("refused the number %q at %d of %q, which a float64 holds", lit, e.Offset, data)
			}
		case InvalidUTF8:
			if !bytes.HasPrefix(data[e.Offset:], []byte(`\u`)) {
				t.Fatalf("refused %q for UTF-8 at %d, which is valid", data, e.Offset)
			}
			r, _ := strconv.ParseUint(string(data[e.Offset+2:e.Offset+6]), 16, 32)
			if r < 0xd800 || r > 0xdfff {
				t.Fatalf("refused %q for a surrogate at %d that is not one", data, e.Offset)
			}
		case TooDeep:
		default:
			t.Fatalf("refused %q, which the reference accepts: %v", data, err)
		}
	})
}

// reference checks data with encoding/json: one valid value, valid UTF-8, no duplicate key
// after decoding (json.Decoder's tokens are decoded keys).
func reference(data []byte) error {
	if !json.Valid(data) {
		return errors.New("not valid JSON")
	}
	if !utf8.Valid(data) {
		return errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*level
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				markValue(stack)
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("duplicate key %q", k)
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, keys: map[string]bool{}, expect: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
			markValue(stack)
		default:
			markValue(stack)
		}
	}
}

// markValue notes that a value ended in the innermost container: an object expects a key next.
func markValue(stack []*level) {
	if len(stack) > 0 && stack[len(stack)-1].object {
		stack[len(stack)-1].expect = true
	}
}

// level is an open array or object of the reference.
type level struct {
	object bool
	keys   map[string]bool
	expect bool // the next string token is a key
}

// numberAt is the number literal at data[i:].
func numberAt(data []byte, i int) string {
	j := i
	for j < len(data) && strings.IndexByte("+-.eE0123456789", data[j]) >= 0 {
		j++
	}
	return string(data[i:j])
}

// BenchmarkValidate measures the scanner on tools/call bodies of 1 KB to 1 MB, beside
// encoding/json's Valid (one pass, no duplicate or range checks) on the same bytes, and on an
// object of 50,000 keys (the sorted check of a large object).
func BenchmarkValidate(b *testing.B) {
	bench := func(name string, body []byte, check func([]byte) bool) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if !check(body) {
					b.Fatal("refused")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(float64(len(body))/1024), "ns/KB")
		})
	}
	strict := func(body []byte) bool { return Validate(body) == nil }
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		body := benchBody(size)
		bench(fmt.Sprintf("strict/%dKB", size>>10), body, strict)
		bench(fmt.Sprintf("encoding-json-Valid/%dKB", size>>10), body, json.Valid)
	}
	var keys bytes.Buffer
	keys.WriteByte('{')
	for i := range 50000 {
		fmt.Fprintf(&keys, `"key-%d":%d,`, i*7919%50000+50000*(i%2), i)
	}
	keys.WriteString(`"end":0}`)
	bench("strict/50000-keys", keys.Bytes(), strict)
}

// benchBody is a tools/call of about size bytes: a mix of keys, strings, numbers and nesting.
func benchBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"robot__navigate_to","arguments":{"target":"table","waypoints":[`)
	for i := 0; b.Len() < size-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"x":%d.25,"y":-%d,"label":"point %d \u00e9","tags":["a","b"],"ok":true}`, i, i, i)
	}
	b.WriteString(`]}}}`)
	return b.Bytes()
}
