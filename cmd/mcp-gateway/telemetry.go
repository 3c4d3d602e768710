package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// telemetryFlushTimeout bounds how long a stopping gateway waits for its last spans to reach
// the collector; a collector that cannot be reached costs this much at exit, never a call.
const telemetryFlushTimeout = 5 * time.Second

// startTelemetry builds the tracer provider that cfg's telemetry section and the OTEL_*
// environment describe — nil when neither names an endpoint — and returns the logger to use:
// logger itself when telemetry is off, and logger with trace and span ids on the lines of traced
// calls when it is on. stop flushes what is batched; it is safe to call with telemetry off.
func startTelemetry(ctx context.Context, cfg *config.Config, logger *slog.Logger) (p *telemetry.Provider, log *slog.Logger, stop func(), err error) {
	p, err = telemetry.New(ctx, cfg.Telemetry, telemetry.Options{ServiceName: cfg.Gateway.Name, Version: gateway.Version, Logger: logger})
	if err != nil {
		return nil, logger, func() {}, fmt.Errorf("cannot start telemetry: %w; fix the telemetry section of %s or the OTEL_* environment "+
			"(with an endpoint in neither, the gateway runs without tracing)", err, cfg.Path)
	}
	if p == nil {
		return nil, logger, func() {}, nil
	}
	log = slog.New(telemetry.LogHandler(logger.Handler()))
	log.Info("telemetry on: " + p.Describe())
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			log.Warn("telemetry: spans not flushed at exit", "error", err)
		}
	}
	return p, log, stop, nil
}
