package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBundledExampleServes runs examples/robot.yaml — what `make run` serves — with its policies
// and guards, in front of the simulated robot: the robot's tools work, a target outside the
// cell is denied by the example policy, and the fault-injection tools stay hidden.
func TestBundledExampleServes(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "examples/robot.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := strings.NewReplacer(
		"../bin/sim-robot", simRobotBin,
		"../.mcp-gateway", filepath.Join(dir, "state"),
		"policies/robot.yaml", filepath.Join(root, "examples/policies/robot.yaml"),
		"127.0.0.1:8080", addr,
	).Replace(string(text))
	if !strings.Contains(cfg, simRobotBin) || !strings.Contains(cfg, addr) {
		t.Fatal("examples/robot.yaml no longer has the paths this test rewrites")
	}
	path := filepath.Join(dir, "robot.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startGateway(t, path, addr)
	cs := connectHTTP(t, addr, nil)
	tools := toolNames(t, cs)
	if tools["robot__get_scene"] == nil || tools["robot__fault"] != nil {
		t.Fatalf("catalog: %v", tools)
	}
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("get_scene: %v", env)
	}
	if _, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "table"}); env["success"] != true || env["run_id"] == nil {
		t.Fatalf("navigate_to table: %v", env)
	}
	if _, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "red_cup"}); env["kind"] != "policy_denied" {
		t.Fatalf("a target outside the cell's places must be denied by the example policy: %v", env)
	}
}
