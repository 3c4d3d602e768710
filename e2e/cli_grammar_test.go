package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// status exits 0 while all is well, 3 while a lockout or a halt is in force, 4 while a server is
// not ready and 5 when no gateway runs, in every output format: what a script or a monitor acts
// on (docs/cli.md).
func TestStatusExitCodes(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
`)
	gw := startGateway(t, cfg, addr)
	for _, format := range []string{"table", "json", "jsonl"} {
		statusCLI(t, 0, "-c", cfg, "-o", format)
	}
	cliOK(t, "lock", "robot", "--reason", "a person is in the cell", "-c", cfg)
	for _, format := range []string{"table", "json", "jsonl"} {
		statusCLI(t, statusLocked, "-c", cfg, "-o", format)
	}
	out, _ := cliOK(t, "unlock", "robot", "--reason", "the cell is clear", "-c", cfg, "-o", "json")
	var unlocked struct {
		Running     bool     `json:"running"`
		Restarted   bool     `json:"restarted"`
		StillLocked []string `json:"still_locked"`
		Cleared     struct {
			Server string `json:"server"`
			Kind   string `json:"kind"`
			By     string `json:"by"`
		} `json:"cleared"`
	}
	if err := json.Unmarshal([]byte(out), &unlocked); err != nil || !unlocked.Running || !unlocked.Restarted || unlocked.StillLocked == nil ||
		unlocked.Cleared.Server != "robot" || unlocked.Cleared.Kind != "operator" || unlocked.Cleared.By == "" {
		t.Errorf("unlock -o json: %v\n%s", err, out)
	}
	statusCLI(t, 0, "-c", cfg)
	gw.stop(t)
	if out := statusCLI(t, statusStopped, "-c", cfg); !strings.Contains(out, "not running") {
		t.Errorf("status of a stopped gateway:\n%s", out)
	}

	// A server that does not start: the gateway serves the others, and status says 4.
	down, downAddr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
  - name: broken
    command: "{{sim}}"
    args: ["-name", "{{marker}}-broken", "-no-such-flag"]
    startup_timeout_sec: 1
`)
	startGatewayNoWait(t, down, downAddr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, code := cli(t, "status", "-c", down)
		if code == statusDown {
			if !strings.Contains(out, "broken") {
				t.Errorf("status with a server down does not name it:\n%s", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status with a server that does not start: exit %d, want %d\n%s%s", code, statusDown, out, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// oldAuditRecord is an audit record as mcp-gateway stored it before its JSON names were
// snake_case: the Go field names, every field present but Detail.
type oldAuditRecord struct {
	Seq        uint64
	Time       time.Time
	Type       string
	Principal  string
	Session    string
	Server     string
	Tool       string
	CallID     string
	Args       json.RawMessage
	ArgsDigest string
	Decision   string
	Kind       string
	Outcome    string
	Reason     string
	RunID      string
	DurationMS float64
	Action     string
	Detail     map[string]any `json:",omitempty"`
	Prev       string
	Hash       string
}

// rehashes reports whether an exported line is its own proof: the SHA-256 of the line with the
// 64 hex digits of its hash taken out is that hash.
func rehashes(line string) bool {
	m := regexp.MustCompile(`,"(?:hash|Hash)":"([0-9a-f]{64})"}$`).FindStringSubmatchIndex(line)
	if m == nil {
		return false
	}
	sum := sha256.Sum256([]byte(line[:m[2]] + line[m[3]:]))
	return hex.EncodeToString(sum[:]) == line[m[2]:m[3]]
}

// A state file an earlier mcp-gateway wrote, with Go field names, works as it did: its lockout
// holds, new records chain on to its records, `audit -o jsonl` prints every record snake_case,
// `audit verify` passes on the mixed log through the running gateway and on the file, and an
// export, through the gateway or from the file, has every record as stored, each line re-hashing.
func TestStateFileWrittenWithGoFieldNames(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"]
`)
	stateDir := filepath.Join(cfgDir(cfg), ".mcp-gateway")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(stateDir, "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	old := []oldAuditRecord{
		{Seq: 1, Time: at, Type: "call", Principal: "planner", Session: "s1", Server: "robot", Tool: "robot__navigate_to", CallID: "old-call-1",
			Args: json.RawMessage(`{"target":"table"}`), ArgsDigest: "d1", Decision: "allow:default", Outcome: "ok", RunID: "run-1", DurationMS: 812.5},
		{Seq: 2, Time: at.Add(time.Second), Type: "lockout", Server: "robot", Tool: "robot__navigate_to", CallID: "old-call-2",
			Kind: "mcp_execution_status_unknown", Reason: "the call timed out", Detail: map[string]any{"deadline_ms": 1000.0}},
	}
	lockout := `{"Server":"robot","Tool":"robot__navigate_to","CallID":"old-call-2","Principal":"planner","Session":"s1",` +
		`"Reason":"the call timed out","At":"` + at.Add(time.Second).Format(time.RFC3339Nano) + `"}`
	var stored []string
	err = db.Update(func(tx *bolt.Tx) error {
		audit, err := tx.CreateBucketIfNotExists([]byte("audit"))
		if err != nil {
			return err
		}
		prev := ""
		for i := range old {
			r := &old[i]
			r.Prev, r.Hash = prev, ""
			canon, err := json.Marshal(r)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(canon)
			r.Hash = hex.EncodeToString(sum[:])
			value := string(canon[:len(canon)-2]) + r.Hash + `"}`
			stored, prev = append(stored, value), r.Hash
			if err := audit.Put(binary.BigEndian.AppendUint64(nil, r.Seq), []byte(value)); err != nil {
				return err
			}
		}
		lockouts, err := tx.CreateBucketIfNotExists([]byte("lockouts"))
		if err != nil {
			return err
		}
		return lockouts.Put([]byte("robot"), []byte(lockout))
	})
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		t.Fatal(err)
	}

	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); !res.IsError || env["kind"] != "mcp_execution_status_unknown" {
		t.Errorf("a call on the server the old lockout holds: %s", mustJSON(res))
	}
	if res, _ := call(t, cs, "cam__get_scene", map[string]any{}); res.IsError {
		t.Errorf("a call on another server: %s", mustJSON(res))
	}
	st := statusJSON(t, cfg)
	if len(st.Lockouts) != 1 || st.Lockouts[0].CallID != "old-call-2" || st.Lockouts[0].Reason != "the call timed out" {
		t.Errorf("status of the old lockout: %+v", st.Lockouts)
	}

	out, _ := cliOK(t, "audit", "-o", "jsonl", "-c", cfg)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("audit -o jsonl: %d records, want 2 old and 2 new:\n%s", len(lines), out)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for i, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		for k, v := range rec {
			if !snake.MatchString(k) || v == "" || v == "0001-01-01T00:00:00Z" {
				t.Errorf("record %d has %q: %v: %s", i+1, k, v, line)
			}
		}
	}
	recs := auditJSONL(t, "-c", cfg)
	if r := recs[0]; r.CallID != "old-call-1" || r.ArgsDigest != "d1" || r.RunID != "run-1" || r.Hash != old[0].Hash {
		t.Errorf("the old record read as %+v", r)
	}
	if r := recs[2]; r.Prev != old[1].Hash || r.Tool != "robot__get_scene" || r.CallID == "" {
		t.Errorf("the first new record does not chain on to the old ones: %+v", r)
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); !strings.HasPrefix(out, "audit log intact: 4 records") {
		t.Errorf("audit verify through the gateway: %s", out)
	}
	checkExport := func(via string) {
		t.Helper()
		out, _ := cliOK(t, "audit", "export", "-c", cfg)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || lines[0] != stored[0] || lines[1] != stored[1] {
			t.Fatalf("audit export %s: the old records are not as stored:\n%s", via, out)
		}
		for i, line := range lines {
			if !rehashes(line) {
				t.Errorf("audit export %s: line %d does not re-hash: %s", via, i+1, line)
			}
		}
		if !strings.Contains(lines[3], `"call_id":"`) || strings.Contains(lines[3], `"CallID"`) {
			t.Errorf("audit export %s: a new record is not snake_case: %s", via, lines[3])
		}
	}
	checkExport("through the gateway")
	cs.Close()
	gw.stop(t)
	checkExport("from the state file")
	out, _ = cliOK(t, "audit", "verify", "-c", cfg, "-o", "json")
	var verified struct {
		OK      bool   `json:"ok"`
		Checked uint64 `json:"checked"`
	}
	if err := json.Unmarshal([]byte(out), &verified); err != nil || !verified.OK || verified.Checked != 4 {
		t.Errorf("audit verify -o json on the state file: %v\n%s", err, out)
	}
	out, _ = cliOK(t, "unlock", "robot", "--reason", "inspected", "-c", cfg, "-o", "jsonl")
	if !strings.Contains(out, `"call_id":"old-call-2"`) || bytes.Count([]byte(out), []byte("\n")) != 1 {
		t.Errorf("unlock of the old lockout -o jsonl: %s", out)
	}
}

// version prints what the build recorded, and help goes to stdout with exit 0, from the real
// binary.
func TestVersionAndHelp(t *testing.T) {
	out, _ := cliOK(t, "version", "-o", "json")
	var v struct {
		Version string `json:"version"`
		Go      string `json:"go"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version -o json: %v\n%s", err, out)
	}
	if out, _ := cliOK(t, "--version"); !strings.HasPrefix(out, "mcp-gateway "+v.Version+"\n") || !strings.Contains(out, "commit:") {
		t.Errorf("--version:\n%s", out)
	}
	for _, args := range [][]string{{"help"}, {"status", "--help"}, {"help", "audit", "verify"}} {
		out, errOut := cliOK(t, args...)
		if errOut != "" || !strings.Contains(out, "Usage: mcp-gateway") {
			t.Errorf("%v: stdout:\n%s\nstderr:\n%s", args, out, errOut)
		}
	}
	if _, errOut, code := cli(t, "status", "--bogus"); code != 2 || strings.Count(errOut, "--bogus") != 1 {
		t.Errorf("an unknown flag: exit %d\n%s", code, errOut)
	}
}
