package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// pastableConfig locks the robot out when its fault tool hangs, and holds navigate_to for an
// operator's approval, announced on the console.
const pastableConfig = `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
    call_timeout_sec: 1
policies:
  rules:
    - id: a-person-watches
      effect: require_approval
      when: tool == "robot__navigate_to"
      reason: a person watches every drive
approvals:
  use: console
  timeout: 1m
`

// TestPrintedCommandsRunAsPrinted: the gateway is started from its config's directory with a
// relative -c; the commands it prints for a person (the unlock in a lockout reason, the answer in
// an approval line) name the binary and the absolute config, and run as printed from anywhere.
func TestPrintedCommandsRunAsPrinted(t *testing.T) {
	cfg, addr := writeConfig(t, pastableConfig)
	cmd := exec.Command(gatewayBin, "serve", "-c", filepath.Base(cfg))
	cmd.Dir = filepath.Dir(cfg)
	p := &gatewayProc{cmd: cmd, addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	p.waitReady(t, 30*time.Second)
	cs := connectHTTP(t, addr, nil)

	// paste runs a printed command through a shell, from a directory unrelated to the config.
	paste := func(line string) string {
		t.Helper()
		if !strings.Contains(line, gatewayBin) || !strings.Contains(line, "-c "+cfg) {
			t.Errorf("the printed command %q does not name the binary %s and the config %s", line, gatewayBin, cfg)
		}
		sh := exec.Command("sh", "-c", line)
		sh.Dir = t.TempDir()
		sh.Env = append(sh.Environ(), "MCP_GATEWAY_ADMIN_TOKEN=")
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("%s, as printed: %v\n%s", line, err, out)
		}
		return string(out)
	}
	quoted := regexp.MustCompile("`([^`]*)`")

	// An approval line on the console: its approve command answers the held call.
	held := startCall(cs, "robot__navigate_to", map[string]any{"target": "table"})
	defer held.cancel()
	var approve string
	waitFor(t, 10*time.Second, "the approval line on the console", func() bool {
		for _, m := range quoted.FindAllStringSubmatch(p.stderr.String(), -1) {
			if strings.Contains(m[1], " approvals approve apr-") {
				approve = m[1]
				return true
			}
		}
		return false
	})
	paste(approve)
	if res, env := held.wait(t, "the approved call"); res.IsError || env["success"] != true {
		t.Fatalf("the call approved with the printed command: %s", mustJSON(res))
	}

	// A lockout reason: its unlock command resets the lockout.
	res, env := call(t, cs, "robot__fault", map[string]any{"mode": "hang"})
	if !res.IsError || env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("the hang must lock out: %s", mustJSON(res))
	}
	var unlock string
	for _, m := range quoted.FindAllStringSubmatch(env["reason"].(string), -1) {
		if strings.Contains(m[1], " unlock robot ") {
			unlock = m[1]
		}
	}
	if unlock == "" {
		t.Fatalf("the lockout reason names no unlock command: %s", env["reason"])
	}
	if out := paste(unlock); !strings.Contains(out, "lockout cleared") {
		t.Errorf("the printed unlock: %s", out)
	}
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Errorf("after the printed unlock: %s", mustJSON(res))
	}
}
