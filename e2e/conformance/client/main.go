// Command client is the shim through which the MCP conformance suite's client scenarios test
// mcp-gateway as an MCP client.
//
// The suite starts a test server per scenario and runs
//
//	client -gateway PATH-TO-mcp-gateway SERVER-URL
//
// with the scenario's name in MCP_CONFORMANCE_SCENARIO. The shim writes a gateway config with
// that URL as its only upstream, starts `mcp-gateway serve --stdio` as a child and, as an MCP
// client of the gateway, does what the scenario expects of a client: the test server only ever
// talks to the gateway's own upstream session. The shim knows the non-auth client scenarios of
// suites 0.1.16 and 0.2.0-alpha.11 (the latter's tagged 2026-07-28). It offers the gateway
// protocol 2025-11-25 unless -protocol says otherwise; at 2026-07-28 its go-sdk client fulfils
// the input requests the gateway passes on in results with its elicitation handler.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	gateway := flag.String("gateway", os.Getenv("MCP_GATEWAY_BIN"), "path of the mcp-gateway binary (default $MCP_GATEWAY_BIN)")
	timeout := flag.Duration("timeout", 25*time.Second, "time allowed for the whole scenario")
	protocol := flag.String("protocol", "2025-11-25", "MCP protocol version the shim's client offers the gateway")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: client -gateway PATH [-timeout D] SERVER-URL (scenario in $MCP_CONFORMANCE_SCENARIO)")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("conformance-client: ")
	if flag.NArg() != 1 || *gateway == "" {
		flag.Usage()
		os.Exit(2)
	}
	name := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err := run(ctx, *gateway, flag.Arg(0), name, *protocol)
	cancel()
	if err != nil {
		log.Printf("scenario %q: %v", name, err)
		os.Exit(1)
	}
	log.Printf("scenario %q: done", name)
}

// scenario is what a client scenario wants a client to do, done as a client of the gateway.
type scenario struct {
	// tools must all show up through the gateway before run: the gateway serves while it
	// (re)connects to its upstream. Empty: wait for the gateway's log to say the upstream is
	// ready instead (the scenario's server may list no tools).
	tools []string
	run   func(ctx context.Context, s *mcp.ClientSession, tools []*mcp.Tool) error
	// elicit answers elicitation; default acceptWithDefaults.
	elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
}

var scenarios = map[string]scenario{
	// 0.1.16
	"initialize":                          {run: listOnly},
	"tools_call":                          {tools: []string{"add_numbers"}, run: call("add_numbers", map[string]any{"a": 5, "b": 3})},
	"elicitation-sep1034-client-defaults": {tools: []string{"test_client_elicitation_defaults"}, run: call("test_client_elicitation_defaults", nil)},
	"sse-retry":                           {tools: []string{"test_reconnection"}, run: call("test_reconnection", nil)},

	// 0.2.0-alpha.11, 2026-07-28. What is scored is the gateway's upstream session: its
	// server/discover and version retry, per-request _meta and MCP-Protocol-Version
	// (request-metadata); the requestState it passes back on a retry (sep-2322-*); the
	// Mcp-Method, Mcp-Name and Mcp-Param-* headers of what it forwards (http-*); and what it
	// does with the tool schemas it lists (json-schema-*).
	"request-metadata": {run: listOnly},
	"sep-2322-client-request-state": {
		tools: []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"},
		run:   callEach(false, "test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"),
		elicit: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			log.Printf("elicitation %q: accepting with confirmed=true", req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirmed": true}}, nil
		},
	},
	"http-standard-headers":     {tools: []string{"test_headers"}, run: standardHeaders},
	"http-custom-headers":       {tools: []string{"test_custom_headers", "test_custom_headers_null"}, run: contextToolCalls},
	"http-invalid-tool-headers": {tools: []string{"valid_tool"}, run: callListed},
	// Only the upstream's tools/list and no fetch of the $ref's URL are scored. The gateway
	// may leave the tool out (its schema refers outside itself), so do not wait for it.
	"json-schema-ref-no-deref": {run: reportListed("lookup_user")},
	"json-schema-2020-12-preservation": {
		tools: []string{"json_schema_2020_12_tool", "json_schema_echo"},
		run:   echoSchema("json_schema_2020_12_tool", "json_schema_echo"),
	},
}

