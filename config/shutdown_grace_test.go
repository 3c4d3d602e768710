package config

import (
	"testing"
	"time"
)

func TestShutdownGrace(t *testing.T) {
	const servers = "servers:\n  - name: arm\n    command: ./arm\n"
	for _, tc := range []struct {
		name, gateway string
		want          time.Duration
	}{
		{"default", "", DefaultShutdownGrace},
		{"given", "gateway:\n  shutdown_grace: 5s\n", 5 * time.Second},
		{"zero cancels at once", "gateway:\n  shutdown_grace: 0s\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("robot.yaml", []byte(tc.gateway+servers))
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(cfg.Gateway.ShutdownGrace); got != tc.want {
				t.Errorf("shutdown_grace = %s, want %s", got, tc.want)
			}
		})
	}
	errs := parseErrors(t, "gateway:\n  shutdown_grace: -1s\n"+servers)
	assertReported(t, errs, []want{{2, "gateway.shutdown_grace: must not be negative"}})
	errs = parseErrors(t, "gateway:\n  shutdown_grace: soon\n"+servers)
	assertReported(t, errs, []want{{2, "gateway.shutdown_grace"}})
}
