package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// haltConfig has a physical robot whose navigate_to takes {{travel}} and {{brake}} to come to
// rest when stopped, with its stop tool and two inspection tools marked, and a camera that moves
// nothing. Every call the robot receives is recorded in robot.jsonl.
const haltConfig = `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl", "-travel-time", "{{travel}}", "-brake-time", "{{brake}}"]
    physical: true
    tools:
      overrides:
        stop: {stop: true}
        get_scene: {allow_while_locked: true}
        robot_stats: {allow_while_locked: true}
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"]
`

func writeHaltConfig(t *testing.T, travel, brake string) (cfg, addr string) {
	t.Helper()
	return writeConfig(t, strings.NewReplacer("{{travel}}", travel, "{{brake}}", brake).Replace(haltConfig))
}

// haltStatus is what `mcp-gateway status -o json` says of halts and physical calls.
type haltStatus struct {
	Running  bool `json:"running"`
	Halted   bool `json:"halted"`
	Lockouts []struct {
		Server string `json:"server"`
		Reason string `json:"reason"`
		Kind   string `json:"kind"`
		By     string `json:"by"`
	} `json:"lockouts"`
	Physical []struct {
		Server   string `json:"server"`
		InFlight []struct {
			CallID    string `json:"call_id"`
			Tool      string `json:"tool"`
			Principal string `json:"principal"`
		} `json:"in_flight"`
		Queued          int      `json:"queued"`
		StopTool        string   `json:"stop_tool"`
		InspectionTools []string `json:"inspection_tools"`
	} `json:"physical"`
}

func haltStatusJSON(t *testing.T, cfg string) haltStatus {
	t.Helper()
	out, errOut, code := cli(t, "status", "-o", "json", "-c", cfg)
	if code != 0 && code != statusLocked {
		t.Fatalf("status -o json: exit %d\n%s", code, errOut)
	}
	var st haltStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// recordedCall is one line of the simulated robot's -record file.
type recordedCall struct {
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args"`
	Interrupted []struct {
		Tool  string `json:"tool"`
		State string `json:"state"`
	} `json:"interrupted"`
}

func recordedCalls(t *testing.T, path string) []recordedCall {
	t.Helper()
	var out []recordedCall
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, path)), "\n") {
		if line == "" {
			continue
		}
		var c recordedCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s: %v: %s", path, err, line)
		}
		out = append(out, c)
	}
	return out
}

