package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mcp-gateway/mcp-gateway/store"
)

func runCompact(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compact", "compact [-c FILE] [-o table|json|jsonl]\n\n"+
		"Rewrites the state file (state.db in gateway.state_dir) into a fresh file without the free pages\n"+
		"left by pruned audit records, then renames it over the old one. Every bucket is kept: lockouts,\n"+
		"approvals, pins, the journal of physical calls in flight and the audit log with its checkpoints.\n"+
		"The gateway must be stopped: compact needs the file to itself and refuses while anything holds it.", stdout, stderr)
	fs.addConfig(": its gateway.state_dir holds the state file")
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	res, err := store.Compact(cfg.Gateway.StateDir)
	var locked *store.LockedError
	if errors.As(err, &locked) {
		fmt.Fprintf(stderr, "mcp-gateway compact: %s is held by %s; compact rewrites the file and needs it to itself: stop the gateway (or wait for the command holding it), then run compact again. Nothing was changed.\n",
			locked.Path, holder(locked))
		return exitError{1}
	}
	if err != nil {
		return err
	}
	if fs.output() != formatTable {
		return writeJSON(stdout, fs.output(), res)
	}
	fmt.Fprintf(stdout, "compacted %s: %s -> %s (%d -> %d bytes)\n", res.Path, humanBytes(res.Before), humanBytes(res.After), res.Before, res.After)
	return nil
}

// humanBytes is n in B, KiB, MiB or GiB with one decimal.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
