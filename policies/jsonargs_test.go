package policies

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

var testAdapter = types.DefaultTypeAdapter

// native converts a CEL value read from arguments back to what encoding/json would give.
func native(t *testing.T, v ref.Val) any {
	t.Helper()
	switch v := v.(type) {
	case *jsonObject:
		out := map[string]any{}
		for i := range v.members {
			k := v.keyOf(i)
			if v.lookup(k) == i {
				out[k] = native(t, v.value(i))
			}
		}
		return out
	case types.String:
		return string(v)
	case types.Double:
		return float64(v)
	case types.Bool:
		return bool(v)
	case types.Null:
		return nil
	case traits.Lister:
		out := []any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			out = append(out, native(t, it.Next()))
		}
		return out
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			out[string(k.(types.String))] = native(t, v.Get(k))
		}
		return out
	}
	t.Fatalf("unexpected value %T %v", v, v)
	return nil
}

// checkAgainstEncodingJSON fails unless newArgs reads raw exactly as encoding/json decodes it
// into an any: the same error or not, the same keys and values.
func checkAgainstEncodingJSON(t *testing.T, raw []byte) {
	t.Helper()
	got := newArgs(raw, testAdapter)
	var want any
	err := json.Unmarshal(raw, &want)
	if strings.Trim(string(raw), " \t\r\n") == "" {
		err, want = nil, nil // no arguments
	}
	obj, isObj := got.(*jsonObject)
	switch w := want.(type) {
	case map[string]any:
		if err != nil {
			break
		}
		if !isObj {
			t.Fatalf("%q: got %v, want an object", raw, got)
		}
		if n := obj.Size().(types.Int); int(n) != len(w) {
			t.Fatalf("%q: Size %d, want %d", raw, n, len(w))
		}
		if g := native(t, obj); !reflect.DeepEqual(g, w) {
			t.Fatalf("%q:\n got %#v\nwant %#v", raw, g, w)
		}
		for k, v := range w {
			found, ok := obj.FindStringKey(k)
			if !ok || !reflect.DeepEqual(native(t, found.(ref.Val)), v) {
				t.Fatalf("%q: key %q: got %v, want %#v", raw, k, found, v)
			}
		}
		if obj.Equal(testAdapter.NativeToValue(w)) != types.True {
			t.Fatalf("%q: not Equal to the decoded map", raw)
		}
		return
	case nil:
		if err == nil {
			if !isObj || obj.Size() != types.Int(0) {
				t.Fatalf("%q: got %v, want an empty object", raw, got)
			}
			return
		}
	}
	if !types.IsError(got) {
		t.Fatalf("%q: got %v, want an error (encoding/json: %v, %T)", raw, got, err, want)
	}
}

func TestArgsReadLikeEncodingJSON(t *testing.T) {
	for _, raw := range argsCorpus {
		checkAgainstEncodingJSON(t, []byte(raw))
	}
}

var argsCorpus = []string{
	``, `  `, `null`, `{}`, ` { } `, `[]`, `"s"`, `1`, `true`,
	`{"a": 1, "b": -2.5e3, "c": 0, "d": -0, "e": 1E+2, "f": 0.5e-3}`,
	`{"s": "plain", "e": "tab\tquote\"slash\/u\u00e9\ud83d\ude00", "bad": "\ud800", "raw": "café"}`,
	"{\"inv\": \"\xff\xfe\", \"\xffk\": 1}",
	`{"dup": 1, "dup": 2, "x": {"dup": "a", "dup": "b"}}`,
	`{"nested": {"a": {"b": {"c": [1, {"d": null}]}}}, "list": [[], {}, "", false]}`,
	`{"big": 1e308, "huge": 1e309}`, `{"n": 123456789012345678901234567890}`, `{"tiny": 1e-400}`,
	`{"n": -}`, `{"n": 01}`, `{"n": 1.}`, `{"n": .5}`, `{"n": 1e}`, `{"n": +1}`, `{"n": 0x10}`, `{"n": NaN}`,
	`{"a": tru}`, `{"a": nul}`, `{"a": falsey}`, `{"a" 1}`, `{a: 1}`, `{"a": 1,}`, `{"a": 1`, `{"a": [1,]}`,
	`{"a": "x` + "\n" + `"}`, `{"a": "\x"}`, `{"a": "\u12"}`, `{"a": 1} x`, `{"a": 1}{}`, "\t{\"a\":\r\n1}\n",
	`{"` + strings.Repeat("k", 40) + `": 1}`,
	`{"a": ` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`,
	`{"a": ` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"a": ` + strings.Repeat(`{"b":`, 9999) + "1" + strings.Repeat("}", 9999) + `}`,
}

func TestArgsManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `": ` + strings.Repeat("1", i%5+1))
	}
	b.WriteString(`, "k": 7}`)
	checkAgainstEncodingJSON(t, []byte(b.String()))
	o := newArgs([]byte(b.String()), testAdapter).(*jsonObject)
	if v, _ := o.FindStringKey("k"); v != types.Double(7) {
		t.Errorf("the last duplicate should win: %v", v)
	}
}

func TestArgsNumbersFitDoubles(t *testing.T) {
	o := newArgs([]byte(`{"max": 1.7976931348623157e308, "min": 5e-324, "int": 9007199254740993}`), testAdapter).(*jsonObject)
	for k, want := range map[string]float64{"max": math.MaxFloat64, "min": 5e-324, "int": 9007199254740992} {
		if v, _ := o.FindStringKey(k); v != types.Double(want) {
			t.Errorf("%s = %v, want %v", k, v, want)
		}
	}
}

func FuzzArgsAgreeWithEncodingJSON(f *testing.F) {
	for _, raw := range argsCorpus {
		if len(raw) < 1000 {
			f.Add([]byte(raw))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkAgainstEncodingJSON(t, raw)
	})
}

// FuzzEvaluate feeds arbitrary argument text to rules that read it in every way; Evaluate must
// never panic, and a deny that cannot be evaluated must still apply.
func FuzzEvaluate(f *testing.F) {
	for _, raw := range argsCorpus {
		if len(raw) < 1000 {
			f.Add([]byte(raw))
		}
	}
	f.Add([]byte(`{"speed": 0.7, "target": "table", "list": [1, 2, 3], "pose": {"x": 1}}`))
	e, err := Compile(append([]Rule{
		{ID: "size", Effect: Allow, When: `size(args) > 0 && args.all(k, k != "")`},
		{ID: "eq", Effect: Allow, When: `args == {"a": 1.0} || args.pose == {"x": 1.0}`},
		{ID: "list", Effect: Allow, When: `args.list.exists(x, x == 2.0) && args.list[0] < 5.0`},
		{ID: "strings", Effect: RequireApproval, When: `args.target.startsWith("t") || args.target.matches("^[a-z]+$")`},
		{ID: "index", Effect: Allow, When: `args[args.key] == "v" || "k" in args`},
		{ID: "must-apply", Effect: Deny, When: `args.speed * 2 > 1 || args.speed > 0.5`},
	}, benchRules...), Options{Default: Allow})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := e.Evaluate(context.Background(), &Input{Tool: "robot__navigate_to", Server: "robot", Args: raw})
		if d.Effect != Deny {
			for _, m := range d.Matched {
				if m.RuleID == "must-apply" {
					t.Fatalf("must-apply matched but did not decide: %+v", d)
				}
			}
			for _, re := range d.Errors {
				if re.RuleID == "must-apply" {
					t.Fatalf("must-apply failed but did not apply: %+v", d)
				}
			}
		}
	})
}
