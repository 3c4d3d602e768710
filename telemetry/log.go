package telemetry

import (
	"context"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that a record logged with a context holding a valid span context (a
// traced call's) carries trace_id and span_id, the keys a log backend joins to traces on. They
// are top-level keys even on a logger made with WithGroup. Records logged without a context,
// or outside any trace, are passed on unchanged.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{Handler: h} }

type logHandler struct {
	// Handler is the wrapped handler with every WithAttrs and WithGroup applied.
	slog.Handler
	// top is the wrapped handler as it was before the first WithGroup (nil when there was
	// none), and since what was applied after it, in order: a traced record is handled by top
	// with the ids, then since, so that the ids are not put inside the groups.
	top   slog.Handler
	since []func(slog.Handler) slog.Handler
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return l.Handler.Handle(ctx, r)
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return l.Handler.Handle(ctx, r)
	}
	ids := []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
	if l.top == nil {
		r = r.Clone()
		r.AddAttrs(ids...)
		return l.Handler.Handle(ctx, r)
	}
	h := l.top.WithAttrs(ids)
	for _, apply := range l.since {
		h = apply(h)
	}
	return h.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return l
	}
	n := logHandler{Handler: l.Handler.WithAttrs(attrs), top: l.top}
	if l.top != nil {
		n.since = append(slices.Clip(l.since), func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })
	}
	return n
}

func (l logHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return l
	}
	n := logHandler{Handler: l.Handler.WithGroup(name), top: l.top,
		since: append(slices.Clip(l.since), func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
	if n.top == nil {
		n.top = l.Handler
	}
	return n
}
