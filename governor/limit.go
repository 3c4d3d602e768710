package governor

import (
	"context"

	"github.com/mcp-gateway/mcp-gateway/limits"
)

// Limit is the step right after the lockout check: a call over one of the configured limits is
// refused with KindRateLimited before validation, guards, policies or the upstream see it, and
// a concurrent slot the call takes is given back when the rest of the chain returns. A log_only
// limit refuses nothing; the audit record of a call it would have refused names it
// ("rate_limit_would_refuse"). Without limits the step is left out.
func Limit(l *limits.Limiter) Step {
	return func(next Handler) Handler {
		if l.Empty() {
			return next
		}
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			if c.Tool == nil {
				return next.Handle(ctx, c)
			}
			r := limits.Request{Principal: c.Principal, Roles: c.Roles, Session: c.Session,
				Server: c.Tool.Server, Tool: c.Tool.Public, Physical: c.Tool.PhysicalAction()}
			var h limits.Held
			if ref, refused := l.Admit(&r, &h); refused {
				return RateLimited(ref)
			}
			defer l.Release(&h)
			if h.WouldRefuse != "" {
				if c.Detail == nil {
					c.Detail = map[string]any{}
				}
				c.Detail["rate_limit_would_refuse"] = h.WouldRefuse
			}
			return next.Handle(ctx, c)
		})
	}
}

// RateLimited is the outcome of a call a limit refused: a failure envelope of KindRateLimited
// with the limit's id, its window ("1m", or "concurrent") and retry_after_sec.
func RateLimited(ref limits.Refusal) *Outcome {
	env := Failure(KindRateLimited, ref.Reason)
	env["limit"] = ref.Limit
	env["window"] = ref.Window
	env["retry_after_sec"] = ref.RetryAfterSec
	return &Outcome{Result: env.Result(), Kind: KindRateLimited, Reason: ref.Reason}
}
