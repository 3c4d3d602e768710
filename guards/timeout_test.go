package guards

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// The guards that only poll their context (pollingGuard) keep their entry's timeout, read off
// the clock instead of a timer of its own: past it, the check fails with the same error and
// fail mode as a guard stopped by a context.WithTimeout; a caller's cancellation still stops
// them; within it they find what they find.
func TestPollingGuardsKeepTheirTimeout(t *testing.T) {
	for _, use := range []string{"pii.regex", "secrets.scan", "injection.heuristic", "size.limit", "topic.deny", "regex.deny"} {
		t.Run(use, func(t *testing.T) {
			g := newGuard(t, use, map[string]string{"size.limit": "max_bytes: 1000000", "topic.deny": "topics: {weapons: [firearm]}", "regex.deny": "patterns: [forbidden]"}[use])
			if _, ok := g.(pollingGuard); !ok {
				t.Fatalf("%s is not a pollingGuard", use)
			}
			settings := map[string]string{"size.limit": ", max_bytes: 1000000", "topic.deny": ", topics: {weapons: [firearm]}", "regex.deny": ", patterns: [forbidden]"}[use]
			doc := json.RawMessage(`{"a":"one","b":"two","c":["three","four"]}`)

			tight := build(t, StageToolCall, "- {id: g, use: "+use+settings+", timeout: 1ns}")
			res, _ := tight.CheckJSON(context.Background(), "s", "t", doc)
			if !res.Blocked || len(res.Errors) != 1 || res.Errors[0].Err != "timed out after 1ns" {
				t.Errorf("past its timeout: %+v, want blocked by the error %q", res, "timed out after 1ns")
			}
			open := build(t, StageToolCall, "- {id: g, use: "+use+settings+", timeout: 1ns, fail_mode: open}")
			if res, _ := open.CheckJSON(context.Background(), "s", "t", doc); res.Blocked || len(res.Errors) != 1 {
				t.Errorf("past its timeout, failing open: %+v", res)
			}

			ample := build(t, StageToolCall, "- {id: g, use: "+use+settings+", timeout: 1m}")
			if res, _ := ample.CheckJSON(context.Background(), "s", "t", doc); res.Blocked || len(res.Errors) != 0 {
				t.Errorf("within its timeout: %+v", res)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if res, _ := ample.CheckJSON(ctx, "s", "t", doc); !res.Blocked || len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0].Err, "stopped: ") {
				t.Errorf("the caller gone: %+v", res)
			}
		})
	}
}