func run(ctx context.Context, gatewayBin, serverURL, name, protocol string) error {
	sc, ok := scenarios[name]
	if !ok {
		return errors.New("not a scenario this shim knows")
	}
	dir, err := os.MkdirTemp("", "mcp-gateway-conformance-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(dir, serverURL)), 0o600); err != nil {
		return err
	}

	elicit := sc.elicit
	if elicit == nil {
		elicit = acceptWithDefaults
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-gateway-conformance-client", Version: "0.1.0"},
		&mcp.ClientOptions{ElicitationHandler: elicit})
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--stdio")
	ready := make(chan struct{})
	// The gateway's log goes on to the shim's stderr (the suite keeps it as stderr.txt of the
	// scenario); its "upstream ready" line tells when the upstream session is up.
	cmd.Stderr = &lineWatch{w: os.Stderr, marker: []byte(`msg="upstream ready"`), found: ready}
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		return fmt.Errorf("connecting to the gateway: %w", err)
	}
	defer session.Close()
	log.Printf("connected to the gateway on protocol %s (upstream %s)", session.InitializeResult().ProtocolVersion, serverURL)

	if len(sc.tools) == 0 {
		select {
		case <-ready:
		case <-ctx.Done():
			return fmt.Errorf("the gateway's upstream did not become ready: %w", ctx.Err())
		}
	}
	tools, err := waitForTools(ctx, session, sc.tools)
	if err != nil {
		return err
	}
	return sc.run(ctx, session, tools)
}

