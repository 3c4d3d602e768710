package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// haltReloadConfig: robot is physical; {{robot}} and {{extra}} let a test rename it, make it
// non-physical or add a physical server.
const haltReloadConfig = `
gateway:
  listen: "{{listen}}"
  lockout_scope: server
servers:
  - name: {{robot}}
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl"]
{{physical}}
{{extra}}
`

func haltReloadYAML(t *testing.T, cfg, robot, physical, extra string) string {
	text := readFile(t, cfg+".tmpl")
	if physical == "true" {
		physical = "    physical: true\n    tools:\n      overrides:\n        stop: {stop: true}"
	} else {
		physical = "    physical: false"
	}
	return strings.NewReplacer("{{robot}}", robot, "{{physical}}", physical, "{{extra}}", extra).Replace(text)
}

// TestAConfigChangeNeverEndsAHalt: only an unlock ends a halt. A reload that would rename the
// halted server or make it non-physical is refused and the robot stays halted; a restart with
// such a config does not start; a physical server added while halted is halted too; after an
// unlock on the state file, the changed config starts.
func TestAConfigChangeNeverEndsAHalt(t *testing.T) {
	tmpl, addr := writeConfig(t, haltReloadConfig)
	cfg := tmpl
	if err := os.Rename(tmpl, tmpl+".tmpl"); err != nil {
		t.Fatal(err)
	}
	write := func(robot, physical, extra string) {
		t.Helper()
		if err := writeFile(cfg, haltReloadYAML(t, cfg, robot, physical, extra)); err != nil {
			t.Fatal(err)
		}
	}
	write("robot", "true", "")
	gw := startGateway(t, cfg, addr)
	cliOK(t, "halt", "--reason", "a person is in the cell", "--operator", "alice", "-c", cfg)
	cs := connectHTTP(t, addr, nil)

	hup := func(want string) {
		t.Helper()
		before := strings.Count(gw.stderr.String(), want)
		if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the reload's outcome in the log: "+want, func() bool {
			return strings.Count(gw.stderr.String(), want) > before
		})
	}
	for _, change := range []struct{ name, robot, physical string }{
		{"non-physical", "robot", "false"},
		{"renamed", "arm", "true"},
	} {
		write(change.robot, change.physical, "")
		hup("without an operator's unlock")
		assertHalted(t, cs, "alice")
	}

	// A physical server added while halted is halted too.
	write("robot", "true", `  - name: arm
    command: "`+simRobotBin+`"
    args: ["-name", "`+marker(t)+`-arm"]
    physical: true`)
	hup("are halted too")
	if res, env := call(t, cs, "arm__navigate_to", map[string]any{"target": "table"}); !res.IsError || !strings.Contains(mustJSON(env), "halted") {
		t.Errorf("a physical server added while halted moved: %s", mustJSON(res))
	}
	gw.stop(t)

	// A restart with the halted server renamed does not start, and says how to go on.
	write("cell", "true", "")
	_, errOut, code := cli(t, "serve", "-c", cfg)
	if code == 0 || !strings.Contains(errOut, "server robot is halted by alice") || !strings.Contains(errOut, "unlock robot") {
		t.Fatalf("serve with the halted server renamed: exit %d\n%s", code, errOut)
	}
	if rec, _ := os.ReadFile(cfgDir(cfg) + "/robot.jsonl"); strings.Contains(string(rec), `"navigate_to"`) {
		t.Errorf("the robot moved")
	}
	cliOK(t, "unlock", "robot", "--reason", "the cell is clear", "-c", cfg)
	cliOK(t, "unlock", "arm", "--reason", "the cell is clear", "-c", cfg)
	startGateway(t, cfg, addr)
}

