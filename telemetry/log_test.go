package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// logLine logs one line through LogHandler over a JSON handler, with ctx, on the logger that
// with makes, and returns it decoded.
func logLine(t *testing.T, ctx context.Context, with func(*slog.Logger) *slog.Logger) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	log := with(slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))))
	log.InfoContext(ctx, "call answered", "tool", "arm__move")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	return line
}

func TestLogHandlerAddsTheSpansIDs(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: [16]byte{1, 2, 3}, SpanID: [8]byte{4, 5}})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	plain := func(l *slog.Logger) *slog.Logger { return l }
	grouped := func(l *slog.Logger) *slog.Logger {
		return l.With("gateway", "cell-3").WithGroup("call").With("id", "c-1")
	}

	line := logLine(t, traced, plain)
	if line["trace_id"] != sc.TraceID().String() || line["span_id"] != sc.SpanID().String() || line["tool"] != "arm__move" {
		t.Errorf("traced line %v: want trace_id %s and span_id %s", line, sc.TraceID(), sc.SpanID())
	}

	// On a grouped logger the ids stay top-level keys; the rest goes where it went.
	line = logLine(t, traced, grouped)
	call, _ := line["call"].(map[string]any)
	if line["trace_id"] != sc.TraceID().String() || line["span_id"] != sc.SpanID().String() || line["gateway"] != "cell-3" ||
		call["id"] != "c-1" || call["tool"] != "arm__move" || call["trace_id"] != nil {
		t.Errorf("traced line of a grouped logger: %v", line)
	}

	for name, ctx := range map[string]context.Context{
		"untraced":     context.Background(),
		"invalid span": trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}),
	} {
		for _, with := range []func(*slog.Logger) *slog.Logger{plain, grouped} {
			line := logLine(t, ctx, with)
			if _, ok := line["trace_id"]; ok {
				t.Errorf("%s line %v has a trace_id", name, line)
			}
			if _, ok := line["span_id"]; ok {
				t.Errorf("%s line %v has a span_id", name, line)
			}
		}
	}

	// A record handled without a context is passed on as it is.
	var buf bytes.Buffer
	h := LogHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	//lint:ignore SA1012 a handler may be called with a nil context
	if err := h.Handle(nil, slog.NewRecord(time.Now(), slog.LevelWarn, "no context", 0)); err != nil || !bytes.Contains(buf.Bytes(), []byte(`"msg":"no context"`)) {
		t.Errorf("nil context: %v, %s", err, buf.Bytes())
	}
	if h.Enabled(traced, slog.LevelInfo) || !h.Enabled(traced, slog.LevelWarn) {
		t.Error("Enabled is not the wrapped handler's")
	}
}
