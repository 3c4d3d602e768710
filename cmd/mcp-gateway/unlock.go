package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func runUnlock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("unlock", `unlock SERVER --reason "what was inspected" -c FILE [--operator NAME] [--addr HOST:PORT] [--token TOKEN]`, stderr)
	o := addOpsFlags(fs)
	reason := fs.String("reason", "", "what the operator inspected on the robot before resetting (required; kept in the audit log)")
	operator := fs.String("operator", defaultOperator(), "who resets the lockout, for the audit log")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "unlock needs exactly one SERVER: the server whose lockout to reset")
		fs.Usage()
		return exitError{2}
	}
	if strings.TrimSpace(*reason) == "" {
		fmt.Fprintln(stderr, "unlock needs --reason: say what was inspected on the robot; it is kept in the audit log")
		fs.Usage()
		return exitError{2}
	}
	cfg, err := o.loadConfig(fs, stderr)
	if err != nil {
		return err
	}
	server, op := pos[0], operatorName(*operator)

	acc, err := openState(cfg, o, false)
	if errors.Is(err, errNoStateFile) {
		return notLocked(stderr, cfg, server)
	}
	if err != nil {
		return err
	}
	defer acc.Close()
	if acc.api != nil {
		return unlockViaAPI(ctx, acc.api, cfg, server, op, *reason, stdout, stderr)
	}
	return unlockFile(ctx, acc.st, cfg, server, op, *reason, stdout, stderr)
}

// unlockViaAPI asks the running gateway to reset the lockout; the gateway audits the reset and
// restarts the upstream.
func unlockViaAPI(ctx context.Context, api *adminClient, cfg *config.Config, server, operator, reason string, stdout, stderr io.Writer) error {
	var res gateway.ResetResult
	err := api.doJSON(ctx, http.MethodPost, "/admin/lockouts/"+url.PathEscape(server)+"/reset",
		gateway.ResetRequest{Reason: reason, Operator: operator}, &res)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound && strings.Contains(ae.msg, gateway.ErrNotLocked.Error()) {
		return notLocked(stderr, cfg, server)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "server %s: %s cleared by %s.\n  It was %s\n", server, lockoutNoun(res.Cleared), operator, describeLockout(res.Cleared, time.Now()))
	if res.AuditError != "" {
		fmt.Fprintf(stderr, "warning: the reset is NOT yet in the audit log (%s); the gateway keeps it queued and writes it when the state file takes writes\n", res.AuditError)
	} else {
		fmt.Fprintf(stdout, "The reset is recorded in the audit log with the reason %q.\n", reason)
	}
	if res.Restarted {
		fmt.Fprintf(stdout, "The gateway restarted server %s; physical actions on it are allowed again.\n", server)
	} else {
		fmt.Fprintf(stderr, "warning: the gateway could not restart server %s: %s; it keeps retrying (see mcp-gateway status)\n",
			server, orDash(res.RestartError))
	}
	var rest []gateway.LockoutStatus
	if err := api.getJSON(ctx, "/admin/lockouts", &rest); err != nil {
		return err
	}
	stillLocked(stdout, cfg, lockoutsOf(rest))
	return nil
}

// unlockFile clears the lockout in the state file of a stopped gateway and audits the reset the
// way the gateway does. The upstream is not running, so it starts fresh with the next gateway.
func unlockFile(ctx context.Context, st *store.Store, cfg *config.Config, server, operator, reason string, stdout, stderr io.Writer) error {
	cleared, ok, err := st.ClearLockout(server)
	if err != nil {
		return err
	}
	if !ok {
		return notLocked(stderr, cfg, server)
	}
	rec, err := st.Audit().AppendSync(context.WithoutCancel(ctx), store.Record{
		Type: store.RecordOperator, Action: "unlock", Principal: operator, Server: server,
		Tool: cleared.Tool, CallID: cleared.CallID, Reason: reason,
		Detail: unlockFileDetail(cleared),
	})
	if err != nil {
		return fmt.Errorf("the lockout of server %s is cleared, but its audit record could not be written: %w", server, err)
	}
	fmt.Fprintf(stdout, "server %s: %s cleared by %s.\n  It was %s\n", server, lockoutNoun(cleared), operator, describeLockout(cleared, time.Now()))
	fmt.Fprintf(stdout, "The reset is audit record %d, with the reason %q.\n", rec.Seq, reason)
	fmt.Fprintf(stdout, "The gateway is not running: server %s starts fresh on the next gateway start.\n", server)
	stillLocked(stdout, cfg, st.Lockouts())
	return nil
}

// unlockFileDetail is the record's detail of an unlock on the state file: the gateway's, and how.
func unlockFileDetail(cleared store.Lockout) map[string]any {
	d := gateway.UnlockDetail(cleared)
	d["via"] = "state file"
	return d
}

// notLocked reports a server without a lockout (exit 1), saying whether the config knows it.
func notLocked(stderr io.Writer, cfg *config.Config, server string) error {
	msg := fmt.Sprintf("server %s is not locked out; nothing to unlock", server)
	if cfg.Server(server) == nil {
		msg += fmt.Sprintf(" (and %s has no server named %q)", cfg.Path, server)
	}
	fmt.Fprintln(stderr, msg)
	return exitError{1}
}

// stillLocked lists the lockouts left after an unlock: with global scope any one of them keeps
// every physical server blocked.
func stillLocked(w io.Writer, cfg *config.Config, rest []store.Lockout) {
	if len(rest) == 0 {
		return
	}
	names := make([]string, len(rest))
	for i, l := range rest {
		names[i] = l.Server
	}
	fmt.Fprintf(w, "Still locked out: %s.", strings.Join(names, ", "))
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

// defaultOperator is the login name, which is what an operator would type anyway.
func defaultOperator() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "operator"
}

// parseInterspersed parses flags that may come before or after the positional arguments
// ("unlock robot --reason x"), which package flag alone stops at. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
