package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// runCLI runs the command line args as main does and returns what it printed and its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// writeTestConfig writes a config of one physical server named robot (and arm) into dir, its
// state_dir inside dir, and returns its path.
func writeTestConfig(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	yaml := "gateway: {name: " + strings.TrimSuffix(name, ".yaml") + ", state_dir: state, listen: \"\"}\n" +
		"servers:\n" +
		"  - {name: robot, command: /bin/true, physical: true}\n" +
		"  - {name: arm, command: /bin/true, physical: true}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Help is asked for, so it goes to stdout and exits 0, for the whole CLI and for each command.
func TestHelpGoesToStdoutAndExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{}, {"help"}, {"-h"}, {"--help"},
		{"status", "--help"}, {"status", "-h"}, {"help", "status"},
		{"audit", "verify", "--help"}, {"help", "audit", "export"}, {"approvals", "--help"}, {"connect", "-h"},
	} {
		stdout, stderr, code := runCLI(t, args...)
		if code != 0 || stderr != "" || !strings.Contains(stdout, "Usage: mcp-gateway") {
			t.Errorf("mcp-gateway %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
	stdout, _, _ := runCLI(t, "help", "lock")
	for _, want := range []string{"Usage: mcp-gateway lock SERVER", "-c, --config FILE", "-o, --output FORMAT", "--reason", "$MCP_GATEWAY_CONFIG"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lock does not show %q:\n%s", want, stdout)
		}
	}
}

// A flag the command does not have is reported once, with the flag it most likely meant, and
// nothing goes to stdout.
func TestUnknownFlagIsReportedOnce(t *testing.T) {
	cfg := writeTestConfig(t, t.TempDir(), "cell.yaml")
	stdout, stderr, code := runCLI(t, "status", "--jsn", "-c", cfg)
	if code != 2 || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	if n := strings.Count(stderr, "--jsn"); n != 1 || !strings.Contains(stderr, "unknown flag --jsn (did you mean --json?)") ||
		strings.Contains(stderr, "flag provided but not defined") || strings.Count(stderr, "Usage:") != 1 {
		t.Errorf("stderr names the flag %d times:\n%s", n, stderr)
	}
}

// A mistyped command, server, record type or kind gets the name it most likely meant, as the
// config loader gives for keys.
func TestDidYouMean(t *testing.T) {
	cfg := writeTestConfig(t, t.TempDir(), "cell.yaml")
	if _, _, code := runCLI(t, "halt", "--reason", "make a state file", "-c", cfg, "-o", "json"); code != 0 {
		t.Fatalf("halt on the state file: exit %d", code)
	}
	st, err := store.Open(filepath.Join(filepath.Dir(cfg), "state"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutPin(store.Pin{Server: "robot", Tool: "move", Digest: "d1"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stauts"}, 2, `unknown command "stauts" (did you mean "status"?)`},
		{[]string{"unlock", "robto", "--reason", "r", "-c", cfg}, 1, `server robto is not locked out; nothing to unlock (did you mean "robot"?); locked out: arm, robot`},
		{[]string{"lock", "robto", "--reason", "r", "-c", cfg}, 1, `did you mean "robot"?`},
		{[]string{"pins", "accept", "robto", "-c", cfg}, 1, `has no server named "robto" (did you mean "robot"?)`},
		{[]string{"pins", "accept", "robot/mvoe", "-c", cfg}, 1, `(did you mean "move"?)`},
		{[]string{"-c", cfg, "status"}, 2, `-c is a flag; the command comes first`},
		{[]string{"audit", "--type", "calls", "-c", cfg}, 2, `--type "calls" is not a record type (did you mean "call"?)`},
		{[]string{"audit", "--kind", "unkown_tool", "-c", cfg}, 0, `"unkown_tool" is none of the gateway's failure kinds (did you mean "unknown_tool"?)`},
		{[]string{"audit", "--server", "robto", "-c", cfg}, 0, `has no server named "robto" (did you mean "robot"?)`},
	} {
		_, stderr, code := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("mcp-gateway %v: exit %d, want %d; stderr does not say %q:\n%s", tt.args, code, tt.code, tt.want, stderr)
		}
	}
}

// A required flag or argument that is missing is named (exit 2).
func TestMissingRequiredFlagIsNamed(t *testing.T) {
	cfg := writeTestConfig(t, t.TempDir(), "cell.yaml")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "robot", "-c", cfg}, "lock needs --reason"},
		{[]string{"unlock", "-c", cfg, "--reason", "r"}, "unlock needs exactly one SERVER"},
		{[]string{"halt", "-c", cfg}, "halt needs --reason"},
		{[]string{"agent", "-c", cfg}, "agent needs exactly one of --task and --task-file"},
		{[]string{"policy", "test", "-c", cfg}, "policy test needs a TESTFILE"},
		{[]string{"connect"}, "give the URL"},
	} {
		stdout, stderr, code := runCLI(t, tt.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("mcp-gateway %v: exit %d, stdout %q; stderr does not say %q:\n%s", tt.args, code, stdout, tt.want, stderr)
		}
	}
}

