package governor

import "context"

// CheckResult is step 8: it turns the upstream's result into the caller's result. For envelope
// servers the result must satisfy the envelope contract (§7), otherwise the caller gets
// KindProtocolViolation or KindMissingRunID; passthrough servers' results are forwarded as
// they are. Failures made by later steps (Kind set) pass unchanged.
func CheckResult() Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			out := next.Handle(ctx, c)
			if out.Kind != "" {
				return out
			}
			if out.Result.InputRequests != nil {
				// Not the end of the call (MCP 2026-07-28): the server asks the client for
				// input and is called again with the answers, through the whole chain.
				out.Success = true
				return out
			}
			if c.Tool.Passthrough() {
				out.Success = !out.Result.IsError
				return out
			}
			return fromEnvelope(ParseEnvelope(out.Result, c.Tool.Public, c.Tool.Evaluated))
		})
	}
}
