package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// logOnlyConfig: the secrets guard on arguments only records what it would do; cam's drives wait
// for an operator.
const logOnlyConfig = `
gateway:
  listen: "{{listen}}"
servers:
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
policies:
  rules:
    - {id: cam-hold, effect: require_approval, when: 'tool == "cam__navigate_to"', reason: a person watches}
guardrails:
  tool_call:
    - {id: secrets-in-arguments, use: secrets.scan, mode: log_only}
approvals:
  use: console
  timeout: 1m
`

// TestLogOnlySecretsAreNeverWrittenDown: a log_only secrets guard lets the arguments through
// unchanged, but the key and the password it flags are in no audit record, approval request,
// console line, CLI output, log line or byte of the state file.
func TestLogOnlySecretsAreNeverWrittenDown(t *testing.T) {
	const key, password = "AKIA2E0A8F3B244C9987", "hunter4PLANTED"
	cfg, addr := writeConfig(t, logOnlyConfig)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	target := "table " + key + " password=" + password

	// A call that runs: the robot gets the arguments unchanged (log_only changes nothing).
	res, _ := call(t, cs, "cam__pick_object", map[string]any{"object": target})
	if !strings.Contains(mustJSON(res), "table") {
		t.Fatalf("pick_object: %s", mustJSON(res))
	}
	// A call held for approval, then denied.
	held := startCall(cs, "cam__navigate_to", map[string]any{"target": target})
	defer held.cancel()
	var list string
	waitFor(t, 10*time.Second, "the approval request", func() bool {
		list, _ = cliOK(t, "approvals", "list", "--json", "-c", cfg)
		return strings.Contains(list, "apr-")
	})
	id := list[strings.Index(list, "apr-"):]
	id = id[:strings.IndexAny(id, `"`)]
	cliOK(t, "approvals", "deny", id, "--reason", "not now", "-c", cfg)
	held.wait(t, "the denied call")

	audit, _ := cliOK(t, "audit", "--jsonl", "-c", cfg)
	outputs := map[string]string{"approvals list": list, "audit": audit}
	gw.stop(t)
	outputs["gateway log"] = gw.stderr.String()
	state, err := os.ReadFile(filepath.Join(cfgDir(cfg), ".mcp-gateway", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	outputs["state file"] = string(state)
	if !strings.Contains(audit, "secrets-in-arguments") {
		t.Errorf("the audit does not record the log_only finding:\n%s", audit)
	}
	for where, text := range outputs {
		for _, secret := range []string{key, password} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s holds the planted secret %s", where, secret)
			}
		}
	}
}