// waitForTools lists the gateway's tools until all of names are among them.
func waitForTools(ctx context.Context, s *mcp.ClientSession, names []string) ([]*mcp.Tool, error) {
	for {
		res, err := s.ListTools(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool {
			return slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == n })
		})
		if len(missing) == 0 {
			log.Printf("tools/list: %d tools", len(res.Tools))
			return res.Tools, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("tools %q did not show up through the gateway: %w", missing, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func listOnly(context.Context, *mcp.ClientSession, []*mcp.Tool) error { return nil }

// reportListed logs whether the gateway lists tool.
func reportListed(tool string) func(context.Context, *mcp.ClientSession, []*mcp.Tool) error {
	return func(_ context.Context, _ *mcp.ClientSession, tools []*mcp.Tool) error {
		listed := slices.ContainsFunc(tools, func(t *mcp.Tool) bool { return t.Name == tool })
		log.Printf("tool %q listed through the gateway: %v", tool, listed)
		return nil
	}
}

func callTool(ctx context.Context, s *mcp.ClientSession, name string, args map[string]any) error {
	if args == nil {
		args = map[string]any{}
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("tools/call %s: %w", name, err)
	}
	log.Printf("tools/call %s: isError=%v, %d content blocks", name, res.IsError, len(res.Content))
	return nil
}

func call(name string, args map[string]any) func(context.Context, *mcp.ClientSession, []*mcp.Tool) error {
	return func(ctx context.Context, s *mcp.ClientSession, _ []*mcp.Tool) error {
		return callTool(ctx, s, name, args)
	}
}

// callEach calls the tools in order without arguments; with stop false an error is logged
// and the next tool still called (the scenario's server judges what reached it).
func callEach(stop bool, names ...string) func(context.Context, *mcp.ClientSession, []*mcp.Tool) error {
	return func(ctx context.Context, s *mcp.ClientSession, _ []*mcp.Tool) error {
		var errs []error
		for _, n := range names {
			if err := callTool(ctx, s, n, nil); err != nil {
				if stop {
					return err
				}
				log.Print(err)
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// standardHeaders lists and uses one of each of tools, resources and prompts, so that the
// gateway sends tools/call, resources/read and prompts/get upstream.
func standardHeaders(ctx context.Context, s *mcp.ClientSession, tools []*mcp.Tool) error {
	var errs []error
	if err := callTool(ctx, s, "test_headers", nil); err != nil {
		errs = append(errs, err)
	}
	if res, err := s.ListResources(ctx, nil); err != nil {
		errs = append(errs, fmt.Errorf("resources/list: %w", err))
	} else if len(res.Resources) == 0 {
		errs = append(errs, errors.New("resources/list: no resources through the gateway"))
	} else if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: res.Resources[0].URI}); err != nil {
		errs = append(errs, fmt.Errorf("resources/read %s: %w", res.Resources[0].URI, err))
	} else {
		log.Printf("resources/read %s: ok", res.Resources[0].URI)
	}
	if res, err := s.ListPrompts(ctx, nil); err != nil {
		errs = append(errs, fmt.Errorf("prompts/list: %w", err))
	} else if len(res.Prompts) == 0 {
		errs = append(errs, errors.New("prompts/list: no prompts through the gateway"))
	} else if _, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: res.Prompts[0].Name, Arguments: map[string]string{}}); err != nil {
		errs = append(errs, fmt.Errorf("prompts/get %s: %w", res.Prompts[0].Name, err))
	} else {
		log.Printf("prompts/get %s: ok", res.Prompts[0].Name)
	}
	for _, err := range errs {
		log.Print(err)
	}
	return errors.Join(errs...)
}

// contextToolCalls makes the tool calls the scenario passes in MCP_CONFORMANCE_CONTEXT
// ({"toolCalls": [{"name": ..., "arguments": {...}}]}).
func contextToolCalls(ctx context.Context, s *mcp.ClientSession, _ []*mcp.Tool) error {
	var c struct {
		ToolCalls []struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"toolCalls"`
	}
	if err := json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &c); err != nil {
		return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
	}
	if len(c.ToolCalls) == 0 {
		return errors.New("MCP_CONFORMANCE_CONTEXT has no toolCalls")
	}
	var errs []error
	for _, tc := range c.ToolCalls {
		if err := callTool(ctx, s, tc.Name, tc.Arguments); err != nil {
			log.Print(err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// callListed calls every tool the gateway lists: a client must leave out a tool whose
// x-mcp-header annotations are invalid, so only valid ones should be listed.
func callListed(ctx context.Context, s *mcp.ClientSession, tools []*mcp.Tool) error {
	var errs []error
	for _, t := range tools {
		if err := callTool(ctx, s, t.Name, map[string]any{"region": "us-west1"}); err != nil {
			log.Print(err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// echoSchema passes the input schema of tool, as the gateway lists it, back to the scenario's
// server through echo.
func echoSchema(tool, echo string) func(context.Context, *mcp.ClientSession, []*mcp.Tool) error {
	return func(ctx context.Context, s *mcp.ClientSession, tools []*mcp.Tool) error {
		i := slices.IndexFunc(tools, func(t *mcp.Tool) bool { return t.Name == tool })
		return callTool(ctx, s, echo, map[string]any{"schema": tools[i].InputSchema})
	}
}

// lineWatch copies to w and closes found at the first line holding marker.
type lineWatch struct {
	w       io.Writer
	marker  []byte
	found   chan struct{}
	partial []byte
	done    bool
}

func (l *lineWatch) Write(p []byte) (int, error) {
	if !l.done {
		l.partial = append(l.partial, p...)
		for {
			i := bytes.IndexByte(l.partial, '\n')
			if i < 0 {
				break
			}
			if bytes.Contains(l.partial[:i], l.marker) {
				l.done = true
				close(l.found)
				l.partial = nil
				break
			}
			l.partial = l.partial[i+1:]
		}
	}
	return l.w.Write(p)
}

// gatewayConfig is a gateway with the test server as its only upstream, tools under their own
// names, and no contract beyond passing calls through.
func gatewayConfig(dir, serverURL string) string {
	return fmt.Sprintf(`gateway:
  state_dir: %s
  tool_names: bare
servers:
  - name: upstream
    url: %s
    contract: passthrough
    startup_timeout_sec: 10
    restart_backoff_max_sec: 1
`, strconv.Quote(filepath.Join(dir, "state")), strconv.Quote(serverURL))
}

// acceptWithDefaults accepts every elicitation, answering each requested property that has a
// default with that default (SEP-1034).
func acceptWithDefaults(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	content := map[string]any{}
	if s := req.Params.RequestedSchema; s != nil {
		if schema, ok := s.(map[string]any); ok {
			props, _ := schema["properties"].(map[string]any)
			for name, p := range props {
				if prop, ok := p.(map[string]any); ok {
					if d, ok := prop["default"]; ok {
						content[name] = d
					}
				}
			}
		}
	}
	log.Printf("elicitation %q: accepting with %d defaults", req.Params.Message, len(content))
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}
