//go:build linux

package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// diskFullConfig puts the state dir on a tmpfs the test mounts (and fills); the robots' -record
// files, the witnesses, live beside the config, outside it. robot is physical with a short
// deadline (5 s: time to fill the disk and make the calls below first), so that its hang times
// out while the disk is full; cam is not physical.
//
// Why min_free_bytes: bbolt reuses the pages freed by earlier transactions, and on tmpfs a write
// into a page the file already has needs no new space, so a full filesystem does not make every
// write fail: small transactions go on succeeding for a while. The gateway refuses calls while
// the filesystem has less free space than audit.min_free_bytes, and the fill leaves none, so the
// refusal does not depend on which pages bbolt happens to pick. One call during the fill also
// carries 32 KiB of arguments, whose record cannot fit into reused pages: a gateway that only
// noticed failed writes would fail that one too.
const diskFullConfig = `
gateway:
  listen: "{{listen}}"
  state_dir: "{{dir}}/state"
  lockout_scope: server
audit:
  min_free_bytes: 262144
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl"]
    physical: true
    call_timeout_sec: 5
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam", "-record", "{{dir}}/cam.jsonl"]
`

const (
	// diskFullBound is how long any answer may take while the state file cannot be written.
	diskFullBound = 10 * time.Second
	// hangDeadline is robot's call_timeout_sec.
	hangDeadline = 5 * time.Second
)

var (
	// saysWhatFailed: the refusal names the state file (or the disk) as what failed.
	saysWhatFailed = regexp.MustCompile(`(?i)state file|disk|free space|no space`)
	// saysNothingSent: and that no server received the call.
	saysNothingSent = regexp.MustCompile(`(?i)\b(nothing|not|never)\b[^.]*\bsent\b`)
)

