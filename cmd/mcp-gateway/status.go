package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// statusReport is what `status -o json` prints: the gateway's status and whether it came from a
// running gateway. Without one there are no upstreams to report, only the state file's lockouts.
type statusReport struct {
	Running bool `json:"running"`
	gateway.Status

	noFile bool // the state file does not exist yet
}

// The exit codes of status besides 0 (all is well) and 1 and 2 (it could not tell; a mistake on
// the command line), so that a script or a monitor can act on them (docs/cli.md). The first
// that applies wins.
const (
	// statusLocked: a lockout or a halt is in force, from the running gateway or in the state
	// file of a stopped one. The robot waits for an operator.
	statusLocked = 3
	// statusDown: the gateway runs, but a server is not ready (starting, or waiting to be
	// started again after it failed).
	statusDown = 4
	// statusStopped: no gateway is running with this state_dir.
	statusStopped = 5
)

// statusCode is the exit code of a status report.
func statusCode(rep statusReport) int {
	switch {
	case rep.Halted || len(rep.Lockouts) > 0:
		return statusLocked
	case !rep.Running:
		return statusStopped
	}
	for _, u := range rep.Upstreams {
		if u.State != upstream.Ready.String() {
			return statusDown
		}
	}
	return 0
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status [-c FILE] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]\n\n"+
		"Shows the upstreams, halts and lockouts, physical calls in flight and pending approvals of the\n"+
		"running gateway, else the lockouts in the state file. Exit status: 0 all is well; 3 a lockout or a\n"+
		"halt is in force; 4 a server is not ready; 5 no gateway is running; 1 the status could not be read.", stdout, stderr)
	o := addOpsFlags(fs)
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	rep, err := readStatus(ctx, cfg, o)
	if err != nil {
		return err
	}
	if fs.output() == formatTable {
		err = printStatus(stdout, cfg, rep)
	} else {
		err = writeJSON(stdout, fs.output(), rep)
	}
	if err != nil {
		return err
	}
	if code := statusCode(rep); code != 0 {
		return exitError{code}
	}
	return nil
}