// TestHaltSendsAQuarantinedStopTool: when the robot's tool descriptions changed since they were
// pinned, every tool is quarantined, its stop tool too, and models cannot call it; a halt still
// sends it, since the robot must stop whatever its description says.
func TestHaltSendsAQuarantinedStopTool(t *testing.T) {
	cfg, addr := writeHaltConfig(t, "1s", "100ms")
	gw := startGateway(t, cfg, addr)
	gw.stop(t)
	text := readFile(t, cfg)
	if err := writeFile(cfg, strings.Replace(text, `"-brake-time"`, `"-describe-suffix", "Now faster.", "-brake-time"`, 1)); err != nil {
		t.Fatal(err)
	}
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	if res, env := call(t, cs, "robot__stop", map[string]any{}); !res.IsError || env["kind"] != "tool_definition_changed" {
		t.Fatalf("the quarantined stop tool from a client: %s", mustJSON(res))
	}
	out, _ := cliOK(t, "halt", "--reason", "a person is in the cell", "-c", cfg)
	if !strings.Contains(out, "robot__stop") || !strings.Contains(out, ": ok") {
		t.Errorf("the halt's report:\n%s", out)
	}
	record := readFile(t, filepath.Join(cfgDir(cfg), "robot.jsonl"))
	if !strings.Contains(record, `"tool":"stop"`) {
		t.Errorf("the robot never got the halt's stop:\n%s", record)
	}
}

// TestHaltWithdrawsHeldCalls: a physical call waiting for an operator's approval when the robot
// is halted is withdrawn, saying so; approving it afterwards, even after the unlock, runs nothing.
func TestHaltWithdrawsHeldCalls(t *testing.T) {
	cfg, addr := writeHaltConfig(t, "1s", "100ms")
	text := readFile(t, cfg)
	if err := writeFile(cfg, text+`policies:
  rules:
    - {id: a-person-watches, effect: require_approval, when: 'tool == "robot__navigate_to"', reason: every drive}
approvals:
  use: console
  timeout: 1m
`); err != nil {
		t.Fatal(err)
	}
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	held := startCall(cs, "robot__navigate_to", map[string]any{"target": "table"})
	defer held.cancel()
	var list string
	waitFor(t, 10*time.Second, "the approval request", func() bool {
		list, _ = cliOK(t, "approvals", "list", "--json", "-c", cfg)
		return strings.Contains(list, "apr-")
	})
	id := list[strings.Index(list, "apr-"):]
	id = id[:strings.IndexAny(id, `"`)]

	cliOK(t, "halt", "--reason", "a person is in the cell", "--operator", "alice", "-c", cfg)
	if res, env := held.wait(t, "the held call"); !res.IsError || !strings.Contains(mustJSON(env), "alice halted the robot") {
		t.Errorf("the held call after the halt: %s", mustJSON(res))
	}
	all, _ := cliOK(t, "approvals", "list", "--state", "all", "--json", "-c", cfg)
	if !strings.Contains(all, "withdrawn") || !strings.Contains(all, "alice halted the robot") {
		t.Errorf("the request after the halt:\n%s", all)
	}
	cliOK(t, "unlock", "robot", "--reason", "the cell is clear", "-c", cfg)
	if _, errOut, code := cli(t, "approvals", "approve", id, "-c", cfg); code == 0 || !strings.Contains(errOut, "withdrawn") {
		t.Errorf("approving the withdrawn request after the unlock: exit %d %s", code, errOut)
	}
	time.Sleep(200 * time.Millisecond)
	if strings.Contains(readFile(t, filepath.Join(cfgDir(cfg), "robot.jsonl")), `"navigate_to"`) {
		t.Errorf("the held drive reached the robot")
	}
}

// TestUnlockSaysWhenTheServerIsLockedAgain: the halt's stop call hangs on the robot; the unlock
// restarts the server, which ends that call with an unknown outcome and locks the robot out
// again. unlock must say so, not that physical actions are allowed.
func TestUnlockSaysWhenTheServerIsLockedAgain(t *testing.T) {
	cfg, addr := writeHaltConfig(t, "1s", "100ms")
	text := readFile(t, cfg)
	if err := writeFile(cfg, strings.Replace(text, `"-brake-time"`, `"-hang-on", "stop", "-brake-time"`, 1)); err != nil {
		t.Fatal(err)
	}
	startGateway(t, cfg, addr)
	if _, errOut, code := cli(t, "halt", "--reason", "a person is in the cell", "-c", cfg); code != 1 {
		t.Fatalf("a halt whose stop tool hangs must exit 1: %d %s", code, errOut)
	}
	out, _, _ := cli(t, "unlock", "robot", "--reason", "checked", "-c", cfg)
	waitFor(t, 10*time.Second, "the robot locked out again", func() bool {
		return len(haltStatusJSON(t, cfg).Lockouts) == 1
	})
	if strings.Contains(out, "allowed again") || !strings.Contains(out, "locked out again") {
		t.Errorf("unlock says the robot may move and that it is still locked out:\n%s", out)
	}
}
