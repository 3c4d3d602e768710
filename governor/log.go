package governor

import (
	"context"
	"log/slog"
	"time"
)

// Log is the outermost step for now: it logs every call once it has an outcome, refusals at
// info with their kind and reason, successes at debug. Arguments are never logged.
func Log(logger *slog.Logger) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			out := next.Handle(ctx, c)
			level := slog.LevelDebug
			if out.Kind != "" {
				level = slog.LevelInfo
			}
			if !logger.Enabled(ctx, level) {
				return out // nothing built for a line nobody reads
			}
			attrs := []slog.Attr{
				slog.String("call", c.ID),
				slog.String("tool", c.Name),
				slog.String("outcome", out.Label()),
				slog.Duration("duration", time.Since(c.Start)),
			}
			if c.Tool != nil {
				attrs = append(attrs, slog.String("server", c.Tool.Server))
			}
			if out.Kind != "" {
				attrs = append(attrs, slog.String("reason", out.Reason))
			}
			logger.LogAttrs(ctx, level, "tool call", attrs...)
			return out
		})
	}
}
