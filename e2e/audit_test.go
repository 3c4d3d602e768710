package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// secretValue is an argument value under a key audit.redact_keys catches by default.
const secretValue = "hunter2-SECRET-VALUE"

func TestAuditRecordsEveryCallAndDetectsTampering(t *testing.T) {
	files := t.TempDir()
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true`+
		schemaServer(t, "schema", "", filepath.Join(files, "ref.json"), ""))
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	login := map[string]any{"user": "op", "password": secretValue, "options": map[string]any{"API_Token": secretValue + "-2", "retries": 3}}
	for _, c := range []struct {
		tool, outcome string
		args          map[string]any
	}{
		{"robot__does_not_exist", "unknown_tool", map[string]any{}},
		{"robot__navigate_to", "invalid_tool_arguments", map[string]any{"target": 7}},
		{"robot__navigate_to", "invalid_tool_arguments", map[string]any{"target": "table", "password": secretValue}},
		{"robot__get_scene", "ok", map[string]any{}},
		{"robot__pick_object", "tool_failure", map[string]any{"object": "sponge"}}, // not at the shelf
		{"schema__login", "ok", login},
	} {
		res, env := call(t, cs, c.tool, c.args)
		if got := outcomeOf(res.IsError, env); got != c.outcome {
			t.Fatalf("%s: outcome %s, want %s: %s", c.tool, got, c.outcome, mustJSON(res))
		}
	}

	// Through the running gateway: one record per call, refused or not.
	recs := auditJSONL(t, "-c", cfg)
	if len(recs) != 6 {
		t.Fatalf("want 6 records, got %d:\n%s", len(recs), mustJSON(recs))
	}
	wantOutcomes := []string{"unknown_tool", "invalid_tool_arguments", "invalid_tool_arguments", "ok", "tool_failure", "ok"}
	for i, r := range recs {
		if r.Type != "call" || r.Outcome != wantOutcomes[i] || r.Seq != uint64(i+1) || r.CallID == "" || r.Hash == "" {
			t.Errorf("record %d: %+v, want outcome %s", i+1, r, wantOutcomes[i])
		}
	}
	if recs[0].Kind != "unknown_tool" || recs[1].Kind != "invalid_tool_arguments" || recs[1].Decision != "refused" || recs[3].Decision != "allow:default" {
		t.Errorf("kinds and decisions: %s", mustJSON(recs))
	}
	if recs[4].RunID == "" {
		t.Errorf("a physical call's run_id is not recorded: %+v", recs[4])
	}
	rec := recs[5]
	original, _ := json.Marshal(login)
	sum := sha256.Sum256(original)
	var args map[string]any
	if err := json.Unmarshal(rec.Args, &args); err != nil {
		t.Fatalf("login args: %v: %s", err, rec.Args)
	}
	opts, _ := args["options"].(map[string]any)
	if args["password"] != "[REDACTED]" || args["user"] != "op" || opts["API_Token"] != "[REDACTED]" || opts["retries"] != 3.0 {
		t.Errorf("login args must be kept with only the secrets redacted: %s", rec.Args)
	}
	// A keyed digest: the plain SHA-256 would let anyone holding the record try every value of
	// the redacted password. The operator computes it with the state file's key.
	if rec.ArgsDigest == hex.EncodeToString(sum[:]) {
		t.Errorf("ArgsDigest is the plain SHA-256 of the arguments: a redacted value can be guessed from it")
	}
	if got := auditDigest(t, cfg, original); got != rec.ArgsDigest {
		t.Errorf("audit digest through the running gateway = %q, the record holds %q", got, rec.ArgsDigest)
	}

	// Filters, through the admin API.
	if recs := auditJSONL(t, "-c", cfg, "--kind", "invalid_tool_arguments"); len(recs) != 2 {
		t.Errorf("--kind: %s", mustJSON(recs))
	}
	if recs := auditJSONL(t, "-c", cfg, "--tool", "robot__get_scene", "--since", "1h"); len(recs) != 1 || recs[0].Tool != "robot__get_scene" {
		t.Errorf("--tool --since: %s", mustJSON(recs))
	}
	if recs := auditJSONL(t, "-c", cfg, "--server", "schema"); len(recs) != 1 {
		t.Errorf("--server: %s", mustJSON(recs))
	}
	if recs := auditJSONL(t, "-c", cfg, "--since", "2099-01-01T00:00:00Z"); len(recs) != 0 {
		t.Errorf("--since in the future: %s", mustJSON(recs))
	}
	table, _ := cliOK(t, "audit", "-c", cfg, "--limit", "2")
	if rows := strings.Split(strings.TrimSpace(table), "\n"); len(rows) != 3 || !strings.HasPrefix(rows[0], "TIME") ||
		!strings.Contains(rows[1], "robot__pick_object") || !strings.Contains(rows[2], "schema__login") {
		t.Errorf("audit --limit 2 must be a header and the last two records:\n%s", table)
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); out != "audit log intact: 6 records\n" {
		t.Errorf("audit verify through the gateway: %q", out)
	}

	cs.Close()
	gw.stop(t)
	if got := auditDigest(t, cfg, original); got != rec.ArgsDigest {
		t.Errorf("audit digest on the state file = %q, the record holds %q", got, rec.ArgsDigest)
	}
	if strings.Contains(gw.stderr.String(), secretValue) {
		t.Errorf("the gateway's log holds a redacted argument value")
	}
	stateDir := filepath.Join(cfgDir(cfg), ".mcp-gateway")
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if b := []byte(readFile(t, filepath.Join(stateDir, e.Name()))); bytes.Contains(b, []byte(secretValue)) || bytes.Contains(b, []byte("hunter2")) {
			t.Errorf("%s holds a redacted argument value", e.Name())
		}
	}

	// Directly on the file of the stopped gateway: the same records, and an intact chain.
	if again := auditJSONL(t, "-c", cfg); mustJSON(again) != mustJSON(recs) {
		t.Errorf("the file and the admin API disagree:\n%s\n%s", mustJSON(again), mustJSON(recs))
	}
	table, _ = cliOK(t, "audit", "-c", cfg, "--kind", "unknown_tool")
	if !strings.Contains(table, "robot__does_not_exist") || strings.Contains(table, "robot__get_scene") {
		t.Errorf("audit --kind unknown_tool:\n%s", table)
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); out != "audit log intact: 6 records\n" {
		t.Errorf("audit verify on the file: %q", out)
	}

	// One flipped byte in the middle record's stored JSON: verify names that record.
	const seq = 3
	flipByte(t, filepath.Join(stateDir, "state.db"), seq, `"tool":"robot__navigate_to"`)
	out, _, code := cli(t, "audit", "verify", "-c", cfg)
	if code != 1 || !strings.HasPrefix(out, "audit log broken at record "+strconv.Itoa(seq)+": ") || !strings.Contains(out, "changed") {
		t.Errorf("audit verify after a flipped byte in record %d: exit %d: %s", seq, code, out)
	}
}

// flipByte changes one bit of one letter inside the stored JSON of audit record seq, right after
// the text at, leaving it valid JSON: only the hash chain can tell.
func flipByte(t *testing.T, stateFile string, seq uint64, at string) {
	t.Helper()
	db, err := bolt.Open(stateFile, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		if b == nil {
			t.Fatal("no audit bucket")
		}
		key := binary.BigEndian.AppendUint64(nil, seq)
		value := bytes.Clone(b.Get(key))
		i := bytes.Index(value, []byte(at))
		if i < 0 {
			t.Fatalf("record %d does not hold %s: %s", seq, at, value)
		}
		value[i+len(at)-2] ^= 0x01 // the last letter of the value: "navigate_to" → "navigate_tn"
		if !json.Valid(value) {
			t.Fatalf("the flipped record is no longer JSON: %s", value)
		}
		return b.Put(key, value)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// outcomeOf reads a call's outcome as the audit log labels it.
func outcomeOf(isError bool, env map[string]any) string {
	switch {
	case env["kind"] != nil:
		return env["kind"].(string)
	case env["success"] == true && !isError:
		return "ok"
	}
	return "tool_failure"
}

// auditDigest runs `mcp-gateway audit digest -c cfg` with args on stdin.
func auditDigest(t *testing.T, cfg string, args []byte) string {
	t.Helper()
	cmd := exec.Command(gatewayBin, "audit", "digest", "-c", cfg)
	cmd.Stdin = bytes.NewReader(args)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("audit digest: %v", err)
	}
	return strings.TrimSpace(string(out))
}
