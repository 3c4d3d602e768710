package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// testServerEnv makes the test binary run as a stdio MCP server with the tools move and scan,
// each answering a success envelope, instead of running tests.
const testServerEnv = "GATEWAY_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(testServerEnv) != "" {
		os.Exit(runTestServer())
	}
	if name := os.Getenv(featureServerEnv); name != "" {
		os.Exit(runFeatureServer(name))
	}
	if os.Getenv(echoServerEnv) != "" {
		os.Exit(runEchoServer())
	}
	os.Exit(m.Run())
}

func runTestServer() int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-robot", Version: "1"}, nil)
	for _, name := range []string{"move", "scan"} {
		srv.AddTool(&mcp.Tool{Name: name, Description: "Does " + name + ".", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"success":true,"observation":"` + name + ` done"}`}}}, nil
			})
	}
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
	}
	return 0
}

// server is a config entry for one test server named name; extra is added to its mapping.
func server(name, extra string) string {
	return fmt.Sprintf("  - name: %s\n    command: \"{{exe}}\"\n    env: {%s: \"1\"}\n    startup_timeout_sec: 10\n%s", name, testServerEnv, extra)
}

// reloadFixture is a started gateway over its config file and state file.
type reloadFixture struct {
	g    *Gateway
	st   *store.Store
	reg  *prometheus.Registry
	path string
}

// startFixture writes yaml ({{exe}} is the test binary) to a config file in a fresh directory
// and starts a gateway on it, with its state file and metrics, the way serve does.
func startFixture(t *testing.T, yaml string) *reloadFixture {
	t.Helper()
	f := &reloadFixture{path: filepath.Join(t.TempDir(), "gateway.yaml")}
	f.write(t, yaml)
	cfg, err := config.Load(f.path)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := CompilePolicies(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := BuildGuards(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = NewRegistry()
	f.st, err = store.Open(cfg.Gateway.StateDir, store.Options{OnAuditCommit: AuditMetrics(f.reg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.st.Close() })
	f.g, err = New(cfg, Options{Store: f.st, Registry: f.reg, Policies: engine, Guards: sets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *reloadFixture) write(t *testing.T, yaml string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path, []byte(strings.ReplaceAll(yaml, "{{exe}}", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reload rewrites the config file with yaml and reloads it as SIGHUP does.
func (f *reloadFixture) reload(t *testing.T, yaml string) (ReloadReport, error) {
	t.Helper()
	f.write(t, yaml)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return f.g.ReloadFile(ctx, "tester")
}

func (f *reloadFixture) call(t *testing.T, name string) *governor.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.g.Call(ctx, &governor.Call{Name: name, Args: json.RawMessage(`{}`), Principal: "tester"})
}

// reloadRecords are the audit records of reloads.
func (f *reloadFixture) reloadRecords(t *testing.T) []store.Record {
	t.Helper()
	if err := f.st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	err := f.st.AuditScan(store.AuditFilter{Type: store.RecordOperator}, func(r store.Record) bool {
		if r.Action == "reload" {
			recs = append(recs, r)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

const allowAll = "servers:\n" + "{{servers}}" + "policies:\n  default: allow\n"

func withServers(base string, servers ...string) string {
	return strings.ReplaceAll(base, "{{servers}}", strings.Join(servers, ""))
}

const denyMove = `
    - id: no-move
      effect: deny
      when: 'upstream_tool == "move"'
      reason: the cell is being serviced
`

func TestReloadAppliesPolicyWithoutRestartingUpstreams(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("robot", "")))
	before := f.g.Upstreams().Get("robot")
	if out := f.call(t, "robot__move"); out.Kind != "" || !out.Success {
		t.Fatalf("before the reload: %+v", out)
	}

	rep, err := f.reload(t, withServers(allowAll, server("robot", ""))+"  rules:"+denyMove)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Restarted)+len(rep.Started)+len(rep.Stopped) != 0 || rep.Tools != 2 || len(rep.NeedsRestart) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	out := f.call(t, "robot__move")
	if out.Kind != governor.KindPolicyDenied || !strings.Contains(out.Reason, "no-move") {
		t.Fatalf("after the reload, move: %+v", out)
	}
	if out := f.call(t, "robot__scan"); !out.Success {
		t.Fatalf("after the reload, scan: %+v", out)
	}
	if after := f.g.Upstreams().Get("robot"); after != before || after.Restarts() != 0 {
		t.Fatal("a policy change restarted the upstream")
	}

	recs := f.reloadRecords(t)
	if len(recs) != 1 || recs[0].Principal != "tester" || recs[0].Outcome != "" || recs[0].Detail["config"] != f.path {
		t.Fatalf("audit records of the reload: %+v", recs)
	}
	// The metrics were registered once and keep counting across chains.
	want := `mcp_gateway_tool_calls_total{outcome="ok",principal="tester",server="robot",tool="robot__move"} 1
mcp_gateway_tool_calls_total{outcome="ok",principal="tester",server="robot",tool="robot__scan"} 1
mcp_gateway_tool_calls_total{outcome="policy_denied",principal="tester",server="robot",tool="robot__move"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(callsHelp+want), "mcp_gateway_tool_calls_total"); err != nil {
		t.Fatal(err)
	}
}

// callsHelp is the exposition header of mcp_gateway_tool_calls_total.
const callsHelp = `# HELP mcp_gateway_tool_calls_total Tool calls by server, public tool name, outcome (ok, tool_failure or a failure kind) and principal.
# TYPE mcp_gateway_tool_calls_total counter
`

func TestReloadRefusesABadConfig(t *testing.T) {
	good := withServers(allowAll, server("robot", ""), server("arm", "")) + "  rules:" + denyMove
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"CEL syntax error", withServers(allowAll, server("robot", ""), server("arm", "")) + "  rules:\n    - {id: broken, effect: deny, when: 'tool == '}\n", "broken"},
		{"unknown key", good + "unknown_section: 1\n", "unknown_section"},
		{"unknown guard", good + "guardrails:\n  tool_call:\n    - {id: g1, use: no.such.guard}\n", "no.such.guard"},
		{"bare names that collide", "gateway: {tool_names: bare}\n" + withServers(allowAll, server("robot", ""), server("arm", "")), "is exposed by server"},
		{"unreadable file", "", "gateway.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := startFixture(t, good)
			running := f.g.config()
			var err error
			if c.yaml == "" {
				err = os.Remove(f.path)
				if err == nil {
					_, err = f.g.ReloadFile(context.Background(), "tester")
				}
			} else {
				_, err = f.reload(t, c.yaml)
			}
			if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("reload error %v, want a refusal naming %q", err, c.want)
			}
			if f.g.config() != running {
				t.Fatal("a refused config was put in force")
			}
			if out := f.call(t, "robot__move"); out.Kind != governor.KindPolicyDenied {
				t.Fatalf("the old rules no longer apply: %+v", out)
			}
			recs := f.reloadRecords(t)
			if len(recs) != 1 || recs[0].Outcome != "refused" || !strings.Contains(recs[0].Reason, c.want) {
				t.Fatalf("audit records of the refusal: %+v", recs)
			}
		})
	}
}

