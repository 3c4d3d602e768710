package governor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestLogLevels: a refusal is logged at info with its kind and reason, a success or a tool's own
// failure at debug only; a logger above the level writes nothing; the server is named once the
// tool is resolved.
func TestLogLevels(t *testing.T) {
	for _, c := range []struct {
		name  string
		level slog.Level
		out   *Outcome
		want  map[string]any // nil: no line
	}{
		{"refusal at info", slog.LevelInfo, Refuse(KindInvalidArguments, "speed is above 2"),
			map[string]any{"level": "INFO", "outcome": string(KindInvalidArguments), "reason": "speed is above 2", "server": "arm"}},
		{"success at info", slog.LevelInfo, &Outcome{Success: true}, nil},
		{"success at debug", slog.LevelDebug, &Outcome{Success: true},
			map[string]any{"level": "DEBUG", "outcome": OutcomeOK, "server": "arm"}},
		{"tool failure at info", slog.LevelInfo, &Outcome{}, nil},
		{"tool failure at debug", slog.LevelDebug, &Outcome{},
			map[string]any{"level": "DEBUG", "outcome": OutcomeToolFailure, "server": "arm"}},
		{"refusal at warn", slog.LevelWarn, Refuse(KindInvalidArguments, "speed is above 2"), nil},
		{"refusal of an unknown tool", slog.LevelInfo, Refuse(KindUnknownTool, "no tool arm__fly"),
			map[string]any{"level": "INFO", "outcome": string(KindUnknownTool), "reason": "no tool arm__fly"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: c.level}))
			h := Log(logger)(HandlerFunc(func(context.Context, *Call) *Outcome { return c.out }))
			call := &Call{ID: "c1", Name: "arm__move", Tool: &Tool{Server: "arm"}, Start: time.Now()}
			if c.out.Kind == KindUnknownTool {
				call.Tool = nil // refused before it was resolved
			}
			h.Handle(context.Background(), call)
			if c.want == nil {
				if buf.Len() != 0 {
					t.Fatalf("logged %s", buf.String())
				}
				return
			}
			var line map[string]any
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %q", err, buf.String())
			}
			for k, v := range c.want {
				if line[k] != v {
					t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, buf.String())
				}
			}
			if line["call"] != "c1" || line["tool"] != "arm__move" || line["msg"] != "tool call" {
				t.Errorf("line %s", buf.String())
			}
			if _, has := line["reason"]; has != (c.out.Kind != "") {
				t.Errorf("reason present %v, for outcome kind %q", has, c.out.Kind)
			}
			if _, has := line["server"]; has != (call.Tool != nil) {
				t.Errorf("server present %v, for a call resolved %v", has, call.Tool != nil)
			}
		})
	}
}