func TestHaltStopsTheRobot(t *testing.T) {
	cfg, addr := writeHaltConfig(t, "20s", "500ms")
	record := filepath.Join(cfgDir(cfg), "robot.jsonl")
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	// A long drive is running and two more calls wait for their turn.
	driving := startCall(cs, "robot__navigate_to", map[string]any{"target": "shelf"})
	waitFor(t, 10*time.Second, "the robot to receive the drive", func() bool { return recordedCount(record, "navigate_to") == 1 })
	picking := startCall(cs, "robot__pick_object", map[string]any{"object": "sponge"})
	waitFor(t, 10*time.Second, "the pick to queue", func() bool { return haltStatusJSON(t, cfg).Physical[0].Queued == 1 })
	returning := startCall(cs, "robot__navigate_to", map[string]any{"target": "home"})
	st := haltStatusJSON(t, cfg)
	waitFor(t, 10*time.Second, "two calls to queue", func() bool { st = haltStatusJSON(t, cfg); return st.Physical[0].Queued == 2 })
	if p := st.Physical[0]; p.StopTool != "robot__stop" || !slices.Equal(p.InspectionTools, []string{"robot__get_scene", "robot__robot_stats"}) ||
		p.InFlight[0].Tool != "robot__navigate_to" || st.Halted {
		t.Fatalf("status before the halt: %+v", st)
	}

	// The operator halts from another process.
	out, _ := cliOK(t, "halt", "--reason", "a person is in the cell", "--operator", "alice", "-c", cfg)
	t.Logf("mcp-gateway halt:\n%s", out)
	for _, want := range []string{`HALT by alice: "a person is in the cell"`, "robot: halted", "stop tool robot__stop", ": ok; sent",
		"Cancelled 3 physical call(s)", "its outcome is unknown", "was waiting for its turn and was not sent", "mcp-gateway unlock robot --reason"} {
		if !strings.Contains(out, want) {
			t.Errorf("halt output lacks %q:\n%s", want, out)
		}
	}

	// The drive was sent: cancelled, its outcome unknown, and the failure says who and why.
	_, env := driving.wait(t, "the drive")
	if env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(env["reason"].(string), `the operator alice halted the robot ("a person is in the cell")`) {
		t.Fatalf("the drive in flight: %v", env)
	}
	// The queued calls were never sent.
	for name, c := range map[string]*asyncCall{"pick_object": picking, "navigate_to home": returning} {
		_, env := c.wait(t, name)
		if env["kind"] != "cancelled" || !strings.Contains(env["reason"].(string), "before it was sent") || !strings.Contains(env["reason"].(string), "alice halted") {
			t.Errorf("queued %s: %v", name, env)
		}
	}

	// The robot saw the cancellation, and the stop arrived while the drive was still braking.
	recs := recordedCalls(t, record)
	tools := make([]string, len(recs))
	for i, r := range recs {
		tools[i] = r.Tool
	}
	if !slices.Equal(tools, []string{"navigate_to", "stop"}) {
		t.Fatalf("the robot received %v, want the drive and the stop only", tools)
	}
	if in := recs[1].Interrupted; len(in) != 1 || in[0].Tool != "navigate_to" || in[0].State != "braking" {
		t.Errorf("the stop's record: %+v, want it to interrupt navigate_to while braking", recs[1])
	}

	// Halted: inspection answers, everything else is refused, the camera works.
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Errorf("get_scene while halted: %s", mustJSON(res))
	}
	if _, env := call(t, cs, "robot__robot_stats", map[string]any{}); env["cancelled"] != float64(1) {
		t.Errorf("robot_stats while halted: %v, want one cancelled call", env)
	}
	assertHalted(t, cs, "alice")
	if res, env := call(t, cs, "cam__navigate_to", map[string]any{"target": "table"}); res.IsError || env["success"] != true {
		t.Errorf("the camera while the robot is halted: %s", mustJSON(res))
	}
	st = haltStatusJSON(t, cfg)
	if !st.Halted || len(st.Lockouts) != 1 || st.Lockouts[0].Kind != "halt" || st.Lockouts[0].By != "alice" || len(st.Physical[0].InFlight) != 0 {
		t.Errorf("status while halted: %+v", st)
	}
	out = statusCLI(t, statusLocked, "-c", cfg)
	t.Logf("mcp-gateway status:\n%s", out)
	if !strings.Contains(out, "HALTED") || !strings.Contains(out, "robot: halted") || !strings.Contains(out, "by operator alice") {
		t.Errorf("status while halted:\n%s", out)
	}

	// A restart keeps the halt.
	gw.stop(t)
	startGateway(t, cfg, addr)
	cs = connectHTTP(t, addr, nil)
	assertHalted(t, cs, "alice")

	out, _ = cliOK(t, "unlock", "robot", "--reason", "cell cleared, robot inspected", "--operator", "bob", "-c", cfg)
	if !strings.Contains(out, "halt cleared by bob") || !strings.Contains(out, "It was halted") {
		t.Errorf("unlock of a halt:\n%s", out)
	}
	if res, env := call(t, cs, "robot__pick_object", map[string]any{"object": "sponge"}); env["kind"] == "mcp_execution_status_unknown" {
		t.Errorf("after the unlock: %s", mustJSON(res))
	}

	// The audit log holds the halt, the stop call, the cancelled drive as unknown and the
	// unlock, with who and why.
	audit := auditJSONL(t, "-c", cfg)
	halt := findRecord(audit, func(r auditRecord) bool { return r.Type == "operator" && r.Action == "halt" })
	stop := findRecord(audit, func(r auditRecord) bool { return r.Type == "call" && r.Tool == "robot__stop" })
	drive := findRecord(audit, func(r auditRecord) bool {
		return r.Type == "call" && r.Tool == "robot__navigate_to" && r.Kind == "mcp_execution_status_unknown"
	})
	unlock := findRecord(audit, func(r auditRecord) bool { return r.Type == "operator" && r.Action == "unlock" })
	switch {
	case halt == nil || stop == nil || drive == nil || unlock == nil:
		t.Fatalf("the audit log lacks a record (halt %v, stop %v, drive %v, unlock %v):\n%s", halt != nil, stop != nil, drive != nil, unlock != nil, mustJSON(audit))
	case halt.Principal != "alice" || halt.Reason != "a person is in the cell" || halt.Server != "robot":
		t.Errorf("halt record: %+v", *halt)
	case stop.Principal != "alice" || stop.Outcome != "ok" || stop.Detail["called_by"] != "halt":
		t.Errorf("stop record: %+v", *stop)
	case !strings.Contains(drive.Reason, "alice halted the robot"):
		t.Errorf("the cancelled drive's record: %+v", *drive)
	case unlock.Principal != "bob" || unlock.Reason != "cell cleared, robot inspected" || unlock.Detail["lockout_kind"] != "halt" || unlock.Detail["locked_by"] != "alice":
		t.Errorf("unlock record: %+v", *unlock)
	case !(halt.Seq < stop.Seq && stop.Seq < unlock.Seq && drive.Seq < unlock.Seq):
		t.Errorf("records out of order: halt %d, stop %d, drive %d, unlock %d", halt.Seq, stop.Seq, drive.Seq, unlock.Seq)
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); !strings.Contains(out, "audit log intact") {
		t.Errorf("audit verify:\n%s", out)
	}
}

