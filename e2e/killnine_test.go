package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// killNineConfig fronts two simulated robots, both physical, each recording every call it
// receives (-record) in a file outside the gateway. Lockouts are per server: arm is locked out at
// the start and stays locked through every kill (the earlier lockout that must survive), while
// robot's calls flow. robot's deadline is generous so that a loaded machine does not turn a 0.3 s
// wait into a timeout; arm's is short so that its hang locks it out quickly.
const killNineConfig = `
gateway:
  listen: "{{listen}}"
  lockout_scope: server
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl"]
    physical: true
    call_timeout_sec: 20
  - name: arm
    command: "{{sim}}"
    args: ["-name", "{{marker}}-arm", "-record", "{{dir}}/arm.jsonl"]
    physical: true
    call_timeout_sec: 1
policies:
  default: allow
  rules:
    - id: no-zones
      effect: deny
      when: 'tool == "robot__navigate_to" && args.target.startsWith("zone-")'
      reason: zones are off limits
`

const (
	killNineClients = 5
	// killNinePhysical of the clients call robot's physical tools only.
	killNinePhysical = 2
	// The kill comes at a random moment this long after the clients start calling.
	killNineMinDelay = 50 * time.Millisecond
	killNineMaxDelay = 900 * time.Millisecond
	// killNineUnlockPercent: how often a robot lockout found after a restart is unlocked for the
	// next round; otherwise it is kept, and must survive the next kill too.
	killNineUnlockPercent = 75
	// killNineMaxReports caps the violations printed per kind; all are counted.
	killNineMaxReports = 15
)

