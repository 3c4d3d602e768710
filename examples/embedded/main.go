// Command embedded is a program that embeds mcp-gateway and adds one built-in tool written in
// Go, battery_level, to the robot's governed catalog. It serves the catalog to one MCP client
// over stdio, as `mcp-gateway serve --stdio` does.
//
//	go run ./examples/embedded -c examples/robot.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// batteryInput is the arguments of battery_level; its input schema is reflected from it.
type batteryInput struct {
	Unit string `json:"unit,omitempty" jsonschema:"enum=percent,enum=volts,description=Unit of the reading (default percent)."`
}

// batteryLevel reads the battery. A real program would ask the robot's controller.
func batteryLevel(ctx context.Context, in batteryInput) (governor.Envelope, error) {
	if in.Unit == "volts" {
		return governor.Envelope{"success": true, "observation": map[string]any{"volts": 24.6}}, nil
	}
	return governor.Envelope{"success": true, "observation": map[string]any{"percent": 87}}, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "embedded:", err)
		os.Exit(1)
	}
}

func run() error {
	path := flag.String("c", "mcp-gateway.yaml", "config file")
	flag.Parse()
	// Logs go to stderr: stdout carries the MCP session.
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	engine, err := gateway.CompilePolicies(cfg)
	if err != nil {
		return err
	}
	guards, err := gateway.BuildGuards(cfg)
	if err != nil {
		return err
	}
	st, err := store.Open(cfg.Gateway.StateDir, store.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("opening the state file: %w", err)
	}
	defer st.Close() // last: flushes the audit log

	g, err := gateway.New(cfg, gateway.Options{Logger: logger, Store: st, Policies: engine, Guards: guards})
	if err != nil {
		return err
	}
	defer g.Close()
	battery := gateway.Tool("battery_level", "Read the robot's battery level.", batteryLevel)
	// Read-only: the example policies (examples/policies/robot.yaml) allow read-only tools.
	battery.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
	if err := g.RegisterTool(battery); err != nil {
		return err
	}
	if err := g.Start(ctx); err != nil {
		return err
	}
	logger.Info("serving MCP over stdio", "tools", len(g.Catalog().Tools()))
	return g.ServeStdio(ctx)
}
