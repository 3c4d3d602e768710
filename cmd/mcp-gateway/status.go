package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// statusReport is what `status --json` prints: the gateway's status and whether it came from a
// running gateway. Without one there are no upstreams to report, only the state file's lockouts.
type statusReport struct {
	Running bool `json:"running"`
	gateway.Status

	noFile bool // the state file does not exist yet
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", "status -c FILE [--json] [--addr HOST:PORT] [--token TOKEN]", stderr)
	o := addOpsFlags(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitError{2}
	}
	cfg, err := o.loadConfig(fs, stderr)
	if err != nil {
		return err
	}
	rep, err := readStatus(ctx, cfg, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printStatus(stdout, cfg, rep)
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
	}
	return rep, nil
}

func printStatus(w io.Writer, cfg *config.Config, rep statusReport) error {
	if rep.Running {
		fmt.Fprintf(w, "gateway %s (mcp-gateway %s) is running; state file %s\n\n", rep.Gateway, rep.Version, rep.StateFile)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tSTATE\tPHYSICAL\tTOOLS\tRESTARTS\tLAST ERROR")
		for _, u := range rep.Upstreams {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", u.Name, u.State, yesNo(u.Physical), u.Tools, u.Restarts, orDash(firstLine(u.LastError, 80)))
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
	if len(rep.Lockouts) == 0 {
		fmt.Fprintln(w, "no lockouts: physical actions are allowed")
		return nil
	}
	fmt.Fprintln(w, "LOCKOUTS")
	now := time.Now()
	for _, l := range rep.Lockouts {
		fmt.Fprintf(w, "  %s: %s\n", l.Server, describeLockout(l.Lockout, now))
	}
	if cfg.Gateway.LockoutScope == config.LockoutGlobal {
		fmt.Fprintln(w, "lockout_scope is global: every physical server is blocked while any lockout is active.")
	}
	fmt.Fprintf(w, "Inspect the robot, then: mcp-gateway unlock SERVER --reason \"what was inspected\" -c %s\n", cfg.Path)
	return nil
}

// describeLockout is one line an operator can act on: "locked 3m12s ago by call X of tool Y
// (principal P): reason".
func describeLockout(l store.Lockout, now time.Time) string {
	var b strings.Builder
	if l.At.IsZero() {
		b.WriteString("locked (when is unknown)")
	} else {
		fmt.Fprintf(&b, "locked %s ago", now.Sub(l.At).Round(time.Second))
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
	return b.String()
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