// TestKillNine kills the gateway with SIGKILL at random moments while several HTTP clients call
// fast and slow physical tools and tools the gateway refuses, restarts it on the same state dir
// after each kill and checks, from outside the gateway (the clients' own bookkeeping, the robots'
// -record files, the state file read by the CLI while no gateway runs), SPEC §15's promise:
//
//	(a) every call a client saw answered has its audit record;
//	(b) every action the robot recorded without an answer to its client has a record, or the
//	    robot is locked out at the next start;
//	(c) `audit verify` passes;
//	(d) earlier lockouts survive the restart.
//
// Every call carries a value unique in the run in an argument the audit keeps (wait's
// timeout_sec, a navigate_to target, an unknown tool's tag), which is how calls, records and
// robot actions are matched. "Answered" means the client received the call's JSON-RPC response
// in full (CallTool returned); a call still waiting when the gateway died is unanswered and may
// or may not have a record. KILLNINE_KILLS sets the number of kills (default 10; `make
// killnine` runs 100), KILLNINE_SEED repeats a run.
func TestKillNine(t *testing.T) {
	kills := envInt(t, "KILLNINE_KILLS", 10)
	seed := int64(envInt(t, "KILLNINE_SEED", 0))
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("kill -9 suite: %d kills, seed %d (KILLNINE_SEED=%d repeats the random choices)", kills, seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 9))
	started := time.Now()

	cfg, addr := writeConfig(t, killNineConfig)
	dir := cfgDir(cfg)
	robotRec, armRec := filepath.Join(dir, "robot.jsonl"), filepath.Join(dir, "arm.jsonl")
	m := marker(t)
	k := &killNine{t: t, cfg: cfg}

	gw := startKillNineGateway(t, cfg, addr)
	// The earlier lockout: arm's hang passes its 1 s deadline.
	armCall := k.lockArm(addr)
	t.Logf("arm locked out by call %s; it stays locked through every kill", armCall)

	var nextID atomic.Int64
	keptRobot := "" // the call id of a robot lockout kept into this round
	for cycle := 1; cycle <= kills; cycle++ {
		k.cycle = cycle
		// Before the round: what the running gateway reports.
		st := statusJSON(t, cfg)
		if l := lockoutOf(st, "arm"); l == nil || l.CallID != armCall {
			k.violation("d", "round %d: arm's lockout by call %s is gone from the running gateway: %+v", cycle, armCall, st.Lockouts)
		}
		keptRobot = ""
		if l := lockoutOf(st, "robot"); l != nil {
			if rng.IntN(100) < killNineUnlockPercent {
				out, _ := cliOK(t, "unlock", "robot", "--reason", fmt.Sprintf("kill -9 suite, round %d: robot inspected", cycle), "-c", cfg)
				if !strings.Contains(out, "lockout cleared") {
					t.Fatalf("unlock robot through the admin API:\n%s", out)
				}
				gw.waitReady(t, 30*time.Second) // the reset restarts robot's server
				k.unlocks++
			} else {
				keptRobot = l.CallID
				k.kept++
			}
		}

		offset := len(robotActions(t, robotRec))
		delay := killNineMinDelay + time.Duration(rng.Int64N(int64(killNineMaxDelay-killNineMinDelay)))
		results := k.callUntilKilled(gw, addr, rng.Uint64(), &nextID, delay)
		waitNoProcesses(t, m, 15*time.Second) // both robots exit when the gateway's pipes close

		k.checkAfterKill(results, robotActions(t, robotRec)[offset:], armCall, keptRobot, gw)

		gw = startKillNineGateway(t, cfg, addr)
		// The lockouts on file are the ones the restarted gateway enforces.
		st = statusJSON(t, cfg)
		if l := lockoutOf(st, "arm"); l == nil || l.CallID != armCall {
			k.violation("d", "round %d: after the restart arm's lockout by call %s is gone: %+v", cycle, armCall, st.Lockouts)
		}
		if keptRobot != "" {
			if l := lockoutOf(st, "robot"); l == nil || l.CallID != keptRobot {
				k.violation("d", "round %d: robot's lockout by call %s, kept through the kill, is gone after the restart: %+v", cycle, keptRobot, st.Lockouts)
			}
		}
		if k.robotLockedAfter && lockoutOf(st, "robot") == nil {
			k.violation("b", "round %d: the state file showed robot locked out, the restarted gateway does not: %+v", cycle, st.Lockouts)
		}
	}

	// Physical calls flow again once an operator unlocks.
	for _, server := range []string{"arm", "robot"} {
		if lockoutOf(statusJSON(t, cfg), server) != nil {
			cliOK(t, "unlock", server, "--reason", "kill -9 suite finished: "+server+" inspected", "-c", cfg)
			gw.waitReady(t, 30*time.Second)
		}
	}
	cs := connectKillNine(t, addr, http.DefaultClient)
	for _, tool := range []string{"arm__wait", "robot__wait"} {
		if _, env := call(t, cs, tool, map[string]any{"timeout_sec": 0.01}); env["success"] != true {
			t.Errorf("%s after unlocking: %v", tool, env)
		}
	}
	cs.Close()
	// A lockout refuses every physical call: arm's robot saw its fault call and, after the final
	// unlock, that one wait.
	if got := robotActions(t, armRec); len(got) != 2 || got[0].Tool != "fault" || got[1].Tool != "wait" {
		k.violation("d", "while locked out, arm must receive nothing: it recorded %d calls: %v", len(got), got)
	}
	gw.stop(t)
	waitNoProcesses(t, m, 15*time.Second)
	if out, errOut, code := cli(t, "audit", "verify", "-c", cfg); code != 0 {
		k.violation("c", "at the end: audit verify exit %d\n%s%s", code, out, errOut)
	}
	k.report(kills, time.Since(started))
}

// killNine holds the suite's state and totals.
type killNine struct {
	t     *testing.T
	cfg   string
	cycle int

	robotLockedAfter bool // robot was locked out on file after this round's kill

	sent, answered, unanswered, unansweredRecorded int
	robotActions, actionsAnswered, actionsRecorded int
	actionsCoveredByLockout                        int
	newRobotLockouts, unlocks, kept                int
	auditRecords                                   int
	violations                                     map[string]int
}

// violation counts a broken promise under its letter and reports the first few of each.
func (k *killNine) violation(promise, format string, args ...any) {
	k.t.Helper()
	if k.violations == nil {
		k.violations = map[string]int{}
	}
	k.violations[promise]++
	if k.violations[promise] <= killNineMaxReports {
		k.t.Errorf("("+promise+") "+format, args...)
	}
}

