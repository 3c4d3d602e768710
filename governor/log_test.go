package governor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// TestLogLevels: a refusal is logged at info with its kind and reason, a success at debug only;
// with the logger above debug a success writes nothing.
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
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: c.level}))
			h := Log(logger)(HandlerFunc(func(context.Context, *Call) *Outcome { return c.out }))
			h.Handle(context.Background(), &Call{ID: "c1", Name: "arm__move", Tool: &Tool{Server: "arm"}, Start: time.Now()})
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
		})
	}
}
