package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// threeUpstreams fronts the simulated robot, npm's server-everything and the Go SDK's
// conformance everything-server at once.
const threeUpstreams = `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-late-tool"]
    physical: true
    tools:
      hidden: [fault]
      overrides:
        pick_object: {evaluated: true, description: "Pick up one object the robot stands next to."}
  - name: everything
    command: node
    args: ["{{server_everything}}", "stdio", "{{marker}}"]
    contract: passthrough
    tools:
      exclude: ["gzip-*"]
  - name: conf
    command: "{{everything_go}}"
    args: ["{{marker}}"]
    contract: passthrough
`

func TestCatalogAndCallsOverBothTransports(t *testing.T) {
	cfg, addr := writeConfig(t, threeUpstreams)
	transports := map[string]func(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession{
		"http": func(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
			startGateway(t, cfg, addr)
			return connectHTTP(t, addr, opts)
		},
		"stdio": func(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
			cs, _ := connectStdio(t, cfg, opts)
			return cs
		},
	}
	for name, connect := range transports {
		t.Run(name, func(t *testing.T) {
			listChanged := make(chan struct{}, 16)
			cs := connect(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case listChanged <- struct{}{}:
				default:
				}
			}})

			// The robot's late tool and server-everything's capability-dependent tools arrive
			// via tools/list_changed after the upstreams initialised (the sampling tool because the
			// gateway declares sampling; it declares no roots, so get-roots-list never comes).
			tools := waitForTools(t, cs, "robot__calibrate", "everything__trigger-sampling-request")
			for _, want := range []string{"robot__get_scene", "robot__pick_object", "robot__wait", "everything__echo", "everything__get-sum", "conf__test_simple_text"} {
				if tools[want] == nil {
					t.Errorf("tool %s missing from the catalog", want)
				}
			}
			for _, gone := range []string{"robot__fault", "everything__gzip-file-as-resource", "everything__get-roots-list"} {
				if tools[gone] != nil {
					t.Errorf("tool %s must not be listed", gone)
				}
			}
			if d := tools["robot__pick_object"].Description; d != "Pick up one object the robot stands next to." {
				t.Errorf("description override not applied: %q", d)
			}

			// Envelope tool on the robot.
			res, env := call(t, cs, "robot__get_scene", map[string]any{})
			if res.IsError || env["success"] != true || env["observation"] == nil {
				t.Fatalf("get_scene: %s", mustJSON(res))
			}
			// Passthrough tool of npm's server-everything.
			res, _ = call(t, cs, "everything__echo", map[string]any{"message": "hello robot"})
			if res.IsError || !strings.Contains(textOf(res), "hello robot") {
				t.Fatalf("echo: %s", mustJSON(res))
			}
			// Passthrough tool of the Go SDK's conformance server.
			res, _ = call(t, cs, "conf__test_simple_text", map[string]any{})
			if res.IsError || textOf(res) == "" {
				t.Fatalf("test_simple_text: %s", mustJSON(res))
			}

			// A tool added later by the conformance server appears downstream, with a
			// notification.
			drain(listChanged)
			if res, _ := call(t, cs, "conf__test_trigger_tool_change", map[string]any{}); res.IsError {
				t.Fatalf("test_trigger_tool_change: %s", mustJSON(res))
			}
			select {
			case <-listChanged:
			case <-time.After(10 * time.Second):
				t.Fatal("no tools/list_changed reached the client after the upstream's tool list changed")
			}
			waitForTools(t, cs, "conf____transient_tool_for_list_changed")
		})
	}
}

func drain(c chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// waitForTools lists tools until all of names are there.
func waitForTools(t *testing.T, cs *mcp.ClientSession, names ...string) map[string]*mcp.Tool {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		tools := toolNames(t, cs)
		missing := ""
		for _, n := range names {
			if tools[n] == nil {
				missing = n
				break
			}
		}
		if missing == "" {
			return tools
		}
		if time.Now().After(deadline) {
			var have []string
			for n := range tools {
				have = append(have, n)
			}
			t.Fatalf("tool %s never appeared; listed: %v", missing, have)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestProgressIsForwarded(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
`)
	startGateway(t, cfg, addr)
	got := make(chan float64, 100)
	cs := connectHTTP(t, addr, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if r.Params.ProgressToken == "tok-1" {
			got <- r.Params.Progress
		}
	}})
	params := &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 0.5}}
	params.SetProgressToken("tok-1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("wait: %v %s", err, mustJSON(res))
	}
	if len(got) < 2 {
		t.Fatalf("want progress notifications with the client's token, got %d", len(got))
	}
}

func TestUnknownAndHiddenToolsAreRefused(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-record", "{{dir}}/calls.jsonl"]
    tools:
      hidden: [fault, robot_stats]
`)
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	tests := []struct{ tool, kind, reason string }{
		{"robot__teleport", "unknown_tool", "Unknown tool: robot__teleport"},
		{"fault", "unknown_tool", "Unknown tool: fault"},
		{"robot__fault", "internal_tool_not_model_callable", "cannot be called by a model"},
		{"robot__robot_stats", "internal_tool_not_model_callable", "robot__robot_stats"},
	}
	for _, tt := range tests {
		res, env := call(t, cs, tt.tool, map[string]any{"mode": "crash"})
		if !res.IsError || env["success"] != false || env["kind"] != tt.kind || !strings.Contains(env["reason"].(string), tt.reason) {
			t.Errorf("%s: %s", tt.tool, mustJSON(res))
		}
	}
	if tools := toolNames(t, cs); tools["robot__fault"] != nil || tools["robot__robot_stats"] != nil {
		t.Error("hidden tools are listed")
	}
	// Nothing reached the robot: the record file has no call.
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("get_scene: %v", env)
	}
	recorded := readFile(t, cfgDir(cfg)+"/calls.jsonl")
	if strings.Contains(recorded, "fault") || strings.Contains(recorded, "robot_stats") || !strings.Contains(recorded, "get_scene") {
		t.Fatalf("robot saw: %s", recorded)
	}
}
