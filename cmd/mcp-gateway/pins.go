package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// runPins lists pinned tool definitions and accepts changed ones (SPEC.md §5). Through a running
// gateway an accepted tool is listed again at once; on the state file of a stopped gateway it is
// listed from the next start.
func runPins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pins", `pins list|accept SERVER[/TOOL] [-c FILE] [-o table|json|jsonl] [--operator NAME] [--addr HOST:PORT] [--token TOKEN]`, stdout, stderr)
	o := addOpsFlags(fs)
	fs.addOutput()
	operator := fs.String("operator", defaultOperator(), "accept: who accepts the change, for the audit log")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || (pos[0] == "list" && len(pos) != 1) || (pos[0] == "accept" && len(pos) != 2) ||
		(pos[0] != "list" && pos[0] != "accept") {
		return fs.usageError("pins needs list, or accept SERVER[/TOOL] (the tool's upstream name; without it every changed tool of the server)")
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	if pos[0] == "list" {
		return listPins(ctx, cfg, o, fs.output(), stdout)
	}
	server, tool, _ := strings.Cut(pos[1], "/")
	op := strings.TrimSpace(*operator)
	if op == "" {
		op = "operator"
	}
	return acceptPins(ctx, cfg, o, server, tool, op, fs.output(), stdout, stderr)
}

func listPins(ctx context.Context, cfg *config.Config, o *opsFlags, format string, stdout io.Writer) error {
	list := []gateway.PinStatus{}
	acc, err := openState(cfg, o, true)
	switch {
	case errors.Is(err, errNoStateFile):
	case err != nil:
		return err
	default:
		defer acc.Close()
		if acc.api != nil {
			err = acc.api.getJSON(ctx, "/admin/pins", &list)
		} else {
			var pins []store.Pin
			pins, err = acc.st.ListPins("")
			list = gateway.PinStatuses(pins)
		}
		if err != nil {
			return err
		}
	}
	if format != formatTable {
		return writeList(stdout, format, list)
	}
	printPins(stdout, cfg, list, acc != nil && acc.api != nil)
	return nil
}

// printPins prints the table, then what changed in each quarantined tool, descriptions in full
// (quoted, so that an upstream's text cannot drive the terminal): that is what to review; then
// what tool_definition guards withhold, by the path of each finding (never its text).
func printPins(w io.Writer, cfg *config.Config, list []gateway.PinStatus, running bool) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no pinned tools: tools are pinned when a gateway first lists them")
		printWithheldNote(w, cfg, running)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTOOL\tSTATE\tPINNED-AT\tDIGEST")
	var changed, withheld []gateway.PinStatus
	for _, p := range list {
		state, digest, pinned := "pinned", shortDigest(p.Digest), p.Pinned.Local().Format("2006-01-02 15:04:05")
		if p.Pending != "" {
			state, digest = "CHANGED — quarantined", digest+" → "+shortDigest(p.Pending)
			changed = append(changed, p)
		}
		if len(p.Withheld) > 0 {
			state = "WITHHELD by a guard"
			withheld = append(withheld, p)
		}
		if p.Pinned.IsZero() {
			pinned, digest = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Server, itemName(p), state, pinned, digest)
	}
	tw.Flush()
	if len(changed) > 0 {
		fmt.Fprintln(w)
		for _, p := range changed {
			fmt.Fprintf(w, "%s/%s changed at %s: %s\n", p.Server, p.Tool, p.Changed.Local().Format("2006-01-02 15:04:05"), strings.Join(p.Changes, ", "))
			if slices.Contains(p.Changes, "description") {
				fmt.Fprintf(w, "  pinned description:  %q\n", descriptionOf(p.Definition))
				fmt.Fprintf(w, "  changed description: %q\n", descriptionOf(p.PendingDefinition))
			}
		}
		fmt.Fprintf(w, "\n%d tool(s) changed since they were pinned and are not served. -o json shows both definitions in full.\n", len(changed))
		fmt.Fprintf(w, "Review the changes, then: %s (or SERVER alone for all of its changed tools)\n", pastable.Command("pins", "accept", "SERVER/TOOL"))
	}
	if len(withheld) > 0 {
		fmt.Fprintln(w)
		for _, p := range withheld {
			fmt.Fprintf(w, "%s/%s is withheld by tool_definition guards:\n", p.Server, itemName(p))
			for _, f := range p.Withheld {
				fmt.Fprintf(w, "  guard %s found %s at %s (%s, %s)\n", f.Guard, f.Category, f.Path, f.Action, f.Mode)
			}
		}
		fmt.Fprintf(w, "\n%d item(s) are withheld: not listed, not callable or readable. `pins accept` does not release them: "+
			"the upstream server must change the flagged text, or an operator the guardrails.tool_definition guards in %s.\n", len(withheld), cfg.Path)
	}
	printWithheldNote(w, cfg, running)
}

