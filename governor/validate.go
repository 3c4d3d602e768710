package governor

import (
	"context"

	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
)

// Validate is step 3: the arguments must match the tool's input schema, compiled once when the
// tool was discovered. Every problem is listed with its path in one KindInvalidArguments
// failure, so a model can fix the call in one turn. Tools served unvalidated (their schema did
// not compile and the config allows it) have no schema and pass.
//
// A problem may quote an argument's value; values under redacted keys are scrubbed from the
// reason, since it is logged and audited.
func Validate(redact *Redactor) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			if s := c.Tool.Schema; s != nil {
				if problems := s.Validate(c.Args); len(problems) > 0 {
					reason := Scrub(argschema.Describe(c.Name, problems), redact.Secrets(c.Args))
					return Refuse(KindInvalidArguments, reason)
				}
			}
			return next.Handle(ctx, c)
		})
	}
}