// assertHalted fails unless a physical action is refused because by halted the robot.
func assertHalted(t *testing.T, cs *mcp.ClientSession, by string) {
	t.Helper()
	res, env := call(t, cs, "robot__pick_object", map[string]any{"object": "sponge"})
	if !res.IsError || env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("pick_object while halted: %s", mustJSON(res))
	}
	for _, want := range []string{"the operator " + by + " halted the robot", "a person is in the cell", "mcp-gateway unlock robot"} {
		if !strings.Contains(env["reason"].(string), want) {
			t.Errorf("the refusal lacks %q: %s", want, env["reason"])
		}
	}
}

func TestHaltOnTheStateFileWhileStopped(t *testing.T) {
	cfg, addr := writeHaltConfig(t, "1s", "100ms")
	// Before any gateway ran: the halt creates the state file, so the first start is halted.
	out, _ := cliOK(t, "halt", "--reason", "a person is in the cell", "--operator", "alice", "-c", cfg)
	for _, want := range []string{"no gateway is running", "robot: halted", "no call was in flight to cancel and no stop tool was sent"} {
		if !strings.Contains(out, want) {
			t.Errorf("halt on the state file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cam") {
		t.Errorf("the halt names a server that is not physical:\n%s", out)
	}
	// Again: the first halt stays.
	if out, _ := cliOK(t, "halt", "--reason", "still", "--operator", "bob", "-c", cfg); !strings.Contains(out, "already halted") || !strings.Contains(out, "by operator alice") {
		t.Errorf("a second halt on the file:\n%s", out)
	}
	if _, errOut, code := cli(t, "halt", "-c", cfg); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Errorf("halt without --reason: exit %d\n%s", code, errOut)
	}
	if out := statusCLI(t, statusLocked, "-c", cfg); !strings.Contains(out, "not running") || !strings.Contains(out, "HALTED") {
		t.Errorf("status of a stopped, halted gateway:\n%s", out)
	}

	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	assertHalted(t, cs, "alice")
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Errorf("get_scene while halted: %s", mustJSON(res))
	}
	recs := auditJSONL(t, "-c", cfg)
	var halts []auditRecord
	for _, r := range recs {
		if r.Action == "halt" {
			halts = append(halts, r)
		}
	}
	if len(halts) != 2 || halts[0].Principal != "alice" || halts[0].Detail["via"] != "state file" || halts[1].Detail["already_halted"] == nil {
		t.Fatalf("halt records written on the file: %s", mustJSON(halts))
	}
	cliOK(t, "unlock", "robot", "--reason", "cell cleared", "-c", cfg)
	if res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "table"}); res.IsError || env["success"] != true {
		t.Errorf("after the unlock: %s", mustJSON(res))
	}
}

