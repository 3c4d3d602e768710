package e2e

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	limitPlannerToken = "e2e-limit-planner-token-3b7d90c1e2"
	limitHelperToken  = "e2e-limit-helper-token-a04f6e28d5"
)

// limitsConfig fronts a physical robot and a camera that is not physical, both simulated and
// recording their calls, for two principals; {{limits}} and {{policies}} are the test's own.
const limitsConfig = `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl"]
    physical: true
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam", "-record", "{{dir}}/cam.jsonl"]
auth:
  tokens:
    - {principal: planner, roles: [agent], token_env: E2E_LIMIT_PLANNER_TOKEN}
    - {principal: helper, roles: [agent], token_env: E2E_LIMIT_HELPER_TOKEN}
{{limits}}
{{policies}}
`

// limitsGateway writes limitsConfig with limits and policies, starts the gateway and returns
// the config's path and the gateway.
func limitsGateway(t *testing.T, limits, policies string) (string, *gatewayProc) {
	t.Helper()
	t.Setenv("E2E_LIMIT_PLANNER_TOKEN", limitPlannerToken)
	t.Setenv("E2E_LIMIT_HELPER_TOKEN", limitHelperToken)
	yaml := strings.NewReplacer("{{limits}}", limits, "{{policies}}", policies).Replace(limitsConfig)
	cfg, addr := writeConfig(t, yaml)
	return cfg, startGateway(t, cfg, addr)
}

// callsOf counts the calls of tool in a simulated robot's -record file (0 when the file
// is not there: nothing reached that robot yet).
func callsOf(t *testing.T, path, tool string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec struct{ Tool string }
		if line != "" && json.Unmarshal([]byte(line), &rec) == nil && rec.Tool == tool {
			n++
		}
	}
	return n
}

// refusal is the failure envelope of a call, read from the result's text as a model reads it.
type refusal struct {
	Success       *bool    `json:"success"`
	Kind          string   `json:"kind"`
	Reason        string   `json:"reason"`
	Limit         string   `json:"limit"`
	Window        string   `json:"window"`
	RetryAfterSec *float64 `json:"retry_after_sec"`
}

// wantRateLimited fails the test unless res is a rate_limited refusal by limit in window, with
// a whole retry_after_sec in [minRetry, maxRetry] and a reason that names the limit and tells to
// wait; it returns the refusal.
func wantRateLimited(t *testing.T, what string, res *mcp.CallToolResult, limit, window string, minRetry, maxRetry float64) refusal {
	t.Helper()
	var r refusal
	if err := json.Unmarshal([]byte(textOf(res)), &r); err != nil {
		t.Fatalf("%s: the result's text is not a JSON envelope (%v): %s", what, err, mustJSON(res))
	}
	if !res.IsError || r.Success == nil || *r.Success || r.Kind != "rate_limited" || r.Limit != limit || r.Window != window {
		t.Fatalf("%s: want a rate_limited refusal by limit %s in window %s, got %s", what, limit, window, textOf(res))
	}
	if r.RetryAfterSec == nil || *r.RetryAfterSec != math.Trunc(*r.RetryAfterSec) || *r.RetryAfterSec < minRetry || *r.RetryAfterSec > maxRetry {
		t.Fatalf("%s: retry_after_sec must be whole seconds in [%v, %v]: %s", what, minRetry, maxRetry, textOf(res))
	}
	if !strings.Contains(r.Reason, limit) || !strings.Contains(strings.ToLower(r.Reason), "wait") {
		t.Fatalf("%s: the reason must name limit %s and tell the model to wait: %q", what, limit, r.Reason)
	}
	return r
}

// wantSuccess fails the test unless the call of tool succeeded.
func wantSuccess(t *testing.T, what string, cs *mcp.ClientSession, tool string, args map[string]any) {
	t.Helper()
	if res, env := call(t, cs, tool, args); res.IsError || env["success"] != true {
		t.Fatalf("%s: %s answered %s", what, tool, textOf(res))
	}
}

// metricValue is the sample of name with labels in the gateway's /metrics, -1 when there is none.
func metricValue(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	v, ok := scrape(t, addr).value(name, labels...)
	if !ok {
		return -1
	}
	return v
}

