package argschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// args1KB is a valid call of robotSchema, about 1 KB of JSON.
func args1KB(tb testing.TB) json.RawMessage {
	points := make([]string, 28)
	for i := range points {
		points[i] = fmt.Sprintf(`{"x":%d.125,"y":-0.5,"z":0.25}`, i)
	}
	args := json.RawMessage(`{"target":"kitchen_table","speed":0.75,"mode":"slow","repeat":2,"color":"red",` +
		`"note":"approach from the left and stop 5 cm above the cup","waypoints":[` + strings.Join(points, ",") + `]}`)
	if n := len(args); n < 900 || n > 1100 {
		tb.Fatalf("arguments are %d bytes, want about 1 KB", n)
	}
	return args
}

// BenchmarkValidate1KB is a valid call, which the plan accepts without the library.
func BenchmarkValidate1KB(b *testing.B) {
	s := mustCompile(b, robotSchema)
	args := args1KB(b)
	if p := s.Validate(args); p != nil {
		b.Fatal(p)
	}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		s.Validate(args)
	}
}

// BenchmarkValidate1KBLibrary is BenchmarkValidate1KB without the plan: the library alone, as
// for a schema the plan does not know, for comparison.
func BenchmarkValidate1KBLibrary(b *testing.B) {
	s := mustCompile(b, robotSchema)
	s.plan = nil
	args := args1KB(b)
	if p := s.Validate(args); p != nil {
		b.Fatal(p)
	}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		s.Validate(args)
	}
}

// BenchmarkValidateSmall is the common robot call: a few flat arguments.
func BenchmarkValidateSmall(b *testing.B) {
	s := mustCompile(b, robotSchema)
	args := json.RawMessage(`{"target":"kitchen_table","speed":0.5,"mode":"slow"}`)
	if p := s.Validate(args); p != nil {
		b.Fatal(p)
	}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		s.Validate(args)
	}
}

// BenchmarkDecode1KB is the decoding part of BenchmarkValidate1KB alone, for comparison.
func BenchmarkDecode1KB(b *testing.B) {
	args := args1KB(b)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonschema.UnmarshalJSON(bytes.NewReader(args)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate1KBInvalid is the failure path: the plan gives up, then the library finds
// and phrases three problems.
func BenchmarkValidate1KBInvalid(b *testing.B) {
	s := mustCompile(b, robotSchema)
	args := bytes.Replace(args1KB(b), []byte(`"speed":0.75,"mode":"slow"`), []byte(`"speed":2,"mode":"turbo","colour":1`), 1)
	if p := s.Validate(args); len(p) != 3 {
		b.Fatal(p)
	}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		s.Validate(args)
	}
}

func BenchmarkCompile(b *testing.B) {
	schema := json.RawMessage(robotSchema)
	b.SetBytes(int64(len(schema)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("move", schema, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
