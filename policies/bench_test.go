package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchArgs is a navigate-style argument object of about 1 KB: a target, a speed, a pose and a
// list of waypoints, as a robot tool takes them.
func benchArgs(tb testing.TB) json.RawMessage {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"target": "table", "speed": 0.3, "frame": "map", "timeout_sec": 30,`)
	b.WriteString(`"pose": {"x": 1.25, "y": -0.5, "theta": 0.0}, "waypoints": [`)
	for i := range 12 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"x": %d.25, "y": %d.5, "z": 0.1, "frame": "map"}`, i, i)
	}
	b.WriteString(`], "note": "` + strings.Repeat("move carefully ", 18) + `", "tags": ["a", "b", "c"]}`)
	raw := json.RawMessage(b.String())
	if !json.Valid(raw) || len(raw) < 1000 || len(raw) > 1100 {
		tb.Fatalf("bench args: %d bytes, valid %v", len(raw), json.Valid(raw))
	}
	return raw
}

// benchRules is ten rules of the kinds a robot policy has: read-only allowances, role checks,
// argument limits, labels, state and globs.
var benchRules = []Rule{
	{ID: "read-only", Effect: Allow, When: `tool_meta.annotations[?"readOnlyHint"].orValue(false) == true`},
	{ID: "planner-no-actuation", Effect: Deny, When: `"planner" in principal.roles && tool_meta.physical`},
	{ID: "speed-cap", Effect: Deny, When: `server == "robot" && args[?"speed"].orValue(0.0) > 0.5`},
	{ID: "workspace", Effect: Deny, When: `upstream_tool == "navigate_to" && !(args.target in ["home", "table", "counter", "shelf", "drawer"])`},
	{ID: "long-wait", Effect: RequireApproval, When: `upstream_tool == "wait" && args[?"timeout_sec"].orValue(0.0) > 60.0`},
	{ID: "destructive", Effect: RequireApproval, When: `tool_meta.annotations[?"destructiveHint"].orValue(false) == true`},
	{ID: "untrusted-physical", Effect: RequireApproval, When: `labels.untrusted && tool_meta.physical`},
	{ID: "pose-bounds", Effect: Deny, When: `has(args.pose) && (args.pose.x > 5.0 || args.pose.x < -5.0)`},
	{ID: "robot-tools", Effect: Allow, When: `glob("robot__*", tool) && session.calls < 1000 && !state.locked`},
	{ID: "shadow-speed", Effect: Deny, When: `args[?"speed"].orValue(0.0) > 0.25`, Mode: LogOnly},
}

func benchInput(tb testing.TB) *Input {
	return &Input{
		Tool: "robot__navigate_to", Server: "robot", UpstreamTool: "navigate_to",
		Args:      benchArgs(tb),
		Principal: Principal{ID: "agent", Roles: []string{"agent"}},
		Session:   Session{ID: "s1", Calls: 12},
		ToolMeta: ToolMeta{Physical: true, Evaluated: true,
			Annotations: map[string]any{"destructiveHint": false, "idempotentHint": true}},
		Labels: map[string]bool{"private": true},
	}
}

// BenchmarkEvaluate10Rules measures one policy decision: ten rules over a 1 KB argument object,
// the arguments indexed once. It reports the median (p50-µs) and p99 of the individual
// decisions, which the SPEC bounds at 10 µs p50.
func BenchmarkEvaluate10Rules(b *testing.B) {
	e, err := Compile(benchRules, Options{})
	if err != nil {
		b.Fatal(err)
	}
	in := benchInput(b)
	ctx := context.Background()
	if d := e.Evaluate(ctx, in); d.Effect != Allow || d.RuleID != "robot-tools" || len(d.Errors) > 0 || len(d.Shadow) != 1 {
		b.Fatalf("unexpected decision %+v", d)
	}
	durations := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		e.Evaluate(ctx, in)
		if len(durations) < cap(durations) {
			durations = append(durations, time.Since(start))
		}
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(durations[len(durations)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkArgsIndex measures reading the arguments for rules: indexing 1 KB and decoding one
// value, against decoding the whole object with encoding/json.
func BenchmarkArgsIndex(b *testing.B) {
	raw := benchArgs(b)
	e, err := Compile(nil, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := newArgs(raw, e.adapter).(*jsonObject)
			if _, ok := o.FindStringKey("speed"); !ok {
				b.Fatal("no speed")
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