// readStatus asks the running gateway, or reads the lockouts from the state file when none runs.
func readStatus(ctx context.Context, cfg *config.Config, o *opsFlags) (statusReport, error) {
	rep := statusReport{Status: gateway.Status{
		Gateway:   cfg.Gateway.Name,
		StateFile: filepath.Join(cfg.Gateway.StateDir, store.FileName),
		Upstreams: []gateway.UpstreamStatus{},
		Lockouts:  []gateway.LockoutStatus{},
	}}
	acc, err := openState(cfg, o, true)
	if errors.Is(err, errNoStateFile) {
		rep.noFile = true
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	defer acc.Close()
	if acc.api != nil {
		rep.Running = true
		err := acc.api.getJSON(ctx, "/admin/status", &rep.Status)
		return rep, err
	}
	now := time.Now()
	for _, l := range acc.st.Lockouts() {
		rep.Lockouts = append(rep.Lockouts, gateway.LockoutStatus{Lockout: l, AgeSec: now.Sub(l.At).Seconds()})
		rep.Halted = rep.Halted || l.Halted()
	}
	rep.Physical = []gateway.PhysicalStatus{}
	rep.Approvals.Requests = []gateway.PendingApproval{}
	pending, err := acc.st.ListApprovals(store.ApprovalPending)
	if err != nil {
		rep.Approvals.Error = err.Error()
	}
	for _, a := range pending {
		rep.Approvals.Requests = append(rep.Approvals.Requests, gateway.PendingApproval{ID: a.ID, Server: a.Server, Tool: a.Tool, Principal: a.Principal, Expires: a.Expires})
	}
	rep.Approvals.Pending = len(rep.Approvals.Requests)
	return rep, nil
}

func printStatus(w io.Writer, cfg *config.Config, rep statusReport) error {
	if rep.Running {
		fmt.Fprintf(w, "gateway %s (mcp-gateway %s) is running; state file %s\n\n", rep.Gateway, rep.Version, rep.StateFile)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tSTATE\tPHYSICAL\tTOOLS\tNOT LISTED\tRESTARTS\tLAST ERROR")
		for _, u := range rep.Upstreams {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", u.Name, u.State, yesNo(u.Physical), u.Tools, orDash(notListed(u.Catalog)), u.Restarts, orDash(firstLine(u.LastError, 80)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else if rep.noFile {
		fmt.Fprintf(w, "the gateway is not running and has never run with this state_dir (there is no %s yet)\n", rep.StateFile)
	} else {
		fmt.Fprintf(w, "the gateway is not running (state file %s is not in use); upstreams are shown only while it runs\n", rep.StateFile)
	}
	fmt.Fprintln(w)
	now := time.Now()
	if rep.Halted {
		fmt.Fprintln(w, "HALTED: an operator's emergency stop is in force; only mcp-gateway unlock ends it")
	}
	if len(rep.Lockouts) == 0 {
		fmt.Fprintln(w, "no lockouts: physical actions are allowed")
	} else {
		fmt.Fprintln(w, "LOCKOUTS")
		for _, l := range rep.Lockouts {
			fmt.Fprintf(w, "  %s: %s\n", l.Server, describeLockout(l.Lockout, now))
		}
		if cfg.Gateway.LockoutScope == config.LockoutGlobal {
			fmt.Fprintln(w, "lockout_scope is global: every physical server is blocked while any lockout is active.")
		}
		fmt.Fprintf(w, "Inspect the robot, then: %s\n", pastable.Command("unlock", "SERVER", "--reason", "what was inspected"))
	}
	if len(rep.Physical) > 0 {
		if err := printPhysical(w, rep.Physical, now); err != nil {
			return err
		}
	}
	printPendingApprovals(w, rep.Approvals, now)
	return nil
}

// printPhysical is the table of physical servers: the call in flight, the queue behind it and
// the tools an operator has on each.
func printPhysical(w io.Writer, servers []gateway.PhysicalStatus, now time.Time) error {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "PHYSICAL SERVERS")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tIN FLIGHT\tQUEUED\tSTOP TOOL\tINSPECTION TOOLS")
	for _, p := range servers {
		var calls []string
		for _, f := range p.InFlight {
			c := fmt.Sprintf("%s (principal %s, call %s, %s)", f.Tool, orDash(f.Principal), f.CallID, now.Sub(f.Since).Round(100*time.Millisecond))
			if f.Stop {
				c = "stop: " + c
			}
			calls = append(calls, c)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.Server, orDash(strings.Join(calls, "; ")), p.Queued, orDash(p.StopTool), orDash(strings.Join(p.InspectionTools, ", ")))
	}
	return tw.Flush()
}

func printPendingApprovals(w io.Writer, a gateway.ApprovalsStatus, now time.Time) {
	fmt.Fprintln(w)
	switch {
	case a.Error != "":
		fmt.Fprintf(w, "pending approvals could not be read: %s\n", a.Error)
		return
	case a.Pending == 0:
		fmt.Fprintln(w, "no pending approvals")
		return
	}
	fmt.Fprintf(w, "PENDING APPROVALS: %d\n", a.Pending)
	for _, r := range a.Requests {
		fmt.Fprintf(w, "  %s: %s (principal %s), expires in %s\n", r.ID, r.Tool, orDash(r.Principal), r.Expires.Sub(now).Round(time.Second))
	}
	fmt.Fprintf(w, "Answer with: %s, or deny\n", pastable.Command("approvals", "approve", "ID"))
}

// describeLockout is one line an operator can act on: "locked 3m12s ago by call X of tool Y
// (principal P): reason", "halted 2m ago by operator alice: reason".
func describeLockout(l store.Lockout, now time.Time) string {
	var b strings.Builder
	verb := "locked"
	if l.Halted() {
		verb = "halted"
	}
	if l.At.IsZero() {
		fmt.Fprintf(&b, "%s (when is unknown)", verb)
	} else {
		fmt.Fprintf(&b, "%s %s ago", verb, now.Sub(l.At).Round(time.Second))
	}
	if l.By != "" {
		fmt.Fprintf(&b, " by operator %s", l.By)
	}
	if l.CallID != "" || l.Tool != "" {
		fmt.Fprintf(&b, " by call %s of tool %s", orDash(l.CallID), orDash(l.Tool))
	}
	if l.Principal != "" {
		fmt.Fprintf(&b, " (principal %s)", l.Principal)
	}
	if l.Reason != "" {
		b.WriteString(": " + l.Reason)
	}
	if l.Replaced != nil {
		fmt.Fprintf(&b, " [in place of the lockout it replaced: %s]", describeLockout(*l.Replaced, now))
	}
	return b.String()
}

// lockoutNoun is what the lockout is called in messages: "halt" or "lockout".
func lockoutNoun(l store.Lockout) string {
	if l.Halted() {
		return "halt"
	}
	return "lockout"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// notListed says which of a server's tools clients do not see, and why, leaving out those the
// config hides or excludes on purpose.
func notListed(c gateway.ToolCounts) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{
		{c.Quarantined, "quarantined (definition changed: pins list)"},
		{c.Blocked, "blocked by a tool_definition guard (pins list)"},
		{c.Missing, "missing (cannot be served: see the log)"},
	} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return strings.Join(parts, ", ")
}