func TestPhysicalRateLimitPerPrincipal(t *testing.T) {
	cfg, gw := limitsGateway(t, `
limits:
  - id: arm-moves
    match: {roles: [agent]}
    per: principal
    rate: "5/m"
    burst: 5
    physical_only: true
`, "")
	robot := filepath.Join(cfgDir(cfg), "robot.jsonl")
	cam := filepath.Join(cfgDir(cfg), "cam.jsonl")
	planner := connectHTTPAs(t, gw.addr, limitPlannerToken, nil)
	helper := connectHTTPAs(t, gw.addr, limitHelperToken, nil)

	for i := 0; i < 5; i++ {
		wantSuccess(t, "the planner's physical call within the limit", planner, "robot__navigate_to", map[string]any{"target": "table"})
	}
	res, _ := call(t, planner, "robot__navigate_to", map[string]any{"target": "counter"})
	wantRateLimited(t, "the planner's sixth physical call in a minute", res, "arm-moves", "1m", 1, 60)
	// Retrying at once is refused the same way.
	res, _ = call(t, planner, "robot__navigate_to", map[string]any{"target": "counter"})
	wantRateLimited(t, "the planner's seventh physical call in a minute", res, "arm-moves", "1m", 1, 60)
	if n := callsOf(t, robot, "navigate_to"); n != 5 || strings.Contains(readFile(t, robot), "counter") {
		t.Fatalf("the robot saw %d navigate_to calls, want the 5 allowed ones and no refused one:\n%s", n, readFile(t, robot))
	}

	// Reads of the camera, which is not physical, are not counted by a physical_only limit.
	for i := 0; i < 7; i++ {
		wantSuccess(t, "the planner's read while its physical calls are refused", planner, "cam__get_scene", nil)
	}
	if n := callsOf(t, cam, "get_scene"); n != 7 {
		t.Fatalf("the camera saw %d get_scene calls, want 7", n)
	}
	// Nor are reads of the physical robot itself: get_scene is annotated read-only, it moves
	// nothing, so it is not a physical action.
	for i := 0; i < 3; i++ {
		wantSuccess(t, "the planner's read of the robot while its physical calls are refused", planner, "robot__get_scene", nil)
	}
	if n := callsOf(t, robot, "get_scene"); n != 3 {
		t.Fatalf("the robot saw %d get_scene calls, want 3", n)
	}

	// The other principal has its own five.
	for i := 0; i < 5; i++ {
		wantSuccess(t, "the helper's physical call while the planner is limited", helper, "robot__navigate_to", map[string]any{"target": "shelf"})
	}
	res, _ = call(t, helper, "robot__navigate_to", map[string]any{"target": "home"})
	wantRateLimited(t, "the helper's sixth physical call in a minute", res, "arm-moves", "1m", 1, 60)
	if n := callsOf(t, robot, "navigate_to"); n != 10 {
		t.Fatalf("the robot saw %d navigate_to calls, want 10", n)
	}

	if v := metricValue(t, gw.addr, "mcp_gateway_rate_limited_total", "limit=arm-moves", "mode=enforce"); v != 3 {
		t.Errorf(`mcp_gateway_rate_limited_total{limit="arm-moves",mode="enforce"} = %v, want 3`, v)
	}
	var refused []string
	for _, r := range auditJSONL(t, "-c", cfg) {
		if r.Kind == "rate_limited" {
			refused = append(refused, r.Principal+":"+r.Tool)
		}
	}
	if strings.Join(refused, ",") != "planner:robot__navigate_to,planner:robot__navigate_to,helper:robot__navigate_to" {
		t.Errorf("audit records of kind rate_limited: %v", refused)
	}
}