func (k *killNine) report(kills int, took time.Duration) {
	k.t.Logf("kill -9 suite totals after %d kills in %s: calls sent %d, answered %d (every one must have its record), "+
		"unanswered at a kill %d (%d of them recorded); robot actions %d (%d answered, %d unanswered with a record, %d unanswered "+
		"covered by a lockout); robot lockouts found after a restart %d (%d unlocked, %d kept through the next kill); "+
		"audit records %d; arm's early lockout survived every restart: %v; violations %v",
		kills, took.Round(time.Second), k.sent, k.answered, k.unanswered, k.unansweredRecorded, k.robotActions,
		k.actionsAnswered, k.actionsRecorded, k.actionsCoveredByLockout, k.newRobotLockouts, k.unlocks, k.kept,
		k.auditRecords, k.violations["d"] == 0, k.violations)
}

// lockArm makes arm's call hang past its deadline and returns the id of the call that locked it.
func (k *killNine) lockArm(addr string) string {
	t := k.t
	cs := connectKillNine(t, addr, http.DefaultClient)
	defer cs.Close()
	if res, env := call(t, cs, "arm__fault", map[string]any{"mode": "hang"}); env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("arm's hang past its deadline must lock it out: %s", mustJSON(res))
	}
	l := lockoutOf(statusJSON(t, k.cfg), "arm")
	if l == nil {
		t.Fatalf("status shows no lockout of arm")
	}
	return l.CallID
}

// kn9Call is one call a client made and what it saw.
type kn9Call struct {
	key, tool string
	answered  bool
	success   bool   // the envelope said success: the robot did it
	kind      string // the envelope's kind, "" on success
	rpcErr    string // the gateway answered with a JSON-RPC error instead of a result
}

// callUntilKilled runs killNineClients clients, each calling in a loop, and kills the gateway
// delay after they started. The clients' calls are cancelled only once the gateway is dead, so
// every answer a client got left the gateway before it died.
func (k *killNine) callUntilKilled(gw *gatewayProc, addr string, seed uint64, nextID *atomic.Int64, delay time.Duration) []kn9Call {
	t := k.t
	transport := &http.Transport{MaxIdleConnsPerHost: killNineClients}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport}
	sessions := make([]*mcp.ClientSession, killNineClients)
	for i := range sessions {
		sessions[i] = connectKillNine(t, addr, hc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		results []kn9Call
		wg      sync.WaitGroup
	)
	for i, cs := range sessions {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() {
			for ctx.Err() == nil {
				name, args, key := killNineOp(rng, nextID.Add(1), i < killNinePhysical)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				c := kn9Call{key: key, tool: name}
				var rpc *jsonrpc.Error
				switch {
				case err == nil:
					c.answered = true
					env, _ := res.StructuredContent.(map[string]any)
					c.success = env["success"] == true
					c.kind, _ = env["kind"].(string)
				case errors.As(err, &rpc) && !clientSideRPCError(rpc):
					c.answered, c.rpcErr = true, rpc.Error()
				}
				mu.Lock()
				results = append(results, c)
				mu.Unlock()
				if err != nil {
					return // the gateway is gone: this session is over
				}
			}
		})
	}
	time.Sleep(delay) // the random moment of the kill, not a synchronisation
	gw.kill9(t)
	cancel()
	wg.Wait()
	for _, cs := range sessions {
		cs.Close()
	}
	return results
}

// clientSideRPCError reports whether err is one the client's SDK makes up itself when the
// connection fails ("rejected by transport", "client is closing", "server is closing"), as
// opposed to an error response the gateway sent.
func clientSideRPCError(err *jsonrpc.Error) bool {
	switch err.Code {
	case -32005, -32003, -32004:
		return true
	}
	return false
}

