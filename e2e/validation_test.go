package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInvalidArgumentsNeverReachTheServer(t *testing.T) {
	files := t.TempDir()
	robotCalls := filepath.Join(files, "robot-calls.jsonl")
	schemaCalls := filepath.Join(files, "schema-calls.jsonl")
	looseCalls := filepath.Join(files, "loose-calls.jsonl")
	refFile := filepath.Join(files, "pose.schema.json")
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-record", "`+robotCalls+`"]
    physical: true`+
		schemaServer(t, "schema", schemaCalls, refFile, "")+
		schemaServer(t, "loose", looseCalls, refFile, "    tools: {include: [poisoned], on_invalid_schema: unvalidated}\n"))
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	tests := []struct {
		name, tool string
		args       map[string]any
		want       []string // every problem, with its path
	}{
		{"missing required", "robot__navigate_to", map[string]any{},
			[]string{`1 problem: (arguments): missing required property "target"`}},
		{"wrong type", "robot__navigate_to", map[string]any{"target": 5},
			[]string{"1 problem: /target: must be string but is number"}},
		{"empty string", "robot__pick_object", map[string]any{"object": ""},
			[]string{"/object: must be at least 1 characters long but is 0"}},
		{"enum", "robot__fault", map[string]any{"mode": "explode"},
			[]string{`/mode: must be one of "hang", "crash"`, `but is "explode"`}},
		{"additionalProperties", "robot__place_object", map[string]any{"object": "red_cup", "target": "table", "force": 2},
			[]string{`(arguments): property "force" is not allowed (allowed: object, target)`}},
		{"number range", "robot__wait", map[string]any{"timeout_sec": 0},
			[]string{"/timeout_sec: must be > 0 but is 0"}},
		{"everything at once", "schema__move", map[string]any{
			"target":    "Table 1!",
			"speed":     "fast",
			"mode":      "sprint",
			"waypoints": []any{map[string]any{"x": 1, "y": 2}, map[string]any{"x": "3", "y": 4}, map[string]any{"x": 5}, map[string]any{"x": 6, "y": 7, "z": 8}},
			"colour":    "red",
		}, []string{
			"8 problems: ",
			`(arguments): missing required property "frame"`,
			`(arguments): property "colour" is not allowed`,
			`/mode: must be one of "fast", "careful" but is "sprint"`,
			"/speed: must be number but is string",
			"/target: does not match pattern ^[a-z_]+$",
			"/waypoints/1/x: must be number but is string",
			`/waypoints/2: missing required property "y"`,
			`/waypoints/3: property "z" is not allowed`,
			"Fix all of them and call schema__move again.",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, env := call(t, cs, tt.tool, tt.args)
			if !res.IsError || env["success"] != false || env["kind"] != "invalid_tool_arguments" || len(res.Content) != 1 {
				t.Fatalf("want one invalid_tool_arguments envelope, got %s", mustJSON(res))
			}
			reason := env["reason"].(string)
			for _, w := range tt.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason lacks %q:\n%s", w, reason)
				}
			}
		})
	}
	// None of them reached an upstream.
	for _, f := range []string{robotCalls, schemaCalls} {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			t.Errorf("a refused call reached the server (%s):\n%s", filepath.Base(f), b)
		}
	}
	// Valid calls do reach them, so the records above would have shown a leak.
	if res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "table"}); res.IsError || env["success"] != true {
		t.Fatalf("a valid call: %s", mustJSON(res))
	}
	valid := map[string]any{"target": "table", "frame": "map", "mode": "careful", "speed": 0.5, "waypoints": []any{map[string]any{"x": 1, "y": 2}}}
	if res, env := call(t, cs, "schema__move", valid); res.IsError || env["success"] != true {
		t.Fatalf("a valid move: %s", mustJSON(res))
	}
	if calls := strings.Count(readFile(t, robotCalls), "\n"); calls != 1 || !strings.Contains(readFile(t, robotCalls), `"navigate_to"`) {
		t.Errorf("robot calls:\n%s", readFile(t, robotCalls))
	}
	if calls := strings.Count(readFile(t, schemaCalls), "\n"); calls != 1 || !strings.Contains(readFile(t, schemaCalls), `"move"`) {
		t.Errorf("schema server calls:\n%s", readFile(t, schemaCalls))
	}

	// A schema that "$ref"s a local file does not compile (the file is never read): the tool is
	// left out and the log says why, unless the server is configured to serve it unvalidated.
	tools := toolNames(t, cs)
	if tools["schema__move"] == nil || tools["schema__poisoned"] != nil || tools["loose__poisoned"] == nil {
		t.Fatalf("catalog: schema__move and loose__poisoned listed, schema__poisoned left out; got %v", keys(tools))
	}
	if res, env := call(t, cs, "schema__poisoned", map[string]any{"pose": map[string]any{"x": 1}}); !res.IsError || env["kind"] != "unknown_tool" {
		t.Errorf("the left-out tool must be unknown: %s", mustJSON(res))
	}
	log := gw.stderr.String()
	left := lines(log, "tool=poisoned")
	if !containsAll(left, "server=schema", "is left out", "file://"+refFile, "never followed") {
		t.Errorf("the log does not say why schema's poisoned tool is left out:\n%s", strings.Join(left, "\n"))
	}
	if !containsAll(left, "server=loose", "WITHOUT argument validation") {
		t.Errorf("the log does not warn that loose's poisoned tool is served unvalidated:\n%s", strings.Join(left, "\n"))
	}
	if res, env := call(t, cs, "loose__poisoned", map[string]any{"pose": "anything"}); res.IsError || env["success"] != true {
		t.Errorf("an unvalidated tool is served as it is: %s", mustJSON(res))
	}
	if !strings.Contains(readFile(t, looseCalls), `"poisoned"`) {
		t.Errorf("the unvalidated call did not reach its server")
	}
}

// containsAll reports whether one of lines contains every one of subs.
func containsAll(lines []string, subs ...string) bool {
	for _, l := range lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