// A downstream session stays connected across reloads: it is told that the tool list changed,
// sees the new filters and descriptions, and its next call runs under the new rules.
func TestReloadKeepsSessionsAndRefreshesTheCatalog(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("robot", "")))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	clientT, serverT := mcp.NewInMemoryTransports()
	if _, err := f.g.MCPServer().Connect(ctx, serverT, nil); err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__move"}); err != nil || res.IsError {
		t.Fatalf("before the reload: %v %+v", err, res)
	}

	filtered := withServers(allowAll, server("robot", "    tools:\n      exclude: [scan]\n      overrides: {move: {description: Moves the arm slowly.}}\n")) +
		"  rules:" + denyMove
	if _, err := f.reload(t, filtered); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed after the reload")
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "robot__move" || tools.Tools[0].Description != "Moves the arm slowly." {
		t.Fatalf("tools after the reload: %s", mustMarshal(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "robot__move"})
	if err != nil || !res.IsError || !strings.Contains(mustMarshal(res.StructuredContent), "policy_denied") {
		t.Fatalf("the same session after the reload: %v %s", err, mustMarshal(res))
	}
}

// A reload that only changes rules swaps the chain (here: what the audit log redacts) and keeps
// the catalog's tools as they were.
func TestReloadSwapsTheChainAndKeepsTheCatalog(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("robot", "")))
	names := func() []string {
		var out []string
		for _, tool := range f.g.Catalog().Tools() {
			out = append(out, tool.Public+"="+tool.Definition.Description)
		}
		return out
	}
	before, live := names(), f.g.live.Load()
	if _, err := f.reload(t, withServers(allowAll, server("robot", ""))+"audit:\n  redact_keys: [pin]\n"); err != nil {
		t.Fatal(err)
	}
	if f.g.live.Load() == live {
		t.Fatal("the chain was not rebuilt")
	}
	if after := names(); !slices.Equal(after, before) {
		t.Fatalf("catalog changed from %v to %v", before, after)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out := f.g.Call(ctx, &governor.Call{Name: "robot__scan", Args: json.RawMessage(`{"pin":"1234"}`)}); !out.Success {
		t.Fatalf("call after the reload: %+v", out)
	}
	if err := f.st.Audit().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var args string
	_ = f.st.AuditScan(store.AuditFilter{Tool: "robot__scan"}, func(r store.Record) bool { args = string(r.Args); return true })
	if !strings.Contains(args, governor.Redacted) || strings.Contains(args, "1234") {
		t.Fatalf("audited arguments %s: the reloaded redact_keys do not apply", args)
	}
}

