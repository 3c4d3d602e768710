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
// talks to the gateway's own upstream session. The shim offers the gateway protocol 2025-11-25,
// the revision of the suite's client scenarios, unless -protocol says otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err := run(ctx, *gateway, flag.Arg(0), scenario, *protocol)
	cancel()
	if err != nil {
		log.Printf("scenario %q: %v", scenario, err)
		os.Exit(1)
	}
	log.Printf("scenario %q: done", scenario)
}

// scenarios maps each client scenario to the tool the client must call (empty: only list tools).
var scenarios = map[string]string{
	"initialize":                          "",
	"tools_call":                          "add_numbers",
	"elicitation-sep1034-client-defaults": "test_client_elicitation_defaults",
	"sse-retry":                           "test_reconnection",
}

var toolArguments = map[string]map[string]any{
	"add_numbers": {"a": 5, "b": 3},
}

func run(ctx context.Context, gatewayBin, serverURL, scenario, protocol string) error {
	tool, ok := scenarios[scenario]
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

	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-gateway-conformance-client", Version: "0.1.0"},
		&mcp.ClientOptions{ElicitationHandler: acceptWithDefaults})
	cmd := exec.Command(gatewayBin, "serve", "-c", cfg, "--stdio")
	cmd.Stderr = os.Stderr // the suite keeps it as stderr.txt of the scenario
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		return fmt.Errorf("connecting to the gateway: %w", err)
	}
	defer session.Close()
	log.Printf("connected to the gateway on protocol %s (upstream %s)", session.InitializeResult().ProtocolVersion, serverURL)

	if tool == "" {
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		log.Printf("tools/list: %d tools", len(res.Tools))
		return nil
	}
	// The gateway serves even when its upstream is not (yet) ready and retries it, so wait
	// until the upstream's tool shows up.
	for {
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == tool }) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tool %q did not show up through the gateway: %w", tool, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	args := toolArguments[tool]
	if args == nil {
		args = map[string]any{}
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("tools/call %s: %w", tool, err)
	}
	log.Printf("tools/call %s: isError=%v, %d content blocks", tool, res.IsError, len(res.Content))
	return nil
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
