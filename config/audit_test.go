package config

import (
	"testing"
	"time"
)

func TestAuditStorageBounds(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(authServers))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.Audit.CommitTimeout) != DefaultCommitTimeout || cfg.Audit.MinFreeBytes != DefaultMinFreeBytes {
		t.Errorf("defaults: commit_timeout %v, min_free_bytes %d", time.Duration(cfg.Audit.CommitTimeout), cfg.Audit.MinFreeBytes)
	}
	cfg, err = Parse("robot.yaml", []byte("audit:\n  commit_timeout: 2s\n  min_free_bytes: 0\n"+authServers))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.Audit.CommitTimeout) != 2*time.Second || cfg.Audit.MinFreeBytes != 0 {
		t.Errorf("explicit: commit_timeout %v, min_free_bytes %d (0 turns the check off)", time.Duration(cfg.Audit.CommitTimeout), cfg.Audit.MinFreeBytes)
	}
	errs := parseErrors(t, "audit:\n  commit_timeout: 10ms\n  min_free_bytes: -1\n"+authServers)
	assertReported(t, errs, []want{
		{2, `audit.commit_timeout: must be from 100ms to 1m, got 10ms`},
		{3, `audit.min_free_bytes: must not be negative; write 0 to turn the free-space check off`},
	})
}

func TestAuditBounds(t *testing.T) {
	const servers = "servers:\n  - name: arm\n    command: ./arm\n"
	for _, tc := range []struct {
		name, audit string
		value       int
		bytes       int64
		age         time.Duration
	}{
		{"defaults", "", DefaultAuditMaxValueBytes, DefaultAuditMaxBytes, 0},
		{"empty section", "audit: {}\n", DefaultAuditMaxValueBytes, DefaultAuditMaxBytes, 0},
		{"given", "audit:\n  max_value_bytes: 1024\n  retention: {max_age: 720h, max_bytes: 1048576}\n", 1024, 1 << 20, 720 * time.Hour},
		{"unbounded", "audit:\n  retention: {max_age: 0s, max_bytes: 0}\n", DefaultAuditMaxValueBytes, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("robot.yaml", []byte(tc.audit+servers))
			if err != nil {
				t.Fatal(err)
			}
			a := cfg.Audit
			if a.MaxValueBytes != tc.value || a.Retention.MaxBytes != tc.bytes || time.Duration(a.Retention.MaxAge) != tc.age {
				t.Errorf("audit = max_value_bytes %d, max_bytes %d, max_age %s; want %d, %d, %s",
					a.MaxValueBytes, a.Retention.MaxBytes, time.Duration(a.Retention.MaxAge), tc.value, tc.bytes, tc.age)
			}
			if len(a.RedactKeys) == 0 {
				t.Error("the default redact_keys are lost when the audit section sets only its bounds")
			}
		})
	}
	for _, tc := range []struct{ audit, want string }{
		{"audit:\n  max_value_bytes: 10\n", "audit.max_value_bytes: must be at least 256 bytes"},
		{"audit:\n  retention:\n    max_bytes: 100\n", "audit.retention.max_bytes: must be 0 (keep any amount) or at least 65536"},
		{"audit:\n  retention:\n    max_age: -1h\n", "audit.retention.max_age: must not be negative"},
		{"audit:\n  retention:\n    max_age: 5s\n", "audit.retention.max_age: is 5s; keep at least a minute"},
	} {
		errs := parseErrors(t, tc.audit+servers)
		line := 2
		if tc.audit[len("audit:\n  "):][:9] == "retention" {
			line = 3
		}
		assertReported(t, errs, []want{{line, tc.want}})
	}
}
