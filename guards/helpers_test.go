package guards

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// specsFromYAML reads a list of guard entries the way the configuration loader does: shared
// keys into the Spec, everything else into Settings.
func specsFromYAML(t testing.TB, file, src string) []Spec {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	list := resolve(&doc)
	if list.Kind != yaml.SequenceNode {
		t.Fatalf("want a list of guards, got kind %v", list.Kind)
	}
	var specs []Spec
	for _, item := range list.Content {
		sp := Spec{File: file, Line: item.Line}
		rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: item.Line, Column: item.Column}
		for i := 0; i+1 < len(item.Content); i += 2 {
			k, v := item.Content[i], item.Content[i+1]
			switch k.Value {
			case "id":
				sp.ID = v.Value
			case "use":
				sp.Use = v.Value
			case "action":
				sp.Action = Action(v.Value)
			case "mode":
				sp.Mode = v.Value
			case "fail_mode":
				sp.FailMode = v.Value
			case "parallel":
				sp.Parallel = v.Value == "true"
			case "enabled":
				b := v.Value == "true"
				sp.Enabled = &b
			case "timeout":
				d, err := time.ParseDuration(v.Value)
				if err != nil {
					t.Fatalf("timeout: %v", err)
				}
				sp.Timeout = d
			case "where":
				var w struct{ Servers, Tools []string }
				if err := v.Decode(&w); err != nil {
					t.Fatalf("where: %v", err)
				}
				sp.Servers, sp.Tools = w.Servers, w.Tools
			default:
				rest.Content = append(rest.Content, k, v)
			}
		}
		if len(rest.Content) > 0 {
			sp.Settings = rest
		}
		specs = append(specs, sp)
	}
	return specs
}

// build builds a set from YAML entries and fails the test on an error.
func build(t testing.TB, stage Stage, src string) *Set {
	t.Helper()
	set, err := Build(stage, specsFromYAML(t, "guards.yaml", src))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return set
}

// newGuard builds one guard from its settings written as YAML ("" for none).
func newGuard(t testing.TB, use, settings string) Guard {
	t.Helper()
	var node *yaml.Node
	if settings != "" {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(settings), &doc); err != nil {
			t.Fatalf("yaml: %v", err)
		}
		node = resolve(&doc)
	}
	g, err := registry[use](node)
	if err != nil {
		t.Fatalf("%s: %v", use, err)
	}
	return g
}

// found is a span as tests write it: the category and the text it covers.
type found struct {
	Category, Text string
}

func spansOf(t testing.TB, g Guard, text string) []found {
	t.Helper()
	spans, err := g.Scan(context.Background(), text)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	checkSpans(t, text, spans)
	var out []found
	for _, s := range spans {
		out = append(out, found{s.Category, text[s.Start:s.End]})
	}
	return out
}

// checkSpans asserts the Scan contract: in range, sorted, not overlapping.
func checkSpans(t testing.TB, text string, spans []Span) {
	t.Helper()
	end := 0
	for _, s := range spans {
		if s.Start < end || s.Start >= s.End || s.End > len(text) {
			t.Fatalf("bad span %+v (previous end %d, text length %d)", s, end, len(text))
		}
		end = s.End
	}
}

func equalFound(a, b []found) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func f(category, text string) found { return found{category, text} }

// assertNoLeak fails if s contains any of the secrets.
func assertNoLeak(t testing.TB, what, s string, secrets ...string) {
	t.Helper()
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			t.Errorf("%s leaks %q: %s", what, sec, s)
		}
	}
}
