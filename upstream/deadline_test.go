package upstream

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestDeadline(t *testing.T) {
	arm := config.Server{CallTimeoutSec: 300, TimeoutArgumentMarginSec: 60}
	tests := []struct {
		name string
		cfg  config.Server
		args string
		want time.Duration
	}{
		{"no arguments", arm, ``, 300 * time.Second},
		{"no timeout_sec", arm, `{"speed": 1.2}`, 300 * time.Second},
		{"short timeout keeps call_timeout_sec", arm, `{"timeout_sec": 30}`, 300 * time.Second},
		{"long timeout adds the margin", arm, `{"timeout_sec": 600}`, 660 * time.Second},
		{"fractional", arm, `{"timeout_sec": 250.5}`, 310500 * time.Millisecond},
		{"exponent", arm, `{"timeout_sec": 1e3}`, 1060 * time.Second},
		{"string is not a number", arm, `{"timeout_sec": "600"}`, 300 * time.Second},
		{"zero", arm, `{"timeout_sec": 0}`, 300 * time.Second},
		{"negative", arm, `{"timeout_sec": -600}`, 300 * time.Second},
		{"overflowing number", arm, `{"timeout_sec": 1e400}`, 300 * time.Second},
		{"null", arm, `{"timeout_sec": null}`, 300 * time.Second},
		{"bool", arm, `{"timeout_sec": true}`, 300 * time.Second},
		{"nested object does not count", arm, `{"plan": {"timeout_sec": 600}}`, 300 * time.Second},
		{"key is exact", arm, `{"Timeout_Sec": 600}`, 300 * time.Second},
		{"array", arm, `[{"timeout_sec": 600}]`, 300 * time.Second},
		{"invalid JSON", arm, `{"timeout_sec": 600`, 300 * time.Second},
		{"huge saturates", arm, `{"timeout_sec": 1e300}`, math.MaxInt64},
		{"defaults when unset", config.Server{}, `{"timeout_sec": 600}`, 600 * time.Second},
		{"default call timeout", config.Server{}, `{}`, 300 * time.Second},
		{"zero margin", config.Server{CallTimeoutSec: 10}, `{"timeout_sec": 20}`, 20 * time.Second},
		{"negative margin counts as zero", config.Server{CallTimeoutSec: 10, TimeoutArgumentMarginSec: -5}, `{"timeout_sec": 20}`, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Deadline(tt.cfg, json.RawMessage(tt.args)); got != tt.want {
				t.Errorf("Deadline(%s) = %s, want %s", tt.args, got, tt.want)
			}
		})
	}
}

func BenchmarkDeadline(b *testing.B) {
	cfg := config.Server{CallTimeoutSec: 300, TimeoutArgumentMarginSec: 60}
	for _, bc := range []struct{ name, args string }{
		{"without", `{"object": "cup", "speed": 0.5, "grip": {"force": 12}}`},
		{"with", `{"object": "cup", "speed": 0.5, "timeout_sec": 600}`},
	} {
		args := json.RawMessage(bc.args)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Deadline(cfg, args)
			}
		})
	}
}