// killNineOp picks the next call. The first killNinePhysical clients drive robot: fast waits
// (80%) and slow ones (20%); robot runs one call at a time, so they queue behind each other. The
// other clients mostly make calls the gateway refuses (an unknown tool, invalid arguments, a
// policy denial, a call to the locked-out arm: 22% each) and now and then a fast wait. Each
// call carries id in an argument the audit keeps; key is how records and robot actions are
// matched.
func killNineOp(rng *rand.Rand, id int64, physical bool) (name string, args map[string]any, key string) {
	r := rng.IntN(100)
	switch {
	case physical && r < 80, !physical && r < 12:
		name, args = "robot__wait", map[string]any{"timeout_sec": uniqueSeconds("0.01", id)}
	case physical:
		name, args = "robot__wait", map[string]any{"timeout_sec": uniqueSeconds("0.3", id)}
	case r < 34:
		name, args = "robot__teleport", map[string]any{"tag": fmt.Sprintf("unknown-%d", id)}
	case r < 56:
		name, args = "robot__wait", map[string]any{"timeout_sec": fmt.Sprintf("invalid-%d", id)}
	case r < 78:
		name, args = "robot__navigate_to", map[string]any{"target": fmt.Sprintf("zone-%d", id)}
	default:
		name, args = "arm__wait", map[string]any{"timeout_sec": uniqueSeconds("0.02", id)}
	}
	raw, _ := json.Marshal(args)
	return name, args, argKey(raw)
}

// uniqueSeconds is a number of seconds starting with prefix whose last digits are id, such as
// 0.01000042: a wait of about prefix seconds that no other call of the run sends.
func uniqueSeconds(prefix string, id int64) float64 {
	v, err := strconv.ParseFloat(fmt.Sprintf("%s%07d", prefix, id), 64)
	if err != nil {
		panic(err)
	}
	return v
}

// argKey is the unique value a call's arguments carry, as the client sent it, as the audit
// keeps it and as the robot recorded it.
func argKey(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, name := range []string{"timeout_sec", "tag", "target"} {
		switch v := m[name].(type) {
		case float64:
			return name + "=" + strconv.FormatFloat(v, 'g', -1, 64)
		case string:
			return name + "=" + v
		}
	}
	return ""
}

