package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// haltOutput is what `halt -o json` prints: the running gateway's answer, or on the state
// file of a stopped gateway the same without what only a running gateway does (no call
// cancelled, no stop tool sent, no timings).
type haltOutput struct {
	Running bool `json:"running"`
	gateway.HaltReport
	// StateFile is the state file halted on, when no gateway was running.
	StateFile string `json:"state_file,omitempty"`
}

func runHalt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("halt", `halt --reason "why the robot is stopped" [-c FILE] [--operator NAME] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]`, stdout, stderr)
	o := addOpsFlags(fs)
	reason := fs.String("reason", "", "why the robot is being stopped (required; kept in the audit log)")
	operator := fs.String("operator", defaultOperator(), "who halts, for the audit log")
	fs.addOutput()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fs.usageError("halt takes no SERVER: it stops every physical server (use mcp-gateway lock SERVER for one)")
	}
	if strings.TrimSpace(*reason) == "" {
		return fs.usageError("halt needs --reason: say why the robot is being stopped; it is kept in the audit log")
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	op := operatorName(*operator)
	acc, err := openStateCreating(cfg, o)
	if err != nil {
		return err
	}
	defer acc.Close()
	if acc.api != nil {
		var rep gateway.HaltReport
		if err := acc.api.doJSON(ctx, http.MethodPost, "/admin/halt", gateway.HaltRequest{Reason: *reason, Operator: op}, &rep); err != nil {
			return err
		}
		return printHalt(stdout, stderr, fs.output(), cfg, rep)
	}
	return haltFile(ctx, acc.st, cfg, op, *reason, fs.output(), stdout, stderr)
}

// haltFile puts the halt lockouts in the state file of a stopped gateway and audits them the
// way the gateway does. No gateway runs, so there is no call to cancel and no stop tool to send.
func haltFile(ctx context.Context, st *store.Store, cfg *config.Config, operator, reason, format string, stdout, stderr io.Writer) error {
	servers := gateway.PhysicalServers(cfg)
	if len(servers) == 0 {
		fmt.Fprintf(stderr, "%s configures no physical server: nothing to halt\n", cfg.Path)
		return exitError{1}
	}
	at := time.Now()
	halted, err := gateway.HaltLockouts(st, servers, operator, reason, at, map[string]any{"via": "state file"})
	if err == nil {
		flushCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = st.Audit().Flush(flushCtx)
		cancel()
	}
	if err != nil {
		err = fmt.Errorf("the halt is in the state file, but its audit records could not be written: %w", err)
	}
	if format != formatTable {
		out := haltOutput{StateFile: st.Path(), HaltReport: gateway.HaltReport{
			Operator: operator, Reason: reason, At: at.UTC(), Servers: halted, Cancelled: []gateway.CancelledCall{},
		}}
		if err != nil {
			out.AuditError = err.Error()
		}
		if werr := writeJSON(stdout, format, out); werr != nil {
			return werr
		}
		return err
	}
	fmt.Fprintf(stdout, "HALT by %s on the state file %s (no gateway is running): %q\n", operator, st.Path(), reason)
	printHaltedServers(stdout, halted, false)
	fmt.Fprintln(stdout, "No gateway is running, so no call was in flight to cancel and no stop tool was sent.")
	fmt.Fprint(stdout, "From the next start on, physical actions stay refused. ")
	printUnlockHint(stdout, halted)
	return err
}

// printHalt prints a running gateway's halt report. It exits 1 when a stop tool did not answer
// with success or the audit records are not on disk: the halt holds, but someone must look.
func printHalt(stdout, stderr io.Writer, format string, cfg *config.Config, rep gateway.HaltReport) error {
	if len(rep.Servers) == 0 {
		fmt.Fprintf(stderr, "the running gateway has no physical server (%s): nothing was halted\n", cfg.Path)
		return exitError{1}
	}
	if format != formatTable {
		if err := writeJSON(stdout, format, haltOutput{Running: true, HaltReport: rep}); err != nil {
			return err
		}
		return haltWarnings(stderr, rep)
	}
	fmt.Fprintf(stdout, "HALT by %s: %q\n", rep.Operator, rep.Reason)
	printHaltedServers(stdout, rep.Servers, true)
	if len(rep.Cancelled) == 0 {
		fmt.Fprintln(stdout, "No physical call was in flight.")
	} else {
		fmt.Fprintf(stdout, "Cancelled %d physical call(s):\n", len(rep.Cancelled))
		for _, c := range rep.Cancelled {
			fmt.Fprintf(stdout, "  call %s of %s (principal %s, in flight for %s): %s\n",
				c.CallID, c.Tool, orDash(c.Principal), msDuration(c.RanMS), cancelledText(c))
		}
	}
	t := rep.Timings
	fmt.Fprintf(stdout, "Timings from the request: locked %s, stop tool(s) sent %s, last cancelled call ended %s, answered %s.\n",
		ms(t.LockedMS), msOrDash(t.StopSentMS), msOrDash(t.LastCancelledEndedMS), ms(t.TookMS))
	printUnlockHint(stdout, rep.Servers)
	return haltWarnings(stderr, rep)
}