func TestConcurrentLimitOnANonPhysicalServer(t *testing.T) {
	cfg, gw := limitsGateway(t, `
limits:
  - id: one-at-a-time
    match: {servers: [cam]}
    per: server
    concurrent: 1
`, "")
	cam := filepath.Join(cfgDir(cfg), "cam.jsonl")
	planner := connectHTTPAs(t, gw.addr, limitPlannerToken, nil)
	helper := connectHTTPAs(t, gw.addr, limitHelperToken, nil)
	inFlight := func() float64 {
		return metricValue(t, gw.addr, "mcp_gateway_limit_in_flight", "limit=one-at-a-time")
	}

	var wg sync.WaitGroup
	var slow *mcp.CallToolResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		slow, _ = call(t, planner, "cam__wait", map[string]any{"timeout_sec": 3})
	}()
	waitFor(t, 10*time.Second, "the slow call to hold the concurrent slot", func() bool { return inFlight() == 1 })

	res, _ := call(t, helper, "cam__get_scene", nil)
	wantRateLimited(t, "a second call to cam while one is in flight", res, "one-at-a-time", "concurrent", 1, 60)
	if n := callsOf(t, cam, "get_scene"); n != 0 {
		t.Fatalf("the refused call reached the camera (%d get_scene calls)", n)
	}
	// The robot is not matched by the limit.
	wantSuccess(t, "a call to the robot while cam is busy", helper, "robot__get_scene", nil)

	wg.Wait()
	if slow.IsError {
		t.Fatalf("the slow call: %s", textOf(slow))
	}
	waitFor(t, 5*time.Second, "the slot to be released", func() bool { return inFlight() == 0 })
	wantSuccess(t, "a call to cam once the slow one returned", helper, "cam__get_scene", nil)
	if v := metricValue(t, gw.addr, "mcp_gateway_rate_limited_total", "limit=one-at-a-time", "mode=enforce"); v != 1 {
		t.Errorf(`mcp_gateway_rate_limited_total{limit="one-at-a-time",mode="enforce"} = %v, want 1`, v)
	}
}

func TestLogOnlyLimitRefusesNothingAndCounts(t *testing.T) {
	cfg, gw := limitsGateway(t, `
limits:
  - id: shadow-cap
    per: global
    rate: "2/m"
    burst: 2
    mode: log_only
`, "")
	planner := connectHTTPAs(t, gw.addr, limitPlannerToken, nil)
	for i := 0; i < 5; i++ {
		wantSuccess(t, "a call under a log_only limit", planner, "robot__navigate_to", map[string]any{"target": "table"})
	}
	if n := callsOf(t, filepath.Join(cfgDir(cfg), "robot.jsonl"), "navigate_to"); n != 5 {
		t.Fatalf("the robot saw %d navigate_to calls, want all 5", n)
	}
	if v := metricValue(t, gw.addr, "mcp_gateway_rate_limited_total", "limit=shadow-cap", "mode=log_only"); v != 3 {
		t.Errorf(`mcp_gateway_rate_limited_total{limit="shadow-cap",mode="log_only"} = %v, want 3 (the calls past the burst of 2)`, v)
	}
	if v := metricValue(t, gw.addr, "mcp_gateway_rate_limited_total", "limit=shadow-cap", "mode=enforce"); v > 0 {
		t.Errorf(`mcp_gateway_rate_limited_total{limit="shadow-cap",mode="enforce"} = %v, want none`, v)
	}
	for _, r := range auditJSONL(t, "-c", cfg) {
		if r.Kind == "rate_limited" {
			t.Errorf("a log_only limit refused a call: %+v", r)
		}
	}
}

func TestRuleOnRateHoldsTheEleventhPhysicalCall(t *testing.T) {
	cfg, gw := limitsGateway(t, "", `
policies:
  default: allow
  rules:
    - id: busy-arm
      effect: require_approval
      when: 'rate.server.physical_1m >= 10'
      reason: the arm moved ten times this minute; a person looks at the cell first
approvals:
  use: memory
  timeout: 60s
`)
	robot := filepath.Join(cfgDir(cfg), "robot.jsonl")
	planner := connectHTTPAs(t, gw.addr, limitPlannerToken, nil)
	for i := 0; i < 10; i++ {
		wantSuccess(t, "one of the first ten physical calls", planner, "robot__navigate_to", map[string]any{"target": "table"})
	}
	// Reads of a server that is not physical stay out of the robot's count.
	wantSuccess(t, "a read of the camera", planner, "cam__get_scene", nil)

	var wg sync.WaitGroup
	var res *mcp.CallToolResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, _ = call(t, planner, "robot__navigate_to", map[string]any{"target": "counter"})
	}()
	id := pendingApproval(t, cfg)
	if n := callsOf(t, robot, "navigate_to"); n != 10 || strings.Contains(readFile(t, robot), "counter") {
		t.Fatalf("the held eleventh call reached the robot (%d navigate_to calls)", n)
	}
	cliOK(t, "approvals", "approve", id, "-c", cfg, "--operator", "alice", "--reason", "the cell is clear")
	wg.Wait()
	if res.IsError {
		t.Fatalf("the approved eleventh call: %s", textOf(res))
	}
	if n := callsOf(t, robot, "navigate_to"); n != 11 || !strings.Contains(readFile(t, robot), "counter") {
		t.Fatalf("the approved call did not reach the robot (%d navigate_to calls)", n)
	}
	if v := metricValue(t, gw.addr, "mcp_gateway_policy_decisions_total", "rule=busy-arm", "effect=require_approval"); v != 1 {
		t.Errorf(`mcp_gateway_policy_decisions_total{rule="busy-arm",effect="require_approval"} = %v, want 1`, v)
	}
}