func TestLockNow(t *testing.T) {
	cfg, addr := writeHaltConfig(t, "3s", "100ms")
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lock", "robot", "-c", cfg}, 2, "--reason"},
		{[]string{"lock", "--reason", "x", "-c", cfg}, 2, "exactly one SERVER"},
		{[]string{"lock", "robt", "--reason", "x", "-c", cfg}, 1, `did you mean "robot"?`},
		{[]string{"lock", "cam", "--reason", "x", "-c", cfg}, 1, "not a physical server"},
	} {
		if _, errOut, code := cli(t, c.args...); code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, errOut)
		}
	}

	// A lock does not cancel the drive in flight: it arrives, and nothing moves after it.
	driving := startCall(cs, "robot__navigate_to", map[string]any{"target": "shelf"})
	waitFor(t, 10*time.Second, "the drive to be in flight", func() bool { return len(haltStatusJSON(t, cfg).Physical[0].InFlight) == 1 })
	out, _ := cliOK(t, "lock", "robot", "--reason", "a person is in the cell", "--operator", "alice", "-c", cfg)
	if !strings.Contains(out, "locked out by alice") || !strings.Contains(out, "is not cancelled") {
		t.Errorf("lock output:\n%s", out)
	}
	if !driving.running() {
		t.Error("the drive ended while the lock was put in force")
	}
	if _, env := driving.wait(t, "the drive"); env["success"] != true {
		t.Errorf("the drive in flight during a lock: %v", env)
	}
	res, env := call(t, cs, "robot__pick_object", map[string]any{"object": "sponge"})
	if !res.IsError || env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(env["reason"].(string), "the operator alice locked it out") {
		t.Errorf("a call while locked: %s", mustJSON(res))
	}
	if out, _ := cliOK(t, "lock", "robot", "--reason", "me too", "--operator", "bob", "-c", cfg); !strings.Contains(out, "already locked") {
		t.Errorf("a second lock:\n%s", out)
	}

	gw.stop(t)
	// On the state file of the stopped gateway, the lock stays and a second one is recorded.
	if out, _ := cliOK(t, "lock", "robot", "--reason", "still inside", "--operator", "carol", "-c", cfg); !strings.Contains(out, "No gateway is running") {
		t.Errorf("lock on the state file:\n%s", out)
	}
	out, _ = cliOK(t, "unlock", "robot", "--reason", "the person left", "--operator", "dave", "-c", cfg)
	if !strings.Contains(out, "lockout cleared by dave") || !strings.Contains(out, "by operator alice") {
		t.Errorf("unlock of a lock:\n%s", out)
	}
	var locks []auditRecord
	var unlock *auditRecord
	for _, r := range auditJSONL(t, "-c", cfg) {
		switch r.Action {
		case "lock":
			locks = append(locks, r)
		case "unlock":
			unlock = &r
		}
	}
	if len(locks) != 3 || locks[0].Principal != "alice" || locks[0].Reason != "a person is in the cell" || locks[2].Detail["via"] != "state file" {
		t.Errorf("lock records: %s", mustJSON(locks))
	}
	if unlock == nil || unlock.Detail["lockout_kind"] != "operator" || unlock.Detail["locked_by"] != "alice" {
		t.Errorf("unlock record: %s", mustJSON(unlock))
	}
}

