package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// unlockOutput is what `unlock -o json` prints: what the running gateway answered, or what the
// unlock did on the state file of a stopped gateway (nothing restarted there), and the servers
// still locked out.
type unlockOutput struct {
	Running bool `json:"running"`
	gateway.ResetResult
	// AuditSeq is the unlock's audit record, when it is known (on the state file).
	AuditSeq    uint64   `json:"audit_seq,omitempty"`
	StillLocked []string `json:"still_locked"`
}

func runUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("unlock", `unlock SERVER --reason "what was inspected" [-c FILE] [--operator NAME] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]`, stdout, stderr)
	o := addOpsFlags(fs)
	reason := fs.String("reason", "", "what the operator inspected on the robot before resetting (required; kept in the audit log)")
	operator := fs.String("operator", defaultOperator(), "who resets the lockout, for the audit log")
	fs.addOutput()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fs.usageError("unlock needs exactly one SERVER: the server whose lockout to reset")
	}
	if strings.TrimSpace(*reason) == "" {
		return fs.usageError("unlock needs --reason: say what was inspected on the robot; it is kept in the audit log")
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	server, op := pos[0], operatorName(*operator)

	acc, err := openState(cfg, o, false)
	if errors.Is(err, errNoStateFile) {
		return notLocked(cfg, server, nil)
	}
	if err != nil {
		return err
	}
	defer acc.Close()
	var out unlockOutput
	if acc.api != nil {
		out, err = unlockViaAPI(ctx, acc.api, cfg, server, op, *reason)
	} else {
		out, err = unlockFile(ctx, acc.st, cfg, server, op, *reason)
	}
	if err != nil {
		return err
	}
	if fs.output() != formatTable {
		unlockWarnings(stderr, server, out)
		return writeJSON(stdout, fs.output(), out)
	}
	printUnlock(stdout, stderr, cfg, server, op, *reason, out)
	return nil
}

// unlockViaAPI asks the running gateway to reset the lockout; the gateway audits the reset and
// restarts the upstream.
func unlockViaAPI(ctx context.Context, api *adminClient, cfg *config.Config, server, operator, reason string) (unlockOutput, error) {
	out := unlockOutput{Running: true}
	err := api.doJSON(ctx, http.MethodPost, "/admin/lockouts/"+url.PathEscape(server)+"/reset",
		gateway.ResetRequest{Reason: reason, Operator: operator}, &out.ResetResult)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound && strings.Contains(ae.msg, gateway.ErrNotLocked.Error()) {
		var rest []gateway.LockoutStatus
		_ = api.getJSON(ctx, "/admin/lockouts", &rest) // only for the hint
		return out, notLocked(cfg, server, lockoutsOf(rest))
	}
	if err != nil {
		return out, err
	}
	var rest []gateway.LockoutStatus
	if err := api.getJSON(ctx, "/admin/lockouts", &rest); err != nil {
		return out, err
	}
	out.StillLocked = serversOf(lockoutsOf(rest))
	return out, nil
}

// unlockFile clears the lockout in the state file of a stopped gateway and audits the reset the
// way the gateway does. The upstream is not running, so it starts fresh with the next gateway.
func unlockFile(ctx context.Context, st *store.Store, cfg *config.Config, server, operator, reason string) (unlockOutput, error) {
	var out unlockOutput
	cleared, ok, err := st.ClearLockout(server)
	if err != nil {
		return out, err
	}
	if !ok {
		return out, notLocked(cfg, server, st.Lockouts())
	}
	out.Cleared = cleared
	rec, err := st.Audit().AppendSync(context.WithoutCancel(ctx), store.Record{
		Type: store.RecordOperator, Action: "unlock", Principal: operator, Server: server,
		Tool: cleared.Tool, CallID: cleared.CallID, Reason: reason,
		Detail: unlockFileDetail(cleared),
	})
	if err != nil {
		return out, fmt.Errorf("the lockout of server %s is cleared, but its audit record could not be written: %w", server, err)
	}
	out.AuditSeq = rec.Seq
	out.StillLocked = serversOf(st.Lockouts())
	return out, nil
}