func TestReloadReconfiguresUpstreams(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("keep", ""), server("change", ""), server("drop", "")))
	keep, change, drop := f.g.Upstreams().Get("keep"), f.g.Upstreams().Get("change"), f.g.Upstreams().Get("drop")

	rep, err := f.reload(t, withServers(allowAll,
		server("keep", "    call_timeout_sec: 5\n    tools: {hidden: [scan]}\n"),
		server("change", "    args: [-name, other]\n"),
		server("add", "")))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Restarted, []string{"change"}) || !slices.Equal(rep.Started, []string{"add"}) ||
		!slices.Equal(rep.Stopped, []string{"drop"}) || len(rep.NotReady) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	ups := f.g.Upstreams()
	if ups.Get("keep") != keep || keep.State() != upstream.Ready {
		t.Fatal("a server whose launch settings did not change was restarted")
	}
	if u := ups.Get("change"); u == change || !slices.Equal(u.Config().Args, []string{"-name", "other"}) || change.State() != upstream.Stopped {
		t.Fatal("the server whose args changed was not restarted with the new ones")
	}
	if ups.Get("drop") != nil || drop.State() != upstream.Stopped {
		t.Fatal("the removed server was not stopped")
	}
	for _, name := range []string{"keep__move", "change__move", "add__scan"} {
		if out := f.call(t, name); !out.Success {
			t.Fatalf("%s after the reload: %+v", name, out)
		}
	}
	if out := f.call(t, "keep__scan"); out.Kind != governor.KindHiddenTool {
		t.Fatalf("a tool hidden by the reload: %+v", out)
	}
	if out := f.call(t, "drop__move"); out.Kind != governor.KindUnknownTool {
		t.Fatalf("a tool of the removed server: %+v", out)
	}
	recs := f.reloadRecords(t)
	if len(recs) != 1 || mustMarshal(recs[0].Detail["restarted"]) != `["change"]` ||
		mustMarshal(recs[0].Detail["started"]) != `["add"]` || mustMarshal(recs[0].Detail["stopped"]) != `["drop"]` {
		t.Fatalf("audit record: %+v", recs)
	}
}