// BenchmarkHalt measures how fast a halt stops the simulated robot through the real binary:
// each iteration starts a long drive, waits until the robot has it, halts through the admin API
// and unlocks. It reports, from the halt request, p50 and p99 of the time to the stop tool's
// call reaching dispatch (stop-sent, the gateway's report), to the robot writing the stop's
// -record line (stop-received, the robot's clock: the same machine's), to the cancelled drive's
// end in the gateway (cancelled-ended), and of the whole halt request as the client saw it
// (answered).
//
//	go test ./e2e -run '^$' -bench Halt -benchtime 200x
func BenchmarkHalt(b *testing.B) {
	cfg, addr := writeBenchHaltConfig(b, "60s", "50ms")
	startBenchGateway(b, gatewayBin, cfg, addr)
	cs := benchHTTPSession(b, addr)
	token := strings.TrimSpace(readFileB(b, filepath.Join(filepath.Dir(cfg), ".mcp-gateway", "admin.token")))
	record := filepath.Join(filepath.Dir(cfg), "robot.jsonl")
	var stopSent, stopReceived, cancelledEnded, answered []float64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		driving := startCall(cs, "robot__navigate_to", map[string]any{"target": "shelf"})
		for recordedCount(record, "navigate_to") <= i {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		var rep struct {
			Servers []struct {
				Stop struct{ Status string } `json:"stop"`
			} `json:"servers"`
			Cancelled []struct{ Outcome string } `json:"cancelled"`
			Timings   struct {
				StopSentMS           float64 `json:"stop_sent_ms"`
				LastCancelledEndedMS float64 `json:"last_cancelled_ended_ms"`
			} `json:"timings"`
		}
		adminPost(b, addr, token, "/admin/halt", `{"reason": "bench", "operator": "bench"}`, &rep)
		answered = append(answered, float64(time.Since(start).Microseconds())/1000)
		b.StopTimer()
		if len(rep.Servers) != 1 || rep.Servers[0].Stop.Status != "ok" || len(rep.Cancelled) != 1 || rep.Cancelled[0].Outcome != "unknown" {
			b.Fatalf("iteration %d: halt report: %+v\n%s", i, rep, readFileB(b, record))
		}
		stopSent = append(stopSent, rep.Timings.StopSentMS)
		stopReceived = append(stopReceived, float64(lastStopAt(b, record).Sub(start).Microseconds())/1000)
		cancelledEnded = append(cancelledEnded, rep.Timings.LastCancelledEndedMS)
		<-driving.done
		adminPost(b, addr, token, "/admin/lockouts/robot/reset", `{"reason": "bench", "operator": "bench"}`, nil)
		b.StartTimer()
	}
	b.StopTimer()
	for name, v := range map[string][]float64{"stop-sent": stopSent, "stop-received": stopReceived, "cancelled-ended": cancelledEnded, "answered": answered} {
		p50, p99 := percentiles(v)
		b.ReportMetric(p50, name+"-p50-ms")
		b.ReportMetric(p99, name+"-p99-ms")
	}
}

func percentiles(v []float64) (p50, p99 float64) {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2], s[len(s)*99/100]
}

// lastStopAt is when the simulated robot recorded its last stop call.
func lastStopAt(b *testing.B, path string) time.Time {
	b.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var rec struct {
			Tool string    `json:"tool"`
			At   time.Time `json:"at"`
		}
		if json.Unmarshal([]byte(lines[i]), &rec) == nil && rec.Tool == "stop" {
			return rec.At
		}
	}
	b.Fatalf("%s has no stop call", path)
	return time.Time{}
}

// recordedCount is how many calls of tool the simulated robot recorded in path so far.
func recordedCount(path, tool string) int {
	data, _ := os.ReadFile(path)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, `{"tool":"`+tool+`"`) { // a stop's interrupted list names tools too, not first
			n++
		}
	}
	return n
}

var adminClient = &http.Client{Timeout: 30 * time.Second}

func adminPost(b *testing.B, addr, token, path, body string, v any) {
	b.Helper()
	adminDo(b, "POST", addr, token, path, body, v)
}

func adminDo(b *testing.B, method, addr, token, path, body string, v any) {
	b.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := adminClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			b.Fatal(err)
		}
	}
}

func writeBenchHaltConfig(b *testing.B, travel, brake string) (cfg, addr string) {
	dir := b.TempDir()
	addr = freeAddr(b)
	r := strings.NewReplacer("{{listen}}", addr, "{{sim}}", simRobotBin, "{{marker}}", "bench-halt", "{{dir}}", dir,
		"{{travel}}", travel, "{{brake}}", brake)
	cfg = filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(r.Replace(haltConfig)), 0o644); err != nil {
		b.Fatal(err)
	}
	return cfg, addr
}

func readFileB(b *testing.B, path string) string {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			return string(data)
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
