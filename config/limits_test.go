package config

import (
	"testing"
	"time"
)

func TestLimitsSection(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(telemetryServers+`limits:
  - id: arm-moves
    match:
      principals: ["planner*"]
      roles: [agent]
      servers: [robot]
      tools: ["robot__*"]
    per: principal
    rate: 5/m
    physical_only: true
  - id: one-at-a-time
    concurrent: 1
    per: server
    mode: log_only
  - id: burst
    rate: 30/s
    burst: 60
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Limits) != 3 {
		t.Fatalf("limits: %+v", cfg.Limits)
	}
	a, b, c := cfg.Limits[0], cfg.Limits[1], cfg.Limits[2]
	if a.ID != "arm-moves" || a.Per != PerPrincipal || a.Count != 5 || a.Window != time.Minute || a.Burst != 5 ||
		!a.PhysicalOnly || a.Mode != LimitEnforce || a.Line != 5 || a.Match.Tools[0] != "robot__*" {
		t.Errorf("arm-moves: %+v", a)
	}
	if b.Per != PerServer || b.Concurrent != 1 || b.Count != 0 || b.Mode != LimitLogOnly {
		t.Errorf("one-at-a-time: %+v", b)
	}
	if c.Per != PerGlobal || c.Count != 30 || c.Window != time.Second || c.Burst != 60 {
		t.Errorf("burst: %+v", c)
	}
}

func TestLimitsProblems(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want []want
	}{
		{"  - rate: 5/m\n", []want{{5, "limits[0]: id is missing"}}},
		{"  - id: a b\n    rate: 5/m\n", []want{{5, `id "a b" is not valid`}}},
		{"  - id: a\n    rate: 5/m\n  - id: a\n    rate: 1/s\n", []want{{7, `duplicate limit id "a"; the limit at line 5`}}},
		{"  - id: a\n    per: user\n    rate: 5/m\n", []want{{6, `limits[0] (a): per: "user" is not valid`}}},
		{"  - id: a\n    mode: shadow\n    rate: 5/m\n", []want{{6, `limits[0] (a): mode: "shadow" is not valid`}}},
		{"  - id: a\n    rate: 5/min\n", []want{{6, `limits[0] (a): rate: "5/min" is not a rate`}}},
		{"  - id: a\n    rate: 0/m\n", []want{{6, "the number of calls must be from 1"}}},
		{"  - id: a\n    rate: 5/m\n    burst: 0\n", []want{{7, "limits[0] (a): burst: must be at least 1, got 0"}}},
		{"  - id: a\n    concurrent: 1\n    burst: 3\n", []want{{7, "burst: is only for a rate"}}},
		{"  - id: a\n    concurrent: -1\n", []want{{6, "concurrent: must not be negative"}}},
		{"  - id: a\n    per: session\n", []want{{5, "limits[0] (a): limits nothing"}}},
		{"  - id: a\n    rate: 5/m\n    match:\n      tools: [\"robot__[\"]\n", []want{{8, `limits[0] (a): match.tools[0]: "robot__[" is not a valid glob`}}},
		{"  - id: a\n    rate: 5/m\n    match:\n      roles: [\"\"]\n", []want{{8, "match.roles[0]: is empty"}}},
		{"  - id: a\n    rate: 5/m\n    per_key: x\n", []want{{7, "per_key"}}},
	} {
		errs := parseErrors(t, telemetryServers+"limits:\n"+c.yaml)
		assertReported(t, errs, c.want)
	}
}

func TestParseRate(t *testing.T) {
	for s, want := range map[string]time.Duration{"5/s": time.Second, "30/m": time.Minute, "1000/h": time.Hour} {
		if _, w, err := ParseRate(s); err != nil || w != want {
			t.Errorf("ParseRate(%q) = %v, %v", s, w, err)
		}
	}
	for _, s := range []string{"", "5", "5/d", "-1/s", "0/s", "x/m"} {
		if _, _, err := ParseRate(s); err == nil {
			t.Errorf("ParseRate(%q) succeeded", s)
		}
	}
}
