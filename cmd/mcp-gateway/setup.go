package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// governance is what `serve` and `agent` build a governing gateway from: the compiled policies
// and guards, the metrics registry and the state file, which the caller closes last.
type governance struct {
	policies *policies.Engine
	guards   *gateway.GuardSets
	registry *prometheus.Registry
	store    *store.Store
}

// openGovernance compiles the config's policies and guards (printing every problem, exit 1) and
// opens the state file, warning about lockouts left from before this start. With tel and
// telemetry.audit_logs, every audit record the store makes durable is also exported as an OTLP
// log record; tel is nil when telemetry is off, and must be shut down after the store is closed
// (gv.close), so that the records written while closing are exported too.
func openGovernance(cfg *config.Config, logger *slog.Logger, stderr io.Writer, tel *telemetry.Provider) (*governance, error) {
	engine, err := gateway.CompilePolicies(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, exitError{1}
	}
	guardSets, err := gateway.BuildGuards(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, exitError{1}
	}
	reg := gateway.NewRegistry()
	minFree := cfg.Audit.MinFreeBytes
	if minFree == 0 {
		minFree = -1 // the file turned the check off
	}
	st, err := store.Open(cfg.Gateway.StateDir, store.Options{
		Logger:        logger,
		OnAuditCommit: gateway.AuditMetrics(reg),
		CommitTimeout: time.Duration(cfg.Audit.CommitTimeout),
		MinFreeBytes:  minFree,
		Retention:     store.Retention{MaxAge: time.Duration(cfg.Audit.Retention.MaxAge), MaxBytes: cfg.Audit.Retention.MaxBytes},

		// Nil unless telemetry.audit_logs is on.
		OnAuditDurable: tel.AuditExporter(),
	})
	if err != nil {
		return nil, fmt.Errorf("opening the state file: %w", err)
	}
	for _, l := range st.Lockouts() {
		logger.Warn("physical actions are locked out from before this start; an operator must inspect the robot and unlock",
			"server", l.Server, "tool", l.Tool, "since", l.At, "reason", l.Reason)
	}
	return &governance{policies: engine, guards: guardSets, registry: reg, store: st}, nil
}

// close closes the state file, flushing the audit log; it runs last.
func (gv *governance) close(logger *slog.Logger) {
	if err := gv.store.Close(); err != nil {
		logger.Error("closing the state file", "error", err)
	}
}