// reloadLimit is a global limit of three physical calls a minute; burst is what a reload changes.
const reloadLimit = `
limits:
  - id: cell-cap
    per: global
    rate: "3/m"
    burst: {{burst}}
    physical_only: true
`

func TestReloadKeepsLimitCounters(t *testing.T) {
	cfg, gw := limitsGateway(t, strings.ReplaceAll(reloadLimit, "{{burst}}", "3"), "")
	planner := connectHTTPAs(t, gw.addr, limitPlannerToken, nil)
	for i := 0; i < 3; i++ {
		wantSuccess(t, "a call within the limit", planner, "robot__navigate_to", map[string]any{"target": "table"})
	}
	res, _ := call(t, planner, "robot__navigate_to", map[string]any{"target": "table"})
	wantRateLimited(t, "the fourth call before the reload", res, "cell-cap", "1m", 1, 60)

	reloads := 0
	reload := func() {
		t.Helper()
		reloads++
		if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 15*time.Second, "the gateway to log the reload", func() bool {
			return len(lines(gw.stderr.String(), "config reloaded")) >= reloads
		})
	}

	// The same config again: the limit is unchanged and keeps its counters.
	reload()
	res, _ = call(t, planner, "robot__navigate_to", map[string]any{"target": "table"})
	wantRateLimited(t, "the first call after reloading the same config", res, "cell-cap", "1m", 1, 60)

	// A changed burst applies at once: the bucket holds at least one call more.
	yaml := readFile(t, cfg)
	if err := writeFile(cfg, strings.Replace(yaml, "burst: 3", "burst: 4", 1)); err != nil {
		t.Fatal(err)
	}
	reload()
	wantSuccess(t, "the first call after raising the burst", planner, "robot__navigate_to", map[string]any{"target": "table"})

	// Counters do not survive a restart.
	if err := writeFile(cfg, yaml); err != nil {
		t.Fatal(err)
	}
	gw.stop(t)
	gw = startGateway(t, cfg, gw.addr)
	planner = connectHTTPAs(t, gw.addr, limitPlannerToken, nil)
	for i := 0; i < 3; i++ {
		wantSuccess(t, "a call after a restart", planner, "robot__navigate_to", map[string]any{"target": "table"})
	}
	res, _ = call(t, planner, "robot__navigate_to", map[string]any{"target": "table"})
	wantRateLimited(t, "the fourth call after the restart", res, "cell-cap", "1m", 1, 60)
}

func TestSessionLimitRefillsWithinItsWindow(t *testing.T) {
	_, gw := limitsGateway(t, `
limits:
  - id: per-session
    match: {tools: ["cam__*"]}
    per: session
    rate: "1/s"
    burst: 2
`, "")
	// MCP 2025-11-25 has sessions (2026-07-28 has none).
	first := connectHTTPAsAt(t, gw.addr, limitPlannerToken, nil, "2025-11-25")
	second := connectHTTPAsAt(t, gw.addr, limitPlannerToken, nil, "2025-11-25")
	if first.ID() == "" || first.ID() == second.ID() {
		t.Fatalf("session ids %q and %q: want two sessions", first.ID(), second.ID())
	}
	for i := 0; i < 2; i++ {
		wantSuccess(t, "a call of the first session within the burst", first, "cam__get_scene", nil)
	}
	res, _ := call(t, first, "cam__get_scene", nil)
	wantRateLimited(t, "the first session's third call in a second", res, "per-session", "1s", 1, 1)
	// The same principal on another session has its own bucket; the robot is not matched.
	for i := 0; i < 2; i++ {
		wantSuccess(t, "a call of the second session", second, "cam__get_scene", nil)
	}
	wantSuccess(t, "a call to the robot on the limited session", first, "robot__get_scene", nil)
	// One call a second: a second later the bucket holds one again.
	time.Sleep(1100 * time.Millisecond)
	wantSuccess(t, "the first session's call a second later", first, "cam__get_scene", nil)
}
