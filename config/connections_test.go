package config

import (
	"testing"
	"time"
)

func TestConnectionLimits(t *testing.T) {
	const servers = "servers:\n  - name: arm\n    command: ./arm\n"
	for _, tc := range []struct {
		name, gateway string
		timeout       time.Duration
		conns         int
	}{
		{"defaults", "", DefaultBodyReadTimeout, DefaultMaxConnections},
		{"given", "gateway:\n  body_read_timeout: 2s\n  max_connections: 20\n", 2 * time.Second, 20},
		{"smallest cap", "gateway:\n  max_connections: 4\n", DefaultBodyReadTimeout, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("robot.yaml", []byte(tc.gateway+servers))
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(cfg.Gateway.BodyReadTimeout); got != tc.timeout {
				t.Errorf("body_read_timeout = %s, want %s", got, tc.timeout)
			}
			if got := cfg.Gateway.MaxConnections; got != tc.conns {
				t.Errorf("max_connections = %d, want %d", got, tc.conns)
			}
		})
	}
	errs := parseErrors(t, "gateway:\n  body_read_timeout: 0s\n  max_connections: 3\n"+servers)
	assertReported(t, errs, []want{
		{2, "gateway.body_read_timeout: must be positive"},
		{3, "gateway.max_connections: must be at least 4, got 3"},
	})
	errs = parseErrors(t, "gateway:\n  body_read_timeout: -1s\n"+servers)
	assertReported(t, errs, []want{{2, "gateway.body_read_timeout: must be positive"}})
	errs = parseErrors(t, "gateway:\n  body_read_timeout: slow\n  max_connections: many\n"+servers)
	assertReported(t, errs, []want{{2, "gateway.body_read_timeout"}, {3, "gateway.max_connections"}})
}
