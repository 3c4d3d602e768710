package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// retentionConfig keeps about 64 KiB of audit records. robot is physical with a 1s deadline
// (for a lockout that must survive pruning and compacting); cam takes the bulk of the calls.
const retentionConfig = `
gateway:
  listen: "{{listen}}"
  lockout_scope: server
audit:
  max_value_bytes: 1024
  retention: {max_bytes: 65536}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    call_timeout_sec: 1
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"]
`

func TestRetentionBoundsTheStateFile(t *testing.T) {
	cfg, addr := writeConfig(t, retentionConfig)
	stateFile := filepath.Join(cfgDir(cfg), ".mcp-gateway", "state.db")
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	lockRobot(t, cs, cfg)

	// Many calls from four clients: about 2 MB of records without retention.
	const calls, clients = 3000, 4
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := range clients {
		c := connectHTTP(t, addr, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < calls; i += clients {
				res, err := c.CallTool(t.Context(), &mcp.CallToolParams{Name: "cam__navigate_to", Arguments: map[string]any{"target": "table"}})
				if err == nil && res.IsError {
					err = fmt.Errorf("call %d failed: %s", i, mustJSON(res))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("bulk calls: %v", err)
	}

	// A 1 MB argument that the robot also echoes into its error message.
	value := randomText(t, 1<<20)
	res, _ := call(t, cs, "cam__navigate_to", map[string]any{"target": value})
	if !res.IsError {
		t.Fatalf("an unknown 1 MB target must fail: %.300s", mustJSON(res))
	}

	// The pruner catches up within seconds; the chain verifies through the running gateway.
	var recs []auditRecord
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs = auditJSONL(t, "-c", cfg)
		if len(recs) > 0 && recs[0].Seq > calls/2 && len(recs) < 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d calls the audit log still holds %d records from %d; retention max_bytes 65536", calls, len(recs), recs[0].Seq)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if findRecord(recs, func(r auditRecord) bool { return r.Type == "checkpoint" && r.Detail["last_hash"] != nil }) == nil {
		t.Errorf("no checkpoint record among the kept records:\n%s", mustJSON(recs[:3]))
	}
	if out, _ := cliOK(t, "audit", "verify", "-c", cfg); !strings.Contains(out, "audit log intact") {
		t.Errorf("audit verify: %s", out)
	}
	info, err := os.Stat(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1].Seq
	if info.Size() > 1<<20 {
		t.Errorf("state.db is %d bytes after %d audit records with retention max_bytes 65536; want at most 1 MiB", info.Size(), last)
	}

	// The 1 MB value is stored as a 1 KiB prefix with its length and digest; the reason that
	// quoted it is cut to 2 KiB.
	big := findRecord(recs, func(r auditRecord) bool {
		return r.Tool == "cam__navigate_to" && bytes.Contains(r.Args, []byte("[truncated: "))
	})
	sum := sha256.Sum256([]byte(value))
	marker := "…[truncated: 1048576 bytes, sha256:" + hex.EncodeToString(sum[:]) + "]"
	switch {
	case big == nil:
		t.Fatalf("no record holds the cut 1 MB argument")
	case len(big.Args) > 2048 || !strings.Contains(string(big.Args), value[:1000]) || !strings.Contains(string(big.Args), marker):
		t.Errorf("the 1 MB argument is stored as %d bytes: %.300s…", len(big.Args), big.Args)
	case len(big.Reason) > 2300 || !strings.Contains(big.Reason, "[truncated: "):
		t.Errorf("the reason quoting the 1 MB value is stored with %d bytes", len(big.Reason))
	}
	raw, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(value[:200])) {
		t.Error("the kept prefix of the value is not in state.db: the search below would prove nothing")
	}
	for _, at := range []int{5000, 1 << 19, len(value) - 200} {
		if bytes.Contains(raw, []byte(value[at:at+200])) {
			t.Errorf("state.db holds the 1 MB value's bytes at offset %d", at)
		}
	}

	// Compact refuses while the gateway holds the file, and changes nothing.
	_, stderr, code := cli(t, "compact", "-c", cfg)
	if code != 1 || !strings.Contains(stderr, "stop the gateway") || !strings.Contains(stderr, "Nothing was changed") {
		t.Errorf("compact while the gateway runs: exit %d\n%s", code, stderr)
	}
	gw.stop(t)

	before, err := os.Stat(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := cliOK(t, "compact", "-c", cfg)
	after, err := os.Stat(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d calls: %d audit records kept (%d to %d); state.db %d bytes, %d after compact", calls, len(recs), recs[0].Seq, last, before.Size(), after.Size())
	// Compact never grows the file, and shrinks one that grew past bbolt's first allocation:
	// how far it grew depends on how fast pruning kept up (slower under the race detector).
	const firstAllocation = 256 << 10
	if after.Size() > before.Size() || (before.Size() > firstAllocation && after.Size() >= before.Size()) || !strings.Contains(out, "compacted") {
		t.Errorf("compact: %d -> %d bytes: %s", before.Size(), after.Size(), out)
	}
	out, _ = cliOK(t, "audit", "verify", "-c", cfg)
	if !strings.Contains(out, "audit log intact") || !strings.Contains(out, "were pruned by retention") {
		t.Errorf("audit verify after compact: %s", out)
	}
	if st := statusJSON(t, cfg); len(st.Lockouts) != 1 || st.Lockouts[0].Server != "robot" {
		t.Errorf("the lockout must survive pruning and compacting: %+v", st.Lockouts)
	}
	if got := auditJSONL(t, "-c", cfg); len(got) != len(recs) || got[len(got)-1].Seq != last {
		t.Errorf("compact changed the audit log: %d records to %d, want %d to %d", len(got), got[len(got)-1].Seq, len(recs), last)
	}

	// Export from the state file: every line is the stored record, whose hash still verifies.
	out, _ = cliOK(t, "audit", "export", "-c", cfg)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("audit export wrote %d lines, want %d", len(lines), len(recs))
	}
	for i, l := range lines {
		if h := hashOfLine(t, l); h != recs[i].Hash {
			t.Fatalf("export line %d hashes to %s, its record says %s", i+1, h, recs[i].Hash)
		}
	}
}

// hashOfLine recomputes a stored record's hash from its bytes: SHA-256 with the 64 hex digits of
// its Hash removed.
func hashOfLine(t *testing.T, line string) string {
	t.Helper()
	const field = `,"hash":"`
	i := strings.LastIndex(line, field)
	if i < 0 || !strings.HasSuffix(line, `"}`) || len(line)-2-(i+len(field)) != 64 {
		t.Fatalf("not a stored record: %.200s", line)
	}
	sum := sha256.Sum256([]byte(line[:i+len(field)] + `"}`))
	return hex.EncodeToString(sum[:])
}

// randomText is n bytes of base64 text that appears nowhere else.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}
