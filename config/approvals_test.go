package config

import (
	"testing"
	"time"
)

const approvalsServers = `servers:
  - name: robot
    command: sim-robot
`

func TestWebhookTimeoutDefaultsAndRange(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(approvalsServers+"approvals:\n  use: webhook\n  webhook:\n    url: https://hooks.example.com/approve\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(cfg.Approvals.Webhook.Timeout); got != DefaultWebhookTimeout {
		t.Errorf("default approvals.webhook.timeout = %s, want %s", got, DefaultWebhookTimeout)
	}
	cfg, err = Parse("robot.yaml", []byte(approvalsServers+"approvals:\n  use: webhook\n  webhook:\n    url: https://hooks.example.com/approve\n    timeout: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(cfg.Approvals.Webhook.Timeout); got != 2*time.Second {
		t.Errorf("approvals.webhook.timeout = %s, want 2s", got)
	}

	for _, c := range []struct{ value, text string }{
		{"0s", "is 0s; it must be a positive duration of at most a minute"},
		{"-1s", "is -1s; it must be a positive duration"},
		{"2m", "is 2m0s; it must be a positive duration of at most a minute"},
	} {
		src := approvalsServers + "approvals:\n  use: webhook\n  webhook:\n    url: https://hooks.example.com/approve\n    timeout: " + c.value + "\n"
		assertReported(t, parseErrors(t, src), []want{{8, "approvals.webhook.timeout: " + c.text}})
	}
	assertReported(t, parseErrors(t, approvalsServers+"approvals:\n  webhook:\n    timeout: soon\n"), []want{{6, "approvals.webhook.timeout"}})
}