// haltWarnings says what of a halt someone must look at: a stop tool that did not confirm the
// stop, a halt not yet in the state file or the audit log. Any of them exits 1; the halt holds
// all the same.
func haltWarnings(stderr io.Writer, rep gateway.HaltReport) error {
	failed := false
	for _, s := range rep.Servers {
		if s.Stop.Status != gateway.StopOK && s.Stop.Status != gateway.StopNone {
			failed = true
			fmt.Fprintf(stderr, "warning: the stop tool of %s did not confirm the stop (%s): the halt lockout holds, but check the robot\n", s.Server, s.Stop.Status)
		}
		if s.LockoutError != "" {
			failed = true
			fmt.Fprintf(stderr, "warning: the halt of %s is in force but not yet in the state file: %s\n", s.Server, s.LockoutError)
		}
	}
	if rep.AuditError != "" {
		failed = true
		fmt.Fprintf(stderr, "warning: the halt is NOT yet in the audit log (%s); the gateway keeps it queued and writes it when the state file takes writes\n", rep.AuditError)
	}
	if failed {
		return exitError{1}
	}
	return nil
}

func printHaltedServers(w io.Writer, servers []gateway.HaltedServer, running bool) {
	now := time.Now()
	for _, s := range servers {
		switch {
		case s.AlreadyHalted:
			fmt.Fprintf(w, "  %s: already %s; that halt stays\n", s.Server, describeLockout(s.Lockout, now))
		case s.Lockout.Replaced != nil:
			fmt.Fprintf(w, "  %s: halted, in place of the lockout it had (%s)\n", s.Server, describeLockout(*s.Lockout.Replaced, now))
		default:
			fmt.Fprintf(w, "  %s: halted\n", s.Server)
		}
		if !running {
			continue
		}
		switch st := s.Stop; st.Status {
		case gateway.StopNone:
			fmt.Fprintf(w, "    no stop tool configured (tools.overrides.<tool>.stop: true)\n")
		case gateway.StopOK:
			fmt.Fprintf(w, "    stop tool %s (call %s): ok; sent %s after the request, answered after %s\n", st.Tool, st.CallID, ms(st.SentMS), ms(st.AnsweredMS))
		case gateway.StopNoAnswer:
			fmt.Fprintf(w, "    stop tool %s (call %s): sent %s after the request, no answer yet\n", st.Tool, st.CallID, msOrDash(st.SentMS))
		default:
			fmt.Fprintf(w, "    stop tool %s (call %s): %s %s: %s\n", st.Tool, st.CallID, st.Status, orDash(st.Kind), firstLine(st.Reason, 200))
		}
	}
}

// printUnlockHint says how the halt ends: an unlock of each server, with a reason.
func printUnlockHint(w io.Writer, servers []gateway.HaltedServer) {
	fmt.Fprintln(w, "Only an unlock with a reason, after the robot is inspected, ends the halt:")
	for _, s := range servers {
		fmt.Fprintf(w, "  %s\n", pastable.Command("unlock", s.Server, "--reason", "what was inspected"))
	}
}

func cancelledText(c gateway.CancelledCall) string {
	switch c.Outcome {
	case gateway.CancelledUnknown:
		return fmt.Sprintf("it had been sent, so its outcome is unknown (recorded so; the server was told to stop it); ended %s after the request", ms(c.EndedMS))
	case gateway.CancelledNotSent:
		return "it was waiting for its turn and was not sent"
	case gateway.CancelledFinished:
		return fmt.Sprintf("it ended on its own (%s) as it was cancelled", orDash(c.Kind))
	default:
		return "still unwinding when the halt answered"
	}
}

func ms(v float64) string { return fmt.Sprintf("%.1f ms", v) }

// msDuration is a duration in milliseconds as a person reads it: "850 ms", "3.2s", "4m10s".
func msDuration(v float64) string {
	if v < 1000 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return (time.Duration(v) * time.Millisecond).Round(100 * time.Millisecond).String()
}

func msOrDash(v float64) string {
	if v == 0 {
		return "-"
	}
	return ms(v)
}

// operatorName is the --operator flag, "operator" when blank.
func operatorName(flag string) string {
	if op := strings.TrimSpace(flag); op != "" {
		return op
	}
	return "operator"
}

// openStateCreating is openState for the operator's stops: when no gateway has run with this
// state_dir yet, it creates the state file, so that the first start is already stopped.
func openStateCreating(cfg *config.Config, o *opsFlags) (*stateAccess, error) {
	acc, err := openState(cfg, o, false)
	if !errors.Is(err, errNoStateFile) {
		return acc, err
	}
	st, err := store.Open(cfg.Gateway.StateDir, store.Options{})
	var locked *store.LockedError
	if errors.As(err, &locked) {
		return openState(cfg, o, false) // a gateway started meanwhile
	}
	if err != nil {
		return nil, err
	}
	return &stateAccess{st: st}, nil
}
