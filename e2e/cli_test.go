package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckReportsConfigErrorsWithLines(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the output; "cfg.yaml:N" pins the line
	}{
		{"misspelled key", "servers:\n  - name: robot\n    comand: x\n", []string{"cfg.yaml:3", "comand", "command"}},
		{"wrong type", "servers:\n  - name: robot\n    command: x\n    call_timeout_sec: fast\n", []string{"cfg.yaml:4", "call_timeout_sec"}},
		{"duplicate key", "gateway:\n  name: a\n  name: b\nservers:\n  - name: robot\n    command: x\n", []string{"cfg.yaml:3", "name"}},
		{"duplicate server name", "servers:\n  - name: robot\n    command: x\n  - name: robot\n    command: y\n", []string{"cfg.yaml:4", "robot", "line 2"}},
		{"several problems at once", "gateway:\n  tool_name: bare\nservers:\n  - name: robot\n    command: x\n    physicl: true\n", []string{"cfg.yaml:2", "cfg.yaml:6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cfg.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(gatewayBin, "check", "-c", path).CombinedOutput()
			if err == nil {
				t.Fatalf("check accepted a bad config:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	good := filepath.Join(t.TempDir(), "ok.yaml")
	os.WriteFile(good, []byte("servers:\n  - name: robot\n    command: x\n"), 0o644)
	if out, err := exec.Command(gatewayBin, "check", "-c", good).CombinedOutput(); err != nil {
		t.Fatalf("check refused a good config: %v\n%s", err, out)
	}
}

func TestBareNameCollisionFailsStartup(t *testing.T) {
	cfg, _ := writeConfig(t, `
gateway:
  listen: "{{listen}}"
  tool_names: bare
servers:
  - name: left
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
  - name: right
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	out, err := exec.Command(gatewayBin, "serve", "-c", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("serve started despite a bare-name collision:\n%s", out)
	}
	for _, want := range []string{"gateway.yaml", `"left" (line 6)`, `"right" (line 9)`, "get_scene"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("message lacks %q:\n%s", want, out)
		}
	}
	waitNoProcesses(t, marker(t), 10e9)
}

func TestToolsCommand(t *testing.T) {
	cfg, _ := writeConfig(t, `
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
    tools:
      hidden: [fault]
      overrides:
        pick_object: {evaluated: true}
`)
	out, err := exec.Command(gatewayBin, "tools", "-c", cfg).Output()
	if err != nil {
		t.Fatalf("tools: %v", err)
	}
	table := string(out)
	if !strings.Contains(table, "robot__pick_object") || !strings.Contains(table, "physical,evaluated") || strings.Contains(table, "robot__fault") {
		t.Fatalf("table:\n%s", table)
	}
	out, err = exec.Command(gatewayBin, "tools", "-c", cfg, "-o", "json").Output()
	if err != nil {
		t.Fatalf("tools -o json: %v", err)
	}
	var tools []struct {
		Public    string         `json:"public"`
		Server    string         `json:"server"`
		Upstream  string         `json:"upstream"`
		Physical  bool           `json:"physical"`
		Evaluated bool           `json:"evaluated"`
		Def       map[string]any `json:"definition"`
	}
	if err := json.Unmarshal(out, &tools); err != nil {
		t.Fatalf("tools -o json is not JSON: %v\n%s", err, out)
	}
	for _, tool := range tools {
		if tool.Public == "robot__fault" {
			t.Errorf("a hidden tool is listed: %s", out)
		}
		if tool.Public != "robot__pick_object" {
			continue
		}
		if tool.Server != "robot" || tool.Upstream != "pick_object" || !tool.Physical || !tool.Evaluated || tool.Def["name"] != "robot__pick_object" || tool.Def["inputSchema"] == nil {
			t.Errorf("robot__pick_object: %+v", tool)
		}
		if _, leaked := tool.Def["evaluated"]; leaked {
			t.Fatal("gateway-only settings must not be in the definition clients see")
		}
		return
	}
	t.Fatalf("robot__pick_object missing: %s", out)
}

func TestSchemaCommand(t *testing.T) {
	out, err := exec.Command(gatewayBin, "schema").Output()
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(out, &schema); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if !strings.Contains(string(out), "call_timeout_sec") || !strings.Contains(string(out), "additionalProperties") {
		t.Fatalf("schema lacks the config's fields:\n%s", out)
	}
}

// TestToolsNeverStartsASecondDriver: while a gateway runs, `tools` prints the catalog that
// gateway serves and starts no server of its own; the robot's driver process stays one. With the
// state file held by a gateway whose admin API cannot be reached, tools refuses rather than
// start the robot's server.
func TestToolsNeverStartsASecondDriver(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
    tools:
      overrides:
        stop: {stop: true}
`)
	m := marker(t)
	startGateway(t, cfg, addr)
	if n := len(processesWith(m)); n != 1 {
		t.Fatalf("%d robot processes before tools, want 1", n)
	}
	// Sample the process table while tools runs: a second driver would show up there.
	most := 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			most = max(most, len(processesWith(m)))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	out, errOut := cliOK(t, "tools", "-c", cfg)
	jsonOut, _ := cliOK(t, "tools", "-c", cfg, "--json")
	close(stop)
	<-sampled
	if most != 1 {
		t.Errorf("%d robot processes while tools ran; no command but the gateway may start a physical server", most)
	}
	if !strings.Contains(out, "robot__get_scene") || !strings.Contains(out, "physical,stop") || !strings.Contains(errOut, "no server was started") {
		t.Errorf("tools against the running gateway:\n%s%s", out, errOut)
	}
	var tools []struct {
		Public string         `json:"public"`
		Def    map[string]any `json:"definition"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &tools); err != nil || len(tools) == 0 || tools[0].Public == "" || tools[0].Def["inputSchema"] == nil {
		t.Errorf("tools --json against the running gateway: %v\n%s", err, jsonOut)
	}

	// The same state file held by a gateway whose admin API is elsewhere: refused, nothing started.
	_, errOut, code := cli(t, "tools", "-c", cfg, "--addr", "127.0.0.1:1")
	if code != 1 || !strings.Contains(errOut, "second driver") {
		t.Errorf("tools with an unreachable admin API: exit %d\n%s", code, errOut)
	}
	if n := len(processesWith(m)); n != 1 {
		t.Errorf("%d robot processes after tools, want 1", n)
	}
}
