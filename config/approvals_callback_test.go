package config

import "testing"

// approvals.use takes callback, the channel of programs that embed the gateway, and keeps the
// line of use for the messages of those that cannot serve it (gateway.New without a callback,
// check).
func TestApprovalsUseCallback(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(approvalsServers+"approvals:\n  use: callback\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Approvals.Use != "callback" || cfg.Approvals.UseLine != 5 {
		t.Errorf("approvals = %+v, want use callback on line 5", cfg.Approvals)
	}
	assertReported(t, parseErrors(t, approvalsServers+"approvals:\n  use: calback\n"), []want{{5, `approvals.use: "calback" is not valid (did you mean "callback"?)`}})
	if cfg, err := Parse("robot.yaml", []byte(approvalsServers)); err != nil || cfg.Approvals.Use != "console" || cfg.Approvals.UseLine != 0 {
		t.Errorf("without approvals: %+v, %v", cfg.Approvals, err)
	}
}