func TestReloadReportsToolNamesAndRestartOnlySettings(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("robot", "")))
	rep, err := f.reload(t, "gateway: {tool_names: bare, listen: \"127.0.0.1:9\", lockout_scope: server}\n"+
		withServers(allowAll, server("robot", ""))+"approvals: {timeout: 1m, use: memory}\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.NeedsRestart, []string{"approvals.timeout", "gateway.listen"}) {
		t.Fatalf("needs restart: %v", rep.NeedsRestart)
	}
	// Until the gateway restarts, every reload says so again.
	if again, err := f.g.ReloadFile(context.Background(), "tester"); err != nil || !slices.Equal(again.NeedsRestart, rep.NeedsRestart) {
		t.Fatalf("second reload: needs restart %v, %v", again.NeedsRestart, err)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "different name") {
		t.Fatalf("warnings: %v", rep.Warnings)
	}
	if out := f.call(t, "move"); !out.Success {
		t.Fatalf("a bare name after the reload: %+v", out)
	}
	if out := f.call(t, "robot__move"); out.Kind != governor.KindUnknownTool {
		t.Fatalf("the prefixed name after the reload: %+v", out)
	}
}

// The tracer provider is made once, at start: a reload that changes the telemetry section
// says which settings wait for a restart, and applies the rest.
func TestReloadReportsTelemetryAsRestartOnly(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("robot", "")))
	rep, err := f.reload(t, withServers(allowAll, server("robot", ""))+
		"telemetry: {endpoint: \"http://127.0.0.1:4318\", forward_baggage: true}\n")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.NeedsRestart, []string{"telemetry.endpoint", "telemetry.forward_baggage"}) {
		t.Fatalf("needs restart: %v", rep.NeedsRestart)
	}
	if out := f.call(t, "robot__move"); !out.Success {
		t.Fatalf("a call after the reload: %+v", out)
	}
}

func TestRestartOnly(t *testing.T) {
	base := func() *config.Config {
		return &config.Config{
			Gateway:   config.Gateway{Name: "cell", Listen: "127.0.0.1:8080", ToolNames: config.ToolNamesPrefixed, LockoutScope: config.LockoutGlobal},
			Servers:   []config.Server{{Name: "arm", Command: "arm"}},
			Approvals: config.Approvals{Use: "console", Timeout: config.Duration(time.Minute)},
		}
	}
	for _, c := range []struct {
		name   string
		change func(*config.Config)
		want   []string
	}{
		{"nothing", func(*config.Config) {}, nil},
		{"applied settings", func(c *config.Config) {
			c.Gateway.ToolNames, c.Gateway.LockoutScope = config.ToolNamesBare, config.LockoutServer
			c.Servers[0].Args = []string{"-v"}
			c.Audit.RedactKeys = []string{"pin"}
			c.Policies.Default = "deny"
			c.Approvals.Use = "memory"
			c.Path = "elsewhere.yaml"
		}, nil},
		{"process settings", func(c *config.Config) { c.Gateway.Name, c.Gateway.StateDir = "other", "/var/lib/x" }, []string{"gateway.name", "gateway.state_dir"}},
		{"approval timeout", func(c *config.Config) { c.Approvals.Timeout = config.Duration(time.Hour) }, []string{"approvals.timeout"}},
		{"tokens", func(c *config.Config) {
			c.Auth.Tokens = []config.Token{{Principal: "planner", TokenEnv: "PLANNER_TOKEN"}}
		}, []string{"auth"}},
		{"telemetry", func(c *config.Config) {
			ratio := 0.5
			c.Telemetry = config.Telemetry{Endpoint: "http://127.0.0.1:4318", SampleRatio: &ratio, HeadersEnv: map[string]string{"X-Key": "OTLP_KEY"}}
		}, []string{"telemetry.endpoint", "telemetry.headers_env", "telemetry.sample_ratio"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := base()
			c.change(changed)
			if got := restartOnly(base(), changed); !slices.Equal(got, c.want) {
				t.Fatalf("restartOnly = %v, want %v", got, c.want)
			}
		})
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
