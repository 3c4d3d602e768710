package e2e

import (
	"strings"
	"testing"
	"time"
)

func TestCheckRefusesAStopToolOnAServerThatIsNotPhysical(t *testing.T) {
	cfg, _ := writeConfig(t, `
servers:
  - name: robot
    command: "{{sim}}"
    physical: true
  - name: cam
    command: "{{sim}}"
    tools:
      overrides:
        get_scene:
          stop: true
`)
	out, errOut, code := cli(t, "check", "-c", cfg)
	want := cfg + ":11: servers[1] (cam): tools.overrides.get_scene.stop: only a physical server (physical: true) has a stop tool"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("check: exit %d, want 1 with %q:\n%s%s", code, want, out, errOut)
	}
}

// checkConfig marks pick_object, which sim-robot does not annotate read-only, allow_while_locked.
const checkConfig = `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    tools:
      overrides:
        open_drawer: {stop: true}
        get_scene: {allow_while_locked: true}
        pick_object:
          allow_while_locked: true
`

// check verifies allow_while_locked against the annotations the gateway has seen, and never
// starts a server to learn them.
func TestCheckVerifiesAllowWhileLockedAgainstWhatTheGatewaySaw(t *testing.T) {
	cfg, addr := writeConfig(t, checkConfig)
	m := marker(t)
	const pickLine = ":13: servers[0] (robot): tools.overrides.pick_object.allow_while_locked"

	// Before any gateway ran, nothing is known: check passes and says so.
	out, errOut, code := cli(t, "check", "-c", cfg)
	if code != 0 || !strings.Contains(errOut, cfg+pickLine+": note: cannot be verified yet") ||
		!strings.Contains(out, "1 stop tool, 2 inspection tools") || !strings.Contains(out, "stop tools (always callable, sent beside the call in flight): robot__open_drawer") {
		t.Fatalf("check before the first start: exit %d\n%s%s", code, out, errOut)
	}
	if pids := processesWith(m); len(pids) != 0 {
		t.Fatalf("check started a server: pids %v", pids)
	}

	// The running gateway tells what the robot listed.
	gw := startGateway(t, cfg, addr)
	out, errOut, code = cli(t, "check", "-c", cfg)
	if code != 1 || !strings.Contains(errOut, cfg+pickLine+": tool pick_object of server robot is not read-only: the running gateway lists it with readOnlyHint false") {
		t.Fatalf("check through the running gateway: exit %d, want 1 naming %s:\n%s%s", code, pickLine, out, errOut)
	}
	if strings.Contains(errOut, "get_scene") {
		t.Errorf("check refused get_scene, which is read-only:\n%s", errOut)
	}
	if n := len(processesWith(m + "-robot")); n != 1 {
		t.Errorf("%d robot processes while the gateway runs, want its one", n)
	}

	// Stopped, the pins in the state file tell the same.
	gw.stop(t)
	waitNoProcesses(t, m, 10*time.Second)
	out, errOut, code = cli(t, "check", "-c", cfg)
	if code != 1 || !strings.Contains(errOut, cfg+pickLine+": tool pick_object of server robot is not read-only: the state file") {
		t.Fatalf("check on the state file: exit %d, want 1 naming %s:\n%s%s", code, pickLine, out, errOut)
	}
	if pids := processesWith(m); len(pids) != 0 {
		t.Errorf("check started a server: pids %v", pids)
	}

	// Without the override on pick_object, check passes and names both exempt tools.
	fixed := strings.Replace(readFile(t, cfg), "        pick_object:\n          allow_while_locked: true\n", "", 1)
	if err := writeFile(cfg, fixed); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = cli(t, "check", "-c", cfg)
	if code != 0 || !strings.Contains(out, "1 stop tool, 1 inspection tool") ||
		!strings.Contains(out, "inspection tools (allow_while_locked, callable during a lockout): robot__get_scene\n") {
		t.Errorf("check of the fixed file: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCheckWarnsOfACommandThatCannotRun: check names the line of a command that is not on PATH
// or not executable, and still passes (it may be installed before the gateway starts); serve
// --require-all refuses at once, naming it, instead of retrying it for the startup timeout.
func TestCheckWarnsOfACommandThatCannotRun(t *testing.T) {
	cfg, _ := writeConfig(t, `
servers:
  - name: robot
    command: "{{sim}}"
  - name: arm
    command: no-such-robot-driver
  - name: cam
    command: ./missing/cam-driver
    startup_timeout_sec: 60
`)
	out, errOut, code := cli(t, "check", "-c", cfg)
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("check must pass with warnings: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`:6: servers[1] (arm): warning: command "no-such-robot-driver" cannot be found on PATH`,
		`:8: servers[2] (cam): warning: command`, "does not exist",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check's warnings lack %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "(robot)") {
		t.Errorf("check warns of a command that exists:\n%s", errOut)
	}
	start := time.Now()
	_, errOut, code = cli(t, "serve", "-c", cfg, "--require-all", "--listen", "127.0.0.1:0")
	if took := time.Since(start); code == 0 || took > 10*time.Second || !strings.Contains(errOut, "no-such-robot-driver") || !strings.Contains(errOut, ":8: server cam") {
		t.Errorf("serve --require-all with missing commands: exit %d after %s\n%s", code, took, errOut)
	}
}