// -o takes table, json or jsonl and refuses anything else naming them; --json is -o json, and
// audit's --jsonl is -o jsonl.
func TestOutputFormats(t *testing.T) {
	cfg := writeTestConfig(t, t.TempDir(), "cell.yaml")
	_, stderr, code := runCLI(t, "status", "-c", cfg, "-o", "yaml")
	if code != 2 || !strings.Contains(stderr, `invalid value "yaml" for -o: must be one of table, json, jsonl`) {
		t.Errorf("-o yaml: exit %d\n%s", code, stderr)
	}
	// No gateway has run: status says so in every format, and exits 5.
	for _, args := range [][]string{{"-o", "json"}, {"--json"}, {"--output", "json"}, {"-o", "jsonl"}, {"-o", "table"}} {
		stdout, stderr, code := runCLI(t, append([]string{"status", "-c", cfg}, args...)...)
		if code != statusStopped {
			t.Errorf("status %v: exit %d, want %d\n%s", args, code, statusStopped, stderr)
		}
		if args[len(args)-1] == "table" {
			if !strings.Contains(stdout, "not running") {
				t.Errorf("status %v:\n%s", args, stdout)
			}
			continue
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep["running"] != false || rep["gateway"] != "cell" {
			t.Errorf("status %v: %v\n%s", args, err, stdout)
		}
		if lines := strings.Count(strings.TrimSpace(stdout), "\n"); (args[len(args)-1] == "jsonl") != (lines == 0) {
			t.Errorf("status %v printed %d lines:\n%s", args, lines+1, stdout)
		}
	}
	if _, _, code := runCLI(t, "halt", "--reason", "a person is in the cell", "-c", cfg, "-o", "json"); code != 0 {
		t.Fatalf("halt: exit %d", code)
	}
	for _, args := range [][]string{{"-o", "jsonl"}, {"--jsonl"}} {
		stdout, stderr, code := runCLI(t, append([]string{"audit", "-c", cfg}, args...)...)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != 0 || len(lines) != 2 {
			t.Fatalf("audit %v: exit %d, %d lines\n%s%s", args, code, len(lines), stdout, stderr)
		}
		for _, l := range lines {
			var r map[string]any
			if err := json.Unmarshal([]byte(l), &r); err != nil || r["action"] != "halt" || r["seq"] == nil || r["hash"] == nil {
				t.Errorf("audit %v line: %v\n%s", args, err, l)
			}
		}
	}
	stdout, _, code := runCLI(t, "audit", "-c", cfg, "-o", "json")
	var recs []map[string]any
	if err := json.Unmarshal([]byte(stdout), &recs); err != nil || code != 0 || len(recs) != 2 {
		t.Errorf("audit -o json: exit %d, %v\n%s", code, err, stdout)
	}
	stdout, _, code = runCLI(t, "status", "-c", cfg, "-o", "json")
	var st statusReport
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != statusLocked || len(st.Lockouts) != 2 || !st.Halted ||
		st.Lockouts[0].Kind != "halt" || !strings.Contains(stdout, `"by": `) {
		t.Errorf("status after a halt: exit %d, %v\n%s", code, err, stdout)
	}
}

// status exits with the first code that applies: locked or halted, a server down, no gateway.
func TestStatusCode(t *testing.T) {
	ready := gateway.UpstreamStatus{Name: "robot", State: "ready"}
	starting := gateway.UpstreamStatus{Name: "arm", State: "starting"}
	lockout := gateway.LockoutStatus{}
	for _, tt := range []struct {
		name string
		rep  statusReport
		want int
	}{
		{"all ready", statusReport{Running: true, Status: gateway.Status{Upstreams: []gateway.UpstreamStatus{ready}}}, 0},
		{"a server starting", statusReport{Running: true, Status: gateway.Status{Upstreams: []gateway.UpstreamStatus{ready, starting}}}, statusDown},
		{"locked out and down", statusReport{Running: true, Status: gateway.Status{Upstreams: []gateway.UpstreamStatus{starting}, Lockouts: []gateway.LockoutStatus{lockout}}}, statusLocked},
		{"halted", statusReport{Running: true, Status: gateway.Status{Halted: true}}, statusLocked},
		{"not running", statusReport{}, statusStopped},
		{"not running, locked in the state file", statusReport{Status: gateway.Status{Lockouts: []gateway.LockoutStatus{lockout}}}, statusLocked},
	} {
		if got := statusCode(tt.rep); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// version and --version print the version, the commit, its time and the build date.
func TestVersionFields(t *testing.T) {
	commit, commitTime, modified, buildDate = "0123456789abcdef", "2026-11-30T08:00:00Z", "true", "2026-12-01T09:00:00Z"
	t.Cleanup(func() { commit, commitTime, modified, buildDate = "", "", "", "" })
	for _, args := range [][]string{{"version", "-o", "json"}, {"--version", "--json"}} {
		stdout, _, code := runCLI(t, args...)
		var v versionInfo
		if err := json.Unmarshal([]byte(stdout), &v); err != nil || code != 0 {
			t.Fatalf("%v: exit %d, %v\n%s", args, code, err, stdout)
		}
		if v.Version != gateway.Version || v.Commit != commit || v.CommitTime != commitTime || !v.Modified || v.BuildDate != buildDate || v.Go == "" {
			t.Errorf("%v = %+v", args, v)
		}
	}
	stdout, _, code := runCLI(t, "version")
	for _, want := range []string{"mcp-gateway " + gateway.Version, "commit:     0123456789abcdef (with uncommitted changes)", "built:      2026-12-01T09:00:00Z"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("version does not say %q:\n%s", want, stdout)
		}
	}
}

// The config is -c or --config, else $MCP_GATEWAY_CONFIG, else ./mcp-gateway.yaml; without any,
// the error names all three. Commands printed for a person name the one found, absolute.
func TestConfigDiscoveryOrder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fromFlag := writeTestConfig(t, dir, "flag.yaml")
	fromEnv := writeTestConfig(t, dir, "env.yaml")
	checked := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := runCLI(t, append([]string{"check", "-o", "json"}, args...)...)
		var rep checkReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || !rep.OK {
			t.Fatalf("check %v: exit %d, %v\n%s%s", args, code, err, stdout, stderr)
		}
		return filepath.Base(rep.File)
	}

	t.Setenv(configEnv, "")
	_, stderr, code := runCLI(t, "status")
	if code != 2 || !strings.Contains(stderr, "give -c FILE (or --config FILE), set $MCP_GATEWAY_CONFIG, or put mcp-gateway.yaml in the working directory") {
		t.Errorf("without a config: exit %d\n%s", code, stderr)
	}
	writeTestConfig(t, dir, defaultConfigFile)
	if got := checked(); got != defaultConfigFile {
		t.Errorf("with only ./%s, check read %s", defaultConfigFile, got)
	}
	want, _ := filepath.Abs(defaultConfigFile)
	if cmd := pastable.Command("status"); !strings.HasSuffix(cmd, "status -c "+want) {
		t.Errorf("a printed command names %q, want the config found, %s", cmd, want)
	}
	t.Setenv(configEnv, fromEnv)
	if got := checked(); got != "env.yaml" {
		t.Errorf("with $%s, check read %s", configEnv, got)
	}
	if got := checked("-c", fromFlag); got != "flag.yaml" {
		t.Errorf("with -c, check read %s", got)
	}
	if got := checked("--config", fromFlag); got != "flag.yaml" {
		t.Errorf("with --config, check read %s", got)
	}
	t.Setenv(configEnv, filepath.Join(dir, "missing.yaml"))
	if _, stderr, code := runCLI(t, "status"); code != 1 || !strings.Contains(stderr, "named by $MCP_GATEWAY_CONFIG, does not exist") {
		t.Errorf("$%s naming no file: exit %d\n%s", configEnv, code, stderr)
	}
}

// check -o json has the problems, warnings and notes, the summary and the stop and inspection
// tools; a config with a problem exits 1 with ok false.
func TestCheckJSON(t *testing.T) {
	dir := t.TempDir()
	good := writeTestConfig(t, dir, "good.yaml")
	stdout, _, code := runCLI(t, "check", "-c", good, "-o", "json")
	var rep checkReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || !rep.OK || *rep.Servers != 2 || rep.Problems == nil || rep.StopTools == nil {
		t.Errorf("good config: exit %d, %v\n%s", code, err, stdout)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("gateway: {lisen: x}\nservers: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCLI(t, "check", "-c", bad, "-o", "json")
	rep = checkReport{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 || rep.OK || len(rep.Problems) == 0 ||
		!strings.Contains(rep.Problems[0], `bad.yaml:1:`) || !strings.Contains(stdout, `did you mean \"listen\"`) || stderr != "" {
		t.Errorf("bad config: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if strings.Contains(stdout, `"servers"`) {
		t.Errorf("a config that did not load has a summary:\n%s", stdout)
	}
}
