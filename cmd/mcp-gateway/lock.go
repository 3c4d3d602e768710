package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
)

// lockOutput is what `lock -o json` prints: what the running gateway answered, or what the lock
// did on the state file of a stopped gateway.
type lockOutput struct {
	Running bool `json:"running"`
	gateway.LockResult
}

func runLock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("lock", `lock SERVER --reason "why" [-c FILE] [--operator NAME] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]`, stdout, stderr)
	o := addOpsFlags(fs)
	reason := fs.String("reason", "", "why the server is locked out, e.g. a person is inside the cell (required; kept in the audit log)")
	operator := fs.String("operator", defaultOperator(), "who locks the server out, for the audit log")
	fs.addOutput()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fs.usageError("lock needs exactly one SERVER: the physical server to lock out (mcp-gateway halt stops them all)")
	}
	if strings.TrimSpace(*reason) == "" {
		return fs.usageError("lock needs --reason: say why the server is locked out; it is kept in the audit log")
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	server, op := pos[0], operatorName(*operator)
	if err := gateway.LockableServer(cfg, server); err != nil {
		fmt.Fprintf(stderr, "cannot lock out %s: %v\n", server, err)
		return exitError{1}
	}
	acc, err := openStateCreating(cfg, o)
	if err != nil {
		return err
	}
	defer acc.Close()
	var res gateway.LockResult
	if acc.api != nil {
		err = acc.api.doJSON(ctx, http.MethodPost, "/admin/lockouts/"+url.PathEscape(server), gateway.LockRequest{Reason: *reason, Operator: op}, &res)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			// The running gateway's config differs from the file's (a reload not done yet).
			fmt.Fprintf(stderr, "the running gateway refused: %s\n", ae.msg)
			return exitError{1}
		}
	} else {
		res, err = gateway.LockOnStateFile(ctx, acc.st, server, op, *reason, map[string]any{"via": "state file"})
	}
	if err != nil {
		return err
	}
	if fs.output() != formatTable {
		lockWarnings(stderr, res)
		return writeJSON(stdout, fs.output(), lockOutput{Running: acc.api != nil, LockResult: res})
	}
	printLock(stdout, stderr, cfg, server, op, res, acc.api != nil)
	return nil
}

func printLock(stdout, stderr io.Writer, cfg *config.Config, server, operator string, res gateway.LockResult, running bool) {
	now := time.Now()
	if res.AlreadyLocked {
		fmt.Fprintf(stdout, "server %s was already %s; that lockout stays, and your lock is recorded beside it.\n", server, describeLockout(res.Lockout, now))
	} else {
		fmt.Fprintf(stdout, "server %s: locked out by %s.\n", server, operator)
	}
	if running {
		fmt.Fprintln(stdout, "A call in flight on it is not cancelled: it finishes or times out as it would (mcp-gateway halt cancels and stops).")
	} else {
		fmt.Fprintln(stdout, "No gateway is running: the lockout is in the state file and holds from the next start.")
	}
	fmt.Fprintf(stdout, "Physical actions on %s are refused until: %s\n", server, pastable.Command("unlock", server, "--reason", "what was inspected"))
	if cfg.Gateway.LockoutScope == config.LockoutGlobal {
		fmt.Fprintln(stdout, "lockout_scope is global: every physical server is blocked while it holds.")
	}
	lockWarnings(stderr, res)
}

// lockWarnings says what of a lock is not on disk yet.
func lockWarnings(stderr io.Writer, res gateway.LockResult) {
	if res.LockoutError != "" {
		fmt.Fprintf(stderr, "warning: the lockout is in force but not yet in the state file: %s\n", res.LockoutError)
	}
	if res.AuditError != "" {
		fmt.Fprintf(stderr, "warning: the lock is NOT yet in the audit log (%s); it is queued and written when the state file takes writes\n", res.AuditError)
	}
}
