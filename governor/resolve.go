package governor

import (
	"context"
	"fmt"
)

// Resolve is step 1: it finds the tool behind the public name. An unknown name gets
// KindUnknownTool; a hidden tool gets KindHiddenTool.
func Resolve(r Resolver) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			t, ok := r.Resolve(c.Name)
			if !ok {
				return Refuse(KindUnknownTool, fmt.Sprintf(
					"Unknown tool: %s. Only the tools in this gateway's tools/list can be called; list them again and use one of those names.", c.Name))
			}
			if t.Hidden {
				return Refuse(KindHiddenTool, fmt.Sprintf(
					"Tool %s is reserved for the robot's operators and cannot be called by a model or MCP client. Use the listed tools instead.", c.Name))
			}
			c.Tool = t
			if t.Quarantine != "" {
				if !c.Halt || !t.Stop {
					return Refuse(KindDefinitionChanged, t.Quarantine)
				}
				// A halt's stop goes out: the robot must stop whatever its description says.
				if c.Detail == nil {
					c.Detail = map[string]any{}
				}
				c.Detail["quarantined"] = t.Quarantine
			}
			return next.Handle(ctx, c)
		})
	}
}
