package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// runTools prints the tool catalog. A physical server is a driver of real hardware: only the
// process that holds the state file may launch one, so that no command ever starts a second
// driver beside a running gateway's. While a gateway holds the state file, tools asks its admin
// API for the catalog it serves; otherwise it takes the state file itself for as long as it
// runs the servers, so that no gateway can start beside it.
func runTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tools", "tools [-c FILE] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]\n\n"+
		"Prints the tools MCP clients see: the running gateway's catalog, else the catalog of the servers\n"+
		"it starts for the purpose (never a physical one beside a running gateway). -o json has each\n"+
		"tool's definition as clients see it in tools/list, with its server and settings.", stdout, stderr)
	o := addOpsFlags(fs)
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	format := fs.output()
	if physicalServers(cfg) != "" {
		st, err := store.Open(cfg.Gateway.StateDir, store.Options{})
		var locked *store.LockedError
		switch {
		case errors.As(err, &locked):
			return toolsViaAPI(ctx, cfg, o, locked, format, stdout, stderr)
		case err != nil:
			return fmt.Errorf("%s would be started, and only the process that holds the state file may start a physical server; the state file cannot be opened: %w", physicalServers(cfg), err)
		}
		// Held until the servers have stopped: no gateway starts a second driver meanwhile.
		defer st.Close()
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: newLogger(cfg, stderr)})
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Start(ctx); err != nil {
		return err
	}
	if err := printTools(gateway.ToolStatuses(g.Catalog()), format, stdout); err != nil {
		return err
	}
	ready, waiting := g.Ready()
	if !ready {
		fmt.Fprintf(stderr, "not every upstream is ready; their tools are missing above:\n  %s\n", strings.Join(waiting, "\n  "))
		return exitError{1}
	}
	return nil
}

// toolsViaAPI prints the catalog of the gateway that holds the state file. It never starts a
// server: one running beside that gateway's would be a second driver on the same robot.
func toolsViaAPI(ctx context.Context, cfg *config.Config, o *opsFlags, locked *store.LockedError, format string, stdout, stderr io.Writer) error {
	api, err := newAdminClient(cfg, o, locked)
	if err == nil {
		var tools []gateway.ToolStatus
		if err = api.getJSON(ctx, "/admin/tools", &tools); err == nil {
			if format == formatTable {
				fmt.Fprintf(stderr, "(the catalog of the running gateway at %s; no server was started)\n", api.base)
			}
			return printTools(tools, format, stdout)
		}
	}
	fmt.Fprintf(stderr, "mcp-gateway tools: %v\n"+
		"  The servers were not started: %s would then run a second driver beside the running gateway's.\n", err, physicalServers(cfg))
	return exitError{1}
}

// physicalServers names the config's physical servers ("server robot", "servers robot, arm"),
// "" when there are none.
func physicalServers(cfg *config.Config) string {
	var names []string
	for _, s := range cfg.Servers {
		if s.Physical {
			names = append(names, s.Name)
		}
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return "physical server " + names[0]
	}
	return "physical servers " + strings.Join(names, ", ")
}

// printTools prints the listed tools (neither hidden nor quarantined) as a table, or as JSON
// with their definitions.
func printTools(all []gateway.ToolStatus, format string, stdout io.Writer) error {
	tools := []gateway.ToolStatus{}
	for _, t := range all {
		if !t.Hidden && !t.Quarantined && t.Definition != nil {
			tools = append(tools, t)
		}
	}
	if format != formatTable {
		return writeList(stdout, format, tools)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tSERVER\tUPSTREAM TOOL\tFLAGS\tDESCRIPTION")
	for _, t := range tools {
		var flags []string
		for _, f := range []struct {
			on   bool
			name string
		}{{t.Physical, "physical"}, {t.Evaluated, "evaluated"}, {t.Passthrough, "passthrough"}, {t.Stop, "stop"}, {t.AllowWhileLocked, "allow_while_locked"}} {
			if f.on {
				flags = append(flags, f.name)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Public, t.Server, t.Upstream, strings.Join(flags, ","), firstLine(t.Definition.Description, 60))
	}
	return tw.Flush()
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