// TestDiskFull: with the state dir's filesystem full, new calls are refused before dispatch with
// kind audit_unavailable, and the robots' -record files show they never got there; a physical
// call already in flight that times out still locks out and answers within seconds; /readyz and
// /metrics say the state file is failing; once space is back, calls work again without a
// restart, and the lockout is on disk.
func TestDiskFull(t *testing.T) {
	cfg, addr := writeConfig(t, diskFullConfig)
	dir := cfgDir(cfg)
	stateDir := filepath.Join(dir, "state")
	mountTmpfs(t, stateDir, "2m")
	robotRec, camRec := filepath.Join(dir, "robot.jsonl"), filepath.Join(dir, "cam.jsonl")
	m := marker(t)

	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	if _, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "table"}); env["success"] != true {
		t.Fatalf("robot before the fill: %v", env)
	}
	if _, env := call(t, cs, "cam__navigate_to", map[string]any{"target": "shelf"}); env["success"] != true {
		t.Fatalf("cam before the fill: %v", env)
	}

	// A physical call in flight: it was journaled while there was space, and hangs past robot's
	// 5 s deadline. (A long `wait` would not do: its timeout_sec extends the deadline.)
	type answer struct {
		env map[string]any
		err error
		at  time.Time
	}
	hung := make(chan answer, 1)
	hangStart := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__fault", Arguments: map[string]any{"mode": "hang"}})
		a := answer{err: err, at: time.Now()}
		if err == nil {
			a.env, _ = res.StructuredContent.(map[string]any)
		}
		hung <- a
	}()
	waitFor(t, 10*time.Second, "the robot to receive the hanging call", func() bool {
		acts := robotActions(t, robotRec)
		return len(acts) == 2 && acts[1].Tool == "fault"
	})

	fillDisk(t, filepath.Join(stateDir, "fill"))
	robotBefore, camBefore := len(robotActions(t, robotRec)), len(robotActions(t, camRec))

	// The gateway notices: /readyz names the state file, the gauge drops.
	if !pollFor(diskFullBound, func() bool {
		code, body := getAny(t, "http://"+addr+"/readyz")
		return code == 503 && strings.Contains(body, "state file")
	}) {
		_, body := getAny(t, "http://"+addr+"/readyz")
		t.Errorf("with the state dir full, /readyz must be 503 and name the state file within %s: %s", diskFullBound, body)
	}
	if !pollFor(diskFullBound, func() bool { return auditAvailable(t, addr) == "0" }) {
		t.Errorf("with the state dir full: mcp_gateway_audit_available is %s, want 0", auditAvailable(t, addr))
	}

	// New calls are refused before dispatch, within the bound, saying what failed and that
	// nothing was sent.
	big := "far-" + strings.Repeat("x", 32<<10)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"cam__get_scene", map[string]any{}},
		{"cam__navigate_to", map[string]any{"target": "counter"}},
		{"robot__navigate_to", map[string]any{"target": big}},
		{"robot__navigate_to", map[string]any{"target": "home"}},
	} {
		start := time.Now()
		res, env := call(t, cs, c.tool, c.args)
		took := time.Since(start)
		reason, _ := env["reason"].(string)
		switch {
		case took > diskFullBound:
			t.Errorf("%s with the disk full took %s, want at most %s", c.tool, took.Round(time.Millisecond), diskFullBound)
		case !res.IsError || env["success"] != false:
			t.Errorf("%s with the disk full must be refused: %s", c.tool, short(mustJSON(res)))
		case env["kind"] == "audit_unavailable":
			if !saysWhatFailed.MatchString(reason) || !saysNothingSent.MatchString(reason) {
				t.Errorf("%s: the refusal must say what failed and that nothing was sent: %q", c.tool, reason)
			}
		case strings.HasPrefix(c.tool, "robot__") && env["kind"] == "mcp_execution_status_unknown":
			// The hanging call has already locked robot out; that refusal is right too.
		default:
			t.Errorf("%s with the disk full: kind %v, want audit_unavailable: %s", c.tool, env["kind"], short(reason))
		}
	}

	// The call in flight times out while the disk is full: it locks out and answers at once.
	limit := hangStart.Add(hangDeadline + diskFullBound)
	var a answer
	select {
	case a = <-hung: // it answered already
	default:
		select {
		case a = <-hung:
		case <-time.After(time.Until(limit)):
		}
	}
	if a.at.IsZero() {
		t.Errorf("the hanging physical call did not answer within %s of its %s deadline while the disk was full", diskFullBound, hangDeadline)
		removeFill(t, stateDir)
		a = <-hung
		t.Fatalf("it answered %s after its start, once the disk had space again: %v %v", a.at.Sub(hangStart).Round(time.Millisecond), a.err, a.env)
	}
	if a.at.After(limit) {
		t.Errorf("the hanging physical call answered %s after its start, more than %s after its %s deadline", a.at.Sub(hangStart).Round(time.Millisecond), diskFullBound, hangDeadline)
	}
	if a.err != nil || a.env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("the timed-out physical call: want mcp_execution_status_unknown, got %v %v", a.err, a.env)
	}
	t.Logf("the hanging call answered %s after its start (deadline %s)", a.at.Sub(hangStart).Round(time.Millisecond), hangDeadline)

	// The lockout holds in memory: status (through the running gateway) shows it, and physical
	// calls are refused.
	st := statusJSON(t, cfg)
	lock := lockoutOf(st, "robot")
	if lock == nil || lock.Tool != "robot__fault" || lock.CallID == "" {
		t.Fatalf("status with the disk full must show robot's lockout by its robot__fault call: %+v", st.Lockouts)
	}
	held := *lock
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); !res.IsError || (env["kind"] != "mcp_execution_status_unknown" && env["kind"] != "audit_unavailable") {
		t.Errorf("a physical call while robot is locked out and the disk full: %s", short(mustJSON(res)))
	}
	if code, body := getAny(t, "http://"+addr+"/readyz"); code != 503 || !strings.Contains(body, "state file") {
		t.Errorf("/readyz while the disk is still full: %d %s", code, body)
	}
	if got := auditAvailable(t, addr); got != "0" {
		t.Errorf("while the disk is still full: mcp_gateway_audit_available is %s, want 0", got)
	}
	// The witnesses: nothing of the above reached either robot.
	if got := robotActions(t, robotRec)[robotBefore:]; len(got) != 0 {
		t.Errorf("refused calls reached robot while the disk was full: %s", short(mustJSON(got)))
	}
	if got := robotActions(t, camRec)[camBefore:]; len(got) != 0 {
		t.Errorf("refused calls reached cam while the disk was full: %s", short(mustJSON(got)))
	}

	// Space is back: without a restart, non-physical and refused calls work again ...
	removeFill(t, stateDir)
	if !pollFor(diskFullBound, func() bool {
		_, env := call(t, cs, "cam__get_scene", map[string]any{})
		return env["success"] == true
	}) {
		t.Errorf("cam__get_scene still fails %s after the fill was removed", diskFullBound)
	}
	if res, env := call(t, cs, "robot__teleport", map[string]any{}); !res.IsError || env["kind"] != "unknown_tool" {
		t.Errorf("an unknown tool after the fill was removed: %s", short(mustJSON(res)))
	}
	if !pollFor(diskFullBound, func() bool { code, _ := getAny(t, "http://"+addr+"/readyz"); return code == 200 }) {
		_, body := getAny(t, "http://"+addr+"/readyz")
		t.Errorf("/readyz after the fill was removed: %s", body)
	}
	if !pollFor(diskFullBound, func() bool { return auditAvailable(t, addr) == "1" }) {
		t.Errorf("after the fill was removed: mcp_gateway_audit_available is %s, want 1", auditAvailable(t, addr))
	}
	// ... and robot stays locked out.
	assertLockedOut(t, cs, "robot__navigate_to", "robot", held.CallID)

	// The lockout is on disk: the stopped gateway's state file has it, as the running gateway
	// held it (the timeout's reason, not just the crash journal's entry for the call).
	gw.kill9(t)
	waitNoProcesses(t, m, 15*time.Second)
	st = statusJSON(t, cfg)
	if l := lockoutOf(st, "robot"); l == nil || l.CallID != held.CallID || l.Reason != held.Reason {
		t.Errorf("after kill -9 the state file must hold robot's lockout %+v; it has %+v", held, st.Lockouts)
	}
	recs := auditJSONL(t, "-c", cfg)
	if findRecord(recs, func(r auditRecord) bool { return r.CallID == held.CallID && r.Type == "call" }) == nil {
		t.Errorf("the timed-out call %s has no audit record", held.CallID)
	}
	if findRecord(recs, func(r auditRecord) bool { return r.CallID == held.CallID && r.Type == "lockout" }) == nil {
		t.Errorf("the lockout by call %s has no audit record", held.CallID)
	}
	if out, errOut, code := cli(t, "audit", "verify", "-c", cfg); code != 0 {
		t.Errorf("audit verify after the disk was full: exit %d\n%s%s", code, out, errOut)
	}

	// After a restart robot is still locked out; once unlocked, physical calls work.
	startGateway(t, cfg, addr)
	cs = connectHTTP(t, addr, nil)
	assertLockedOut(t, cs, "robot__navigate_to", "robot", held.CallID)
	cliOK(t, "unlock", "robot", "--reason", "disk full test: robot inspected", "-c", cfg)
	if !pollFor(diskFullBound, func() bool { code, _ := getAny(t, "http://"+addr+"/readyz"); return code == 200 }) {
		t.Fatalf("robot did not come back after the unlock")
	}
	if _, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "counter"}); env["success"] != true {
		t.Errorf("robot after the unlock: %v", env)
	}
	if got := robotActions(t, robotRec)[robotBefore:]; len(got) != 1 || argKey(got[0].Args) != "target=counter" {
		t.Errorf("robot's record after the unlock: %s", short(mustJSON(got)))
	}
}

// mountTmpfs mounts a tmpfs of size at dir, and unmounts it when the test ends (lazily if it is
// still busy). Without the right to mount, the test is skipped.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("this test mounts a %s tmpfs for the state dir and may not here (%v): run it as root (CI does)", size, err)
		}
		t.Fatalf("mount -t tmpfs -o size=%s tmpfs %s: %v", size, dir, err)
	}
	// Registered before any gateway starts, so it runs after they are stopped.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
}

// fillDisk writes path until the filesystem has no space left, and returns the bytes written.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{64 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("filling %s: %v", path, err)
			}
		}
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &fs); err != nil {
		t.Fatal(err)
	}
	t.Logf("filled the state dir's filesystem with %d bytes; %d bytes free", n, fs.Bavail*uint64(fs.Bsize))
	return n
}

func removeFill(t *testing.T, stateDir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(stateDir, "fill")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// getAny fetches url and returns its status and body, whatever the status.
func getAny(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// auditAvailable is the value of the mcp_gateway_audit_available gauge, or "missing".
func auditAvailable(t *testing.T, addr string) string {
	t.Helper()
	v, ok := scrape(t, addr).value("mcp_gateway_audit_available")
	if !ok {
		return "missing"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// short cuts s for a failure message.
func short(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