// checkAfterKill checks the promises on the stopped gateway's state file.
func (k *killNine) checkAfterKill(results []kn9Call, actions []robotAction, armCall, keptRobot string, gw *gatewayProc) {
	t := k.t
	recs := auditJSONL(t, "-c", k.cfg)
	k.auditRecords = len(recs)
	byKey := map[string]int{}
	for _, r := range recs {
		if r.Type == "call" {
			byKey[argKey(r.Args)]++
		}
	}
	st := statusJSON(t, k.cfg)
	robotLock := lockoutOf(st, "robot")
	k.robotLockedAfter = robotLock != nil
	if robotLock != nil && robotLock.CallID != keptRobot {
		k.newRobotLockouts++
	}
	broke := false

	// (d) The lockouts from before the kill are on file.
	if l := lockoutOf(st, "arm"); l == nil || l.CallID != armCall {
		k.violation("d", "round %d: after the kill arm's lockout by call %s is not on file: %+v", k.cycle, armCall, st.Lockouts)
		broke = true
	}
	if keptRobot != "" && (robotLock == nil || robotLock.CallID != keptRobot) {
		k.violation("d", "round %d: robot's lockout by call %s is not on file after the kill: %+v", k.cycle, keptRobot, st.Lockouts)
		broke = true
	}

	// (a) Every answered call has its record, exactly one.
	answered := map[string]bool{}
	sent := map[string]bool{}
	var nAnswered, nUnanswered, nUnansweredRecorded int
	for _, c := range results {
		sent[c.key] = true
		if c.rpcErr != "" {
			t.Errorf("round %d: %s (%s) was answered with a JSON-RPC error instead of a result: %s", k.cycle, c.tool, c.key, c.rpcErr)
		}
		if !c.answered {
			nUnanswered++
			if byKey[c.key] > 0 {
				nUnansweredRecorded++
			}
			continue
		}
		nAnswered++
		answered[c.key] = true
		switch n := byKey[c.key]; {
		case n == 0:
			k.violation("a", "round %d: %s with %s was answered (%s) but has no audit record after the kill", k.cycle, c.tool, c.key, orOK(c.kind))
			broke = true
		case n > 1:
			t.Errorf("round %d: %s with %s has %d audit records, want one", k.cycle, c.tool, c.key, n)
		}
	}

	// (b) Every robot action the client saw no answer to has a record or left robot locked out.
	var nActAnswered, nActRecorded, nActLocked int
	acted := map[string]bool{}
	for _, a := range actions {
		key := argKey(a.Args)
		acted[key] = true
		switch {
		case !sent[key]:
			t.Errorf("round %d: the robot recorded %s %s, which no client of this round sent", k.cycle, a.Tool, a.Args)
		case answered[key]:
			nActAnswered++
		case byKey[key] > 0:
			nActRecorded++
		case robotLock != nil:
			nActLocked++
		default:
			k.violation("b", "round %d: the robot did %s %s, its client saw no answer, and there is neither an audit record nor a lockout of robot", k.cycle, a.Tool, a.Args)
			broke = true
		}
	}
	// A lockout the kill left names a call that was in flight: its journal entry goes in the same
	// transaction as its record, so a call with an outcome record cannot be the one (unless the
	// lockout came from a timeout, which has a lockout record).
	if robotLock != nil && robotLock.CallID != keptRobot {
		var lockRec, callRec bool
		for _, r := range recs {
			lockRec = lockRec || r.CallID == robotLock.CallID && r.Type == "lockout"
			callRec = callRec || r.CallID == robotLock.CallID && r.Type == "call"
		}
		if callRec && !lockRec {
			k.violation("b", "round %d: robot's lockout after the kill names call %s as in flight, but that call has its outcome record: its journal entry outlived the record", k.cycle, robotLock.CallID)
			broke = true
		}
	}
	// The witness works: every wait the gateway reported done was recorded by the robot.
	for _, c := range results {
		if c.answered && c.success && c.tool == "robot__wait" && !acted[c.key] {
			t.Errorf("round %d: %s with %s succeeded, but the robot's -record file has no such call", k.cycle, c.tool, c.key)
		}
	}

	// (c) The hash chain verifies.
	if out, errOut, code := cli(t, "audit", "verify", "-c", k.cfg); code != 0 {
		k.violation("c", "round %d: audit verify exit %d after the kill\n%s%s", k.cycle, code, out, errOut)
		broke = true
	}

	t.Logf("round %d: %d calls (%d answered, %d in flight at the kill, %d of those recorded); robot did %d (%d answered, %d recorded, %d covered by its lockout); robot locked out after the kill: %v",
		k.cycle, len(results), nAnswered, nUnanswered, nUnansweredRecorded, len(actions), nActAnswered, nActRecorded, nActLocked, robotLock != nil)
	if broke {
		t.Logf("round %d: the killed gateway's last log lines:\n%s", k.cycle, tail(gw.stderr.String(), 30))
	}
	k.sent += len(results)
	k.answered += nAnswered
	k.unanswered += nUnanswered
	k.unansweredRecorded += nUnansweredRecorded
	k.robotActions += len(actions)
	k.actionsAnswered += nActAnswered
	k.actionsRecorded += nActRecorded
	k.actionsCoveredByLockout += nActLocked
}

func orOK(kind string) string {
	if kind == "" {
		return "ok"
	}
	return kind
}

// robotAction is one line of a sim-robot -record file.
type robotAction struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// robotActions reads a -record file; a missing file is no actions.
func robotActions(t *testing.T, path string) []robotAction {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []robotAction
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var a robotAction
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%s: %v: %q", path, err, sc.Text())
		}
		out = append(out, a)
	}
	return out
}

func lockoutOf(st gatewayStatus, server string) *lockoutStatus {
	for i := range st.Lockouts {
		if st.Lockouts[i].Server == server {
			return &st.Lockouts[i]
		}
	}
	return nil
}

// startKillNineGateway starts the gateway like startGateway, without printing the stderr of
// every gateway of the run when the test fails (checkAfterKill prints the killed one's).
func startKillNineGateway(t *testing.T, cfg, addr string) *gatewayProc {
	t.Helper()
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg)
	p := &gatewayProc{cmd: cmd, addr: addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(t) })
	p.waitReady(t, 30*time.Second)
	return p
}

// connectKillNine connects a client that neither retries nor keeps a standalone stream: when the
// gateway dies, its calls fail instead of waiting for a reconnection.
func connectKillNine(t *testing.T, addr string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "killnine", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	return cs
}
