package governor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
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
			_, span := telemetry.Child(ctx, spanValidate)
			if out := validate(ctx, redact, c); out != nil {
				telemetry.Fail(span, string(out.Kind))
				span.End()
				return out
			}
			span.End()
			return next.Handle(ctx, c)
		})
	}
}

// validate is the refusal of c's arguments, or nil when they pass.
func validate(ctx context.Context, redact *Redactor, c *Call) *Outcome {
	if !isJSONObject(c.Args) {
		return Refuse(KindInvalidArguments, fmt.Sprintf("the arguments of %s must be a JSON object", c.Name))
	}
	if s := c.Tool.Schema; s != nil {
		if problems := s.Validate(c.Args); len(problems) > 0 {
			reason := redact.ScrubText(ctx, c, argschema.Describe(c.Name, problems))
			return Refuse(KindInvalidArguments, reason)
		}
	}
	return nil
}

// isJSONObject reports whether b is a JSON object (by its first byte; the rest is the schema's
// and the MCP layer's to check). Arguments of another shape are refused here, inside the chain,
// so that the refusal is audited like every other.
func isJSONObject(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}
