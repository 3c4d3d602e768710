package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stopToolsConfig has two physical servers under a global lockout: arm's calls time out after
// 1s, which locks robot out too. On robot, the simulated robot's stop tool is the stop tool; get_scene stays callable while locked, and allow_while_locked on
// pick_object, which is not read-only, is refused when the gateway lists it. The rule asks an
// operator for stop, which a stop tool ignores.
const stopToolsConfig = `
gateway:
  listen: "{{listen}}"
  lockout_scope: global
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl"]
    physical: true
    queue_size: 4
    tools:
      overrides:
        stop: {stop: true}
        get_scene: {allow_while_locked: true}
        pick_object: {allow_while_locked: true}
  - name: arm
    command: "{{sim}}"
    args: ["-name", "{{marker}}-arm"]
    physical: true
    call_timeout_sec: 1
policies:
  rules:
    - id: drawer-needs-a-person
      effect: require_approval
      when: 'upstream_tool in ["stop", "place_object"]'
      reason: "a person must watch the drawer"
`

// asyncCall is a tool call running in the background.
type asyncCall struct {
	done   chan struct{}
	res    *mcp.CallToolResult
	err    error
	cancel context.CancelFunc
}

func startCall(cs *mcp.ClientSession, name string, args any) *asyncCall {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	a := &asyncCall{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(a.done)
		a.res, a.err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	}()
	return a
}

func (a *asyncCall) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// wait waits for the call's result and returns its envelope.
func (a *asyncCall) wait(t *testing.T, what string) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not return", what)
	}
	if a.err != nil {
		t.Fatalf("%s: %v", what, a.err)
	}
	env, _ := a.res.StructuredContent.(map[string]any)
	return a.res, env
}

// lastRecordLine is the robot's last -record line.
func lastRecordLine(t *testing.T, path string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(readFile(t, path)), "\n")
	return lines[len(lines)-1]
}

// recordedTools is the tools the robot recorded, in order.
func recordedTools(t *testing.T, path string) []string {
	t.Helper()
	var tools []string
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, path)), "\n") {
		if _, rest, ok := strings.Cut(line, `"tool":"`); ok {
			tool, _, _ := strings.Cut(rest, `"`)
			tools = append(tools, tool)
		}
	}
	return tools
}

func TestStopAndInspectionToolsWhileLockedOut(t *testing.T) {
	cfg, addr := writeConfig(t, stopToolsConfig)
	record := filepath.Join(cfgDir(cfg), "robot.jsonl")
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	// The stop tool is listed like any tool: models and clients can call it.
	if tools := toolNames(t, cs); tools["robot__stop"] == nil || tools["robot__get_scene"] == nil {
		t.Fatalf("the stop and inspection tools must be listed: %v", tools)
	}
	if !strings.Contains(gw.stderr.String(), "tools.overrides.pick_object.allow_while_locked is refused") {
		t.Errorf("the gateway does not refuse allow_while_locked on pick_object, which is not read-only:\n%s", gw.stderr.String())
	}
	if res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "drawer"}); res.IsError || env["success"] != true {
		t.Fatalf("navigate_to drawer: %s", mustJSON(res))
	}

	// A long wait runs on robot and another call waits for its turn behind it.
	long := startCall(cs, "robot__wait", map[string]any{"timeout_sec": 30})
	defer long.cancel()
	waitFor(t, 10*time.Second, "the robot runs the wait", func() bool {
		tools := recordedTools(t, record)
		return len(tools) > 0 && tools[len(tools)-1] == "wait"
	})
	queued := startCall(cs, "robot__navigate_to", map[string]any{"target": "table"})
	defer queued.cancel()

	// arm times out: with lockout_scope global, robot is locked out too.
	if res, env := call(t, cs, "arm__fault", map[string]any{"mode": "hang"}); !res.IsError || env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("arm's hang must lock out: %s", mustJSON(res))
	}
	if st := statusJSON(t, cfg); len(st.Lockouts) != 1 || st.Lockouts[0].Server != "arm" {
		t.Fatalf("status must show arm's lockout: %+v", st)
	}

	// The stop tool answers while robot is locked out and the wait still runs: it did not wait
	// for its turn, nor for the operator its rule asks for. The robot is the witness: its record
	// of the stop says the wait was running when the stop arrived.
	start := time.Now()
	res, env := call(t, cs, "robot__stop", map[string]any{})
	took := time.Since(start)
	if res.IsError || env["success"] != true {
		t.Fatalf("the stop tool while locked out: %s", mustJSON(res))
	}
	if took > 5*time.Second {
		t.Fatalf("the stop tool took %s: it must jump the queue", took)
	}
	if got := strings.Join(recordedTools(t, record), ","); !strings.HasSuffix(got, "navigate_to,wait,stop") {
		t.Errorf("the robot's calls: %s; want the stop tool's right after the wait, the queued call not yet", got)
	}
	if line := lastRecordLine(t, record); !strings.Contains(line, `"interrupted":[{"tool":"wait","state":"running"}]`) {
		t.Errorf("the robot's record of the stop: %s; want it to have interrupted the running wait", line)
	}

	// The stop ended the wait at once; the queued call's turn comes and it is refused, never sent.
	if res, env := long.wait(t, "the stopped wait"); !res.IsError || !strings.Contains(mustJSON(env), "stopped") {
		t.Errorf("the wait after the stop: %s", mustJSON(res))
	}
	if res, env := queued.wait(t, "the queued call"); !res.IsError || env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(env["reason"].(string), "locked out") {
		t.Errorf("the queued call after the lockout: %s", mustJSON(res))
	}
	if got := recordedTools(t, record); got[len(got)-1] != "stop" {
		t.Errorf("the queued call reached the robot while it was locked out: %v", got)
	}

	// Inspection while locked: get_scene answers; everything else is refused, pick_object
	// included, whose allow_while_locked was refused.
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true || env["scene"] == nil {
		t.Errorf("get_scene while locked out: %s", mustJSON(res))
	}
	for name, args := range map[string]any{
		"robot__pick_object": map[string]any{"object": "spoon"},
		"robot__navigate_to": map[string]any{"target": "home"},
	} {
		res, env := call(t, cs, name, args)
		if !res.IsError || env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(env["reason"].(string), "mcp-gateway unlock arm") {
			t.Errorf("%s while locked out: %s", name, mustJSON(res))
		}
	}

	// Audited as every call: the stop call with the rule it ignored and the lockout it passed.
	recs := auditJSONL(t, "-c", cfg)
	stop := findRecord(recs, func(r auditRecord) bool { return r.Type == "call" && r.Tool == "robot__stop" })
	switch {
	case stop == nil:
		t.Fatalf("no audit record of the stop call:\n%s", mustJSON(recs))
	case stop.Outcome != "ok" || stop.Decision != "ignored_require_approval:drawer-needs-a-person" || stop.Detail["while_locked"] != "arm":
		t.Errorf("the stop call's audit record: %+v", *stop)
	}
	scene := findRecord(recs, func(r auditRecord) bool { return r.Tool == "robot__get_scene" && r.Detail["while_locked"] == "arm" })
	if scene == nil || scene.Outcome != "ok" {
		t.Errorf("no audit record of get_scene during the lockout: %+v", scene)
	}
	if !strings.Contains(gw.stderr.String(), "policy decision ignored") {
		t.Errorf("the ignored require_approval is not logged:\n%s", gw.stderr.String())
	}
	if out, _ := cliOK(t, "approvals", "list", "-c", cfg); strings.Contains(out, "robot__stop") {
		t.Errorf("the stop tool was held for approval:\n%s", out)
	}
}
