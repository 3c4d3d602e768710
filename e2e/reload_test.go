package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reloadConfig fronts two simulated robots, each named on its command line so that its process
// can be found; {{rules}} and {{cam_args}} are what the test changes between reloads.
const reloadConfig = `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"{{cam_args}}]
policies:
  default: allow
  rules:
{{rules}}
`

const (
	keepOut = `    - {id: keep-out, effect: deny, when: 'tool == "robot__drive"', reason: no such tool}`
	noDrive = `    - {id: no-driving, effect: deny, when: 'upstream_tool == "navigate_to"', reason: the cell is being serviced}`
	broken  = `    - {id: broken, effect: deny, when: 'upstream_tool == ', reason: half a rule}`
)

// rewriteConfig writes reloadConfig with rules and the cam's extra arguments over cfg.
func rewriteConfig(t *testing.T, cfg, addr, rules, camArgs string) {
	t.Helper()
	text := strings.NewReplacer("{{listen}}", addr, "{{sim}}", simRobotBin, "{{marker}}", marker(t),
		"{{rules}}", rules, "{{cam_args}}", camArgs).Replace(reloadConfig)
	if err := writeFile(cfg, text); err != nil {
		t.Fatal(err)
	}
}

// driveUntil calls robot__navigate_to on cs until the outcome's kind is want ("" = success).
func driveUntil(t *testing.T, cs *mcp.ClientSession, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "table"})
		kind, _ := env["kind"].(string)
		if kind == want && (want != "" || env["success"] == true) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("navigate_to still answers %s, want kind %q", mustJSON(res), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReloadKeepsTheSessionAndRefusesABrokenConfig(t *testing.T) {
	cfg, addr := writeConfig(t, "{}")
	rewriteConfig(t, cfg, addr, keepOut, "")
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	robotPID, camPID := livePIDs(t, marker(t)+"-robot"), livePIDs(t, marker(t)+"-cam")
	if len(robotPID) != 1 || len(camPID) != 1 {
		t.Fatalf("robot processes %v, cam processes %v", robotPID, camPID)
	}
	driveUntil(t, cs, "")

	// A stricter policy applies to the next call of the same session.
	rewriteConfig(t, cfg, addr, keepOut+"\n"+noDrive, "")
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	driveUntil(t, cs, "policy_denied")
	if _, env := call(t, cs, "robot__get_scene", nil); env["success"] != true {
		t.Fatalf("get_scene after the reload: %v", env)
	}

	// A broken config is refused, logged with its error, and the stricter policy stays.
	rewriteConfig(t, cfg, addr, noDrive+"\n"+broken, "")
	if err := gw.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(lines(gw.stderr.String(), "config reload refused")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal in the gateway's log:\n%s", gw.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	refusal := strings.Join(lines(gw.stderr.String(), "config reload refused"), "\n")
	if !strings.Contains(refusal, "broken") || !strings.Contains(refusal, "Syntax error") {
		t.Fatalf("the refusal does not name the rule and its error: %s", refusal)
	}
	driveUntil(t, cs, "policy_denied")
	if code, err := httpGet("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("healthz after the refusal: %d %v", code, err)
	}

	// The API refuses the broken file too, with its problems; fixed, and with the cam's
	// arguments changed, it is applied: only the cam restarts.
	token := strings.TrimSpace(readFile(t, filepath.Join(cfgDir(cfg), ".mcp-gateway", "admin.token")))
	if code, body := postReload(t, addr, token); code != http.StatusBadRequest || !strings.Contains(body, "broken") {
		t.Fatalf("POST /admin/reload with a broken config: %d %s", code, body)
	}
	if code, _ := postReload(t, addr, "not-the-token"); code != http.StatusUnauthorized {
		t.Fatalf("POST /admin/reload with a wrong token: %d", code)
	}
	rewriteConfig(t, cfg, addr, noDrive, `, "-name", "other"`)
	code, body := postReload(t, addr, token)
	var rep struct{ Restarted, Started, Stopped []string }
	if err := json.Unmarshal([]byte(body), &rep); code != http.StatusOK || err != nil {
		t.Fatalf("POST /admin/reload: %d %s", code, body)
	}
	if !slices.Equal(rep.Restarted, []string{"cam"}) || len(rep.Started)+len(rep.Stopped) != 0 {
		t.Fatalf("report: %s", body)
	}
	if now := livePIDs(t, marker(t)+"-robot"); !slices.Equal(now, robotPID) {
		t.Fatalf("the robot was restarted: pid %v, then %v", robotPID, now)
	}
	if now := livePIDs(t, marker(t)+"-cam"); len(now) != 1 || now[0] == camPID[0] {
		t.Fatalf("the cam was not restarted: pid %v, then %v", camPID, now)
	}
	if _, env := call(t, cs, "cam__get_scene", nil); env["success"] != true {
		t.Fatalf("the restarted cam through the same session: %v", env)
	}
	driveUntil(t, cs, "policy_denied")

	var reloads []auditRecord
	for _, r := range auditJSONL(t, "-c", cfg) {
		if r.Action == "reload" {
			reloads = append(reloads, r)
		}
	}
	if len(reloads) != 4 {
		t.Fatalf("%d reload records, want 4: %+v", len(reloads), reloads)
	}
	for i, want := range []struct{ principal, outcome string }{{"signal", ""}, {"signal", "refused"}, {"admin", "refused"}, {"admin", ""}} {
		if r := reloads[i]; r.Principal != want.principal || r.Outcome != want.outcome {
			t.Errorf("reload record %d: %+v, want principal %s outcome %q", i, r, want.principal, want.outcome)
		}
	}
	if got := mustJSON(reloads[3].Detail["restarted"]); got != `["cam"]` {
		t.Errorf("the applied reload's record names %s as restarted", got)
	}
}

// postReload calls POST /admin/reload with the bearer token and returns the status and body.
func postReload(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/admin/reload", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
