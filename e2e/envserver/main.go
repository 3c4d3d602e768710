// Command envserver is a stdio MCP server for the end-to-end tests of what an upstream process
// sees: its one tool, environ, answers with the process's environment as a JSON object of names
// to values, so that a test can tell which of the gateway's variables reached its child.
//
// Flag -name is a marker for the process table; it is not used otherwise.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	fs := flag.NewFlagSet("envserver", flag.ContinueOnError)
	fs.String("name", "", "a marker for the process table; not used otherwise")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv := mcp.NewServer(&mcp.Implementation{Name: "envserver", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        "environ",
		Description: "Answers with this process's environment, as a JSON object of names to values.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, environ)
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "envserver: %v\n", err)
		os.Exit(1)
	}
}

func environ(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		env[name] = value
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
}