// printUnlock says what the unlock cleared, that it is audited, whether the server restarted,
// and what is still locked out.
func printUnlock(stdout, stderr io.Writer, cfg *config.Config, server, operator, reason string, out unlockOutput) {
	fmt.Fprintf(stdout, "server %s: %s cleared by %s.\n  It was %s\n", server, lockoutNoun(out.Cleared), operator, describeLockout(out.Cleared, time.Now()))
	switch {
	case !out.Running:
		fmt.Fprintf(stdout, "The reset is audit record %d, with the reason %q.\n", out.AuditSeq, reason)
		fmt.Fprintf(stdout, "The gateway is not running: server %s starts fresh on the next gateway start.\n", server)
	case out.AuditError == "":
		fmt.Fprintf(stdout, "The reset is recorded in the audit log with the reason %q.\n", reason)
	}
	if out.Running && out.Restarted {
		switch {
		case slices.Contains(out.StillLocked, server):
			// A call that ended unknown meanwhile (a stop tool that hung, say) locked it again.
			fmt.Fprintf(stdout, "The gateway restarted server %s, but it is locked out again (see below and mcp-gateway status).\n", server)
		case len(out.StillLocked) > 0 && cfg.Gateway.LockoutScope == config.LockoutGlobal:
			fmt.Fprintf(stdout, "The gateway restarted server %s; its lockout is cleared, but other lockouts still block it (below).\n", server)
		default:
			fmt.Fprintf(stdout, "The gateway restarted server %s; physical actions on it are allowed again.\n", server)
		}
	}
	unlockWarnings(stderr, server, out)
	stillLocked(stdout, cfg, out.StillLocked)
}

// unlockWarnings says what of a reset through the running gateway did not happen yet.
func unlockWarnings(stderr io.Writer, server string, out unlockOutput) {
	if !out.Running {
		return
	}
	if out.AuditError != "" {
		fmt.Fprintf(stderr, "warning: the reset is NOT yet in the audit log (%s); the gateway keeps it queued and writes it when the state file takes writes\n", out.AuditError)
	}
	if !out.Restarted {
		fmt.Fprintf(stderr, "warning: the gateway could not restart server %s: %s; it keeps retrying (see mcp-gateway status)\n",
			server, orDash(out.RestartError))
	}
}

// unlockFileDetail is the record's detail of an unlock on the state file: the gateway's, and how.
func unlockFileDetail(cleared store.Lockout) map[string]any {
	d := gateway.UnlockDetail(cleared)
	d["via"] = "state file"
	return d
}

// notLocked is the error of an unlock of a server without a lockout (exit 1), with the name it
// most likely meant: a server locked out, else one of the config.
func notLocked(cfg *config.Config, server string, locked []store.Lockout) error {
	msg := fmt.Sprintf("server %s is not locked out; nothing to unlock", server)
	if names := serversOf(locked); len(names) > 0 {
		msg += fmt.Sprintf("%s; locked out: %s", didYouMean(server, names), strings.Join(names, ", "))
	} else if cfg.Server(server) == nil {
		msg += fmt.Sprintf(" (and %s has no server named %q)%s", cfg.Path, server, didYouMean(server, serverNames(cfg)))
	}
	return errors.New(msg)
}

// stillLocked lists the lockouts left after an unlock: with global scope any one of them keeps
// every physical server blocked.
func stillLocked(w io.Writer, cfg *config.Config, rest []string) {
	if len(rest) == 0 {
		return
	}
	fmt.Fprintf(w, "Still locked out: %s.", strings.Join(rest, ", "))
	if cfg.Gateway.LockoutScope == config.LockoutGlobal {
		fmt.Fprint(w, " With lockout_scope global, every physical server stays blocked until these are unlocked too.")
	}
	fmt.Fprintln(w)
}

func lockoutsOf(ls []gateway.LockoutStatus) []store.Lockout {
	out := make([]store.Lockout, len(ls))
	for i, l := range ls {
		out[i] = l.Lockout
	}
	return out
}

// serversOf names the servers of lockouts, never nil.
func serversOf(ls []store.Lockout) []string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Server
	}
	return names
}

// defaultOperator is the login name, which is what an operator would type anyway.
func defaultOperator() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "operator"
}
