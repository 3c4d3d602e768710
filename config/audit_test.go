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