// printWithheldNote says, for the state file of a stopped gateway with tool_definition guards,
// that only a running gateway knows what they withhold.
func printWithheldNote(w io.Writer, cfg *config.Config, running bool) {
	if !running && len(cfg.Guardrails.ToolDefinition) > 0 {
		fmt.Fprintln(w, "The gateway is not running: what its tool_definition guards withhold is listed by a running gateway (they screen what the upstreams list at start).")
	}
}

// itemName is how the table names an entry: the tool, or a withheld prompt or resource with
// its kind; a name a guard flagged is not printed.
func itemName(p gateway.PinStatus) string {
	name := p.Tool
	if name == "" {
		name = "(name withheld: a guard flagged it)"
	}
	if p.Kind != "" && p.Kind != gateway.KindTool {
		name = strings.ReplaceAll(p.Kind, "_", " ") + " " + name
	}
	return name
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func descriptionOf(def json.RawMessage) string {
	var d struct {
		Description string `json:"description"`
	}
	_ = json.Unmarshal(def, &d)
	return d.Description
}

func acceptPins(ctx context.Context, cfg *config.Config, o *opsFlags, server, tool, operator, format string, stdout, stderr io.Writer) error {
	what := server
	if tool != "" {
		what += "/" + tool
	}
	acc, err := openState(cfg, o, false)
	nothing := func(err error) error {
		hint := serverHint(cfg, server)
		if hint == "" && tool != "" && acc != nil {
			hint = pinHint(ctx, acc, server, tool)
		}
		fmt.Fprintf(stderr, "nothing to accept for %s: %v%s\n", what, err, hint)
		return exitError{1}
	}
	if errors.Is(err, errNoStateFile) {
		return nothing(err)
	}
	if err != nil {
		return err
	}
	defer acc.Close()

	var accepted []gateway.PinStatus
	if acc.api != nil {
		err = acc.api.doJSON(ctx, http.MethodPost, "/admin/pins/"+url.PathEscape(server)+"/accept",
			gateway.AcceptRequest{Tool: tool, Operator: operator}, &accepted)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			return nothing(err)
		}
	} else {
		var pins []store.Pin
		pins, err = gateway.AcceptPendingPins(ctx, acc.st, cfg.Gateway.ToolNames, server, tool, operator, "state file")
		if len(pins) == 0 && (errors.Is(err, gateway.ErrNothingPending) || errors.Is(err, store.ErrNotFound)) {
			return nothing(err)
		}
		accepted = gateway.PinStatuses(pins)
	}
	if format != formatTable {
		if werr := writeList(stdout, format, accepted); werr != nil {
			return werr
		}
		return err
	}
	for _, p := range accepted {
		fmt.Fprintf(stdout, "%s/%s: changed definition accepted by %s (digest %s); recorded in the audit log.\n",
			p.Server, p.Tool, operator, shortDigest(p.Digest))
	}
	if err != nil {
		return err
	}
	if acc.api != nil {
		fmt.Fprintln(stdout, "The running gateway lists the accepted tools again.")
	} else {
		fmt.Fprintln(stdout, "The gateway is not running: the accepted tools are listed from its next start.")
	}
	return nil
}
