package argschema_test

import (
	"encoding/json"
	"fmt"

	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
)

func Example() {
	// Compiled once, when the tool is discovered.
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"target": {"type": "string"},
			"speed":  {"type": "number", "maximum": 1.5},
			"mode":   {"enum": ["fast", "slow"]}
		},
		"required": ["target"],
		"additionalProperties": false
	}`)
	s, err := argschema.Compile("move", schema, argschema.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Checked on every call.
	problems := s.Validate(json.RawMessage(`{"speed": 2, "mode": "turbo", "colour": "red"}`))
	fmt.Println(argschema.Describe("move", problems))
	// Output:
	// invalid arguments for move: 4 problems: (arguments): missing required property "target"; (arguments): property "colour" is not allowed (allowed: mode, speed, target); /mode: must be one of "fast", "slow" but is "turbo"; /speed: must be <= 1.5 but is 2. Fix all of them and call move again.
}

func ExampleCompile_externalReference() {
	_, err := argschema.Compile("move", map[string]any{"$ref": "file:///etc/passwd"}, argschema.Limits{})
	fmt.Println(err)
	// Output:
	// input schema of tool "move" refers to "file:///etc/passwd", outside itself: references to files and URLs are never followed; refer inside the schema instead, like "#/$defs/name"
}
