package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/mcp-gateway/mcp-gateway/gateway"
)

func runTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tools", "tools -c FILE [--json]", stderr)
	file := fs.String("c", "", "config file (required)")
	asJSON := fs.Bool("json", false, "print the tool definitions as MCP clients see them, as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(fs, *file, stderr)
	if err != nil {
		return err
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: newLogger(cfg, stderr)})
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Start(ctx); err != nil {
		return err
	}
	tools := g.Catalog().Tools()
	if *asJSON {
		defs := make([]any, len(tools))
		for i, t := range tools {
			defs[i] = t.Definition
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(defs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSERVER\tUPSTREAM TOOL\tFLAGS\tDESCRIPTION")
	for _, t := range tools {
		var flags []string
		if t.Physical() {
			flags = append(flags, "physical")
		}
		if t.Evaluated {
			flags = append(flags, "evaluated")
		}
		if t.Passthrough() {
			flags = append(flags, "passthrough")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Public, t.Server, t.Upstream, strings.Join(flags, ","), firstLine(t.Definition.Description, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ready, waiting := g.Ready()
	if !ready {
		fmt.Fprintf(stderr, "not every upstream is ready; their tools are missing above:\n  %s\n", strings.Join(waiting, "\n  "))
		return exitError{1}
	}
	return nil
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
