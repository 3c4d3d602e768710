package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// reportEvery is how often an export failure that goes on is logged again.
const reportEvery = time.Minute

// exportReporter logs the failed exports of one signal through Options.Logger, instead of
// OpenTelemetry's global error handler (unstructured lines on stderr, one per batch): the first
// failure at WARN, then one line a minute while they go on, and one at INFO once an export
// succeeds again, each with how many items were lost.
type exportReporter struct {
	log  *slog.Logger
	what string // "spans", "audit log records"
	// effect says what a lost export does not lose, for the operator reading the warning.
	effect string
	now    func() time.Time

	mu      sync.Mutex
	failing bool
	next    time.Time // failing: when the failure may be logged again
	lost    int       // items lost since the failures began
	last    error
}

func newReporter(log *slog.Logger, what, effect string) *exportReporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &exportReporter{log: log, what: what, effect: effect, now: time.Now}
}

// done records the result of an export of n items.
func (r *exportReporter) done(n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if r.failing {
			r.log.Info("telemetry: "+r.what+" are exported again", "lost", r.lost)
		}
		r.failing, r.lost, r.last = false, 0, nil
		return
	}
	r.lost += n
	r.last = err
	if now := r.now(); !r.failing || now.After(r.next) {
		r.log.Warn("telemetry: "+r.what+" not exported; is the collector reachable? "+r.effect, "lost", r.lost, "error", err)
		r.failing, r.next = true, now.Add(reportEvery)
	}
}

// err is the failure still going on, for Shutdown: the last export, the flush, failed.
func (r *exportReporter) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.failing {
		return nil
	}
	return fmt.Errorf("%d %s not exported: %w", r.lost, r.what, r.last)
}

// reportingSpans reports the result of every export of its span exporter. It returns nil to the
// SDK, which would only hand the error to the global handler.
type reportingSpans struct {
	sdktrace.SpanExporter
	r *exportReporter
}

func (e reportingSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.r.done(len(spans), e.SpanExporter.ExportSpans(ctx, spans))
	return nil
}

// reportingLogs is reportingSpans for log records.
type reportingLogs struct {
	sdklog.Exporter
	r *exportReporter
}

func (e reportingLogs) Export(ctx context.Context, records []sdklog.Record) error {
	e.r.done(len(records), e.Exporter.Export(ctx, records))
	return nil
}
