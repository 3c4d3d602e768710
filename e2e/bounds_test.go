package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bigResultPeakRSSBound is the peak resident memory (VmHWM) allowed to the gateway while it
// carries four concurrent 10 MiB results: about 218 MiB is measured with the gateway's default
// soft memory limit of 128 MiB (285 MiB with the earlier 256 MiB, about 800 MiB without one;
// docs/benchmarks.md).
const bigResultPeakRSSBound = 384 << 20

// peakRSS reads the peak resident set size of process pid (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 { return procStatusBytes(t, pid, "VmHWM") }

// procStatusBytes reads a size field (in kB) of /proc/PID/status, in bytes.
func procStatusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here to read the gateway's memory from: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestFourConcurrentBigResultsStayWithinTheirMemoryBound: four 10 MiB results at once, under a
// max_result_bytes of 16 MiB, all arrive whole, and the gateway's peak memory stays in proportion
// to them.
func TestFourConcurrentBigResultsStayWithinTheirMemoryBound(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    max_result_bytes: 16777216
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	before := peakRSS(t, gw.cmd.Process.Pid)
	const size = 10 << 20
	var wg sync.WaitGroup
	errs := make([]string, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__big_result", Arguments: map[string]any{"bytes": size}})
			switch {
			case err != nil:
				errs[i] = err.Error()
			case res.IsError:
				errs[i] = textOf(res)
			default:
				env, _ := res.StructuredContent.(map[string]any)
				if obs, _ := env["observation"].(string); len(obs) != size {
					errs[i] = fmt.Sprintf("observation of %d bytes, want %d", len(obs), size)
				}
			}
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("call %d: %.300s", i, e)
		}
	}
	peak := peakRSS(t, gw.cmd.Process.Pid)
	t.Logf("gateway peak RSS: %d MiB before the calls, %d MiB after four concurrent %d MiB results", before>>20, peak>>20, size>>20)
	if peak > bigResultPeakRSSBound {
		t.Errorf("gateway peak RSS %d MiB, over the bound of %d MiB for four %d MiB results", peak>>20, bigResultPeakRSSBound>>20, size>>20)
	}
}

// TestResultOverTheLimitIsRefusedByName: a 50 MB result, over the default max_result_bytes of
// 4 MiB, fails its call with tool_protocol_violation naming its size, the limit and the setting;
// the session stays up and the next call is served.
func TestResultOverTheLimitIsRefusedByName(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	const size = 50_000_000
	res, env := call(t, cs, "robot__big_result", map[string]any{"bytes": size})
	reason, _ := env["reason"].(string)
	if !res.IsError || env["kind"] != "tool_protocol_violation" ||
		!strings.Contains(reason, "server robot answered the call to robot__big_result with a message of ") ||
		!strings.Contains(reason, "over its max_result_bytes of 4194304; the result was discarded. Ask for less, or raise servers[].max_result_bytes.") {
		t.Fatalf("over-limit result: %v", env)
	}
	var got int
	if _, err := fmt.Sscanf(reason[strings.Index(reason, "message of ")+len("message of "):], "%d", &got); err != nil || got < size || got > size+1000 {
		t.Errorf("reason names %d bytes (%v), want the message's size, a little over %d", got, err, size)
	}
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("the call after the refused one: %v", env)
	}
	if _, env := call(t, cs, "robot__robot_stats", map[string]any{}); env["observation"] == nil || !strings.HasPrefix(env["observation"].(string), "3 calls since start") {
		t.Errorf("the server was restarted or lost calls: %v", env)
	}
	if log := gw.stderr.String(); !strings.Contains(log, "over its max_result_bytes of 4194304") || !strings.Contains(log, "server=robot") {
		t.Errorf("the gateway's log does not name the refused message:\n%s", log)
	}
}

// TestResultOverTheLimitOnAPhysicalServerLocksOut: the call was sent and its answer lost, so what
// the robot did is unknown: the server is locked out.
func TestResultOverTheLimitOnAPhysicalServerLocksOut(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
    max_result_bytes: 65536
`)
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	_, env := call(t, cs, "robot__big_result", map[string]any{"bytes": 100000})
	reason, _ := env["reason"].(string)
	if env["kind"] != "mcp_execution_status_unknown" || !strings.Contains(reason, "over its max_result_bytes of 65536") ||
		!strings.Contains(reason, "locked out") {
		t.Fatalf("over-limit result on a physical server: %v", env)
	}
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("the next physical call must be refused by the lockout: %v", env)
	}
	st := statusJSON(t, cfg)
	if len(st.Lockouts) != 1 || st.Lockouts[0].Tool != "robot__big_result" {
		t.Fatalf("lockouts: %+v", st.Lockouts)
	}
}

// TestGarbageOnStdoutIsNamedAndTheSessionGoesOn: a banner, a 10 MiB line of garbage and a line in
// the middle of the session are logged for what they are and skipped; an answer that is not
// UTF-8 fails its call, naming it, and the session keeps working.
func TestGarbageOnStdoutIsNamedAndTheSessionGoesOn(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-banner", "Starting driver… v2", "-banner-bytes", "10485760"]
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	if _, env := call(t, cs, "robot__fault", map[string]any{"mode": "stdout_banner"}); env["success"] != true {
		t.Fatalf("a call that prints a banner mid-session: %v", env)
	}
	res, env := call(t, cs, "robot__fault", map[string]any{"mode": "invalid_utf8"})
	reason, _ := env["reason"].(string)
	if !res.IsError || env["kind"] != "tool_protocol_violation" ||
		!strings.Contains(reason, "server robot answered the call to robot__fault with a message that is not valid UTF-8 (byte 0xe9 at offset") ||
		!strings.Contains(reason, `caf\xe9`) {
		t.Fatalf("an answer that is not UTF-8: %v", env)
	}
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("the session after the garbage: %v", env)
	}
	log := gw.stderr.String()
	for _, want := range []string{
		"server robot wrote a line to stdout that is not JSON-RPC: 'Starting driver… v2'; it was skipped. Servers must log to stderr",
		"server robot wrote a line to stdout that is not JSON-RPC: '" + strings.Repeat("x", 200) + "'…",
		"server robot wrote a line to stdout that is not JSON-RPC: 'Starting driver… serial /dev/ttyUSB0 at 115200 baud'",
		"not valid UTF-8",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the gateway's log lacks %q:\n%.3000s", want, log)
		}
	}
	if strings.Contains(log, strings.Repeat("x", 1000)) {
		t.Error("the gateway's log holds the whole 10 MiB line; it must quote only its start")
	}
	metrics := getBody(t, "http://"+addr+"/metrics", 200)
	for _, want := range []string{
		`mcp_gateway_upstream_output_errors_total{reason="not_json",server="robot"} 3`,
		`mcp_gateway_upstream_output_errors_total{reason="invalid_utf8",server="robot"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
