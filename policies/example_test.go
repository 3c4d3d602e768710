package policies_test

import (
	"context"
	"fmt"

	"github.com/mcp-gateway/mcp-gateway/policies"
)

func Example() {
	engine, err := policies.Compile([]policies.Rule{
		{ID: "robot-actions", Effect: policies.Allow, When: `server == "robot"`},
		{ID: "speed-limit", Effect: policies.Deny, When: `args[?"speed"].orValue(0.0) > 0.5`, Reason: "speed above 0.5 m/s"},
		{ID: "long-wait", Effect: policies.RequireApproval, When: `upstream_tool == "wait" && args.timeout_sec > 60.0`, Reason: "long wait"},
	}, policies.Options{Default: policies.Deny})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, call := range []policies.Input{
		{Tool: "robot__navigate_to", Server: "robot", UpstreamTool: "navigate_to", Args: []byte(`{"target": "table", "speed": 0.3}`)},
		{Tool: "robot__navigate_to", Server: "robot", UpstreamTool: "navigate_to", Args: []byte(`{"target": "table", "speed": 0.8}`)},
		{Tool: "robot__wait", Server: "robot", UpstreamTool: "wait", Args: []byte(`{}`)},
		{Tool: "cloud__search", Server: "cloud", UpstreamTool: "search"},
	} {
		d := engine.Evaluate(context.Background(), &call)
		fmt.Printf("%s: %s (%s)\n", call.Tool, d.Effect, d.Reason)
	}
	// Output:
	// robot__navigate_to: allow ()
	// robot__navigate_to: deny (speed above 0.5 m/s)
	// robot__wait: require_approval (rule long-wait could not be evaluated (no such key: timeout_sec), so it applies: long wait)
	// cloud__search: deny (no rule matched; the default decision is deny)
}
