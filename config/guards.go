package config

import (
	"go.yaml.in/yaml/v3"
)

// Guardrails are the content guards of SPEC.md §10, per stage.
type Guardrails struct {
	ToolCall       []Guard `yaml:"tool_call" json:"tool_call,omitempty" jsonschema:"description=Guards on arguments on their way to a tool."`
	ToolResult     []Guard `yaml:"tool_result" json:"tool_result,omitempty" jsonschema:"description=Guards on results on their way back."`
	ToolDefinition []Guard `yaml:"tool_definition" json:"tool_definition,omitempty" jsonschema:"description=Guards on every string of the upstream tool, prompt, resource and resource template definitions at discovery (schemas at any depth, enums, annotations); a finding that blocks keeps the item out."`
	// UpstreamContent covers what an upstream puts in front of a model or a user outside a
	// tool result: resource contents, prompt messages, completion values, sampling and
	// elicitation requests. where.tools matches the item's public name (see the README).
	UpstreamContent []Guard `yaml:"upstream_content" json:"upstream_content,omitempty" jsonschema:"description=Guards on resource contents, prompt messages, completion values and the sampling and elicitation requests of upstreams; block refuses them with an error naming the guard."`
	Input           []Guard `yaml:"input" json:"input,omitempty" jsonschema:"description=Agent mode: guards on the task."`
	Output          []Guard `yaml:"output" json:"output,omitempty" jsonschema:"description=Agent mode: guards on the final answer."`
}

// Guard is one configured guard. Its own settings (patterns, entities, threshold, …) sit next to
// these keys and are checked against the guard's settings by the guards package.
type Guard struct {
	ID       string    `yaml:"id" json:"id" jsonschema:"required,description=Unique id within the stage; named in findings and reasons."`
	Use      string    `yaml:"use" json:"use" jsonschema:"required,enum=pii.regex,enum=secrets.scan,enum=injection.heuristic,enum=regex.deny,enum=size.limit,enum=topic.deny,enum=llm.judge"`
	Action   string    `yaml:"action" json:"action,omitempty" jsonschema:"enum=block,enum=redact,enum=escalate,description=Default: the guard's own."`
	Mode     string    `yaml:"mode" json:"mode,omitempty" jsonschema:"enum=enforce,enum=log_only"`
	Where    GuardWhen `yaml:"where" json:"where,omitempty" jsonschema:"description=Which calls the guard applies to."`
	Parallel bool      `yaml:"parallel" json:"parallel,omitempty"`
	FailMode string    `yaml:"fail_mode" json:"fail_mode,omitempty" jsonschema:"enum=closed,enum=open,description=closed (default): an error or timeout counts as firing; open: the content passes and the error is audited."`
	Timeout  Duration  `yaml:"timeout" json:"timeout,omitempty" jsonschema:"type=string,description=Bound on the guard's work on one document such as 100ms."`
	Enabled  *bool     `yaml:"enabled" json:"enabled,omitempty"`

	// Settings are the guard's own keys.
	Settings *yaml.Node `yaml:",inline" json:"-"`
	// File and Line locate the entry.
	File string `yaml:"-" json:"-"`
	Line int    `yaml:"-" json:"-"`
}

// GuardWhen restricts a guard to some calls.
type GuardWhen struct {
	Servers []string `yaml:"servers" json:"servers,omitempty" jsonschema:"description=Server name globs."`
	Tools   []string `yaml:"tools" json:"tools,omitempty" jsonschema:"description=Public tool name globs."`
	When    string   `yaml:"when" json:"when,omitempty" jsonschema:"description=CEL expression over server and tool; the guard applies when it is true."`
}

// Stages lists the stages with their guards, in the order the keys are written above.
func (g *Guardrails) Stages() map[string][]Guard {
	return map[string][]Guard{
		"tool_call": g.ToolCall, "tool_result": g.ToolResult, "tool_definition": g.ToolDefinition,
		"upstream_content": g.UpstreamContent, "input": g.Input, "output": g.Output,
	}
}

// checkGuardrails records where each guard entry is, for the guards' own messages.
func (d *decoder) checkGuardrails(cfg *Config) {
	g := &cfg.Guardrails
	for _, list := range [][]Guard{g.ToolCall, g.ToolResult, g.ToolDefinition, g.UpstreamContent, g.Input, g.Output} {
		for i := range list {
			list[i].File = cfg.Path
			if src := d.src[&list[i]]; src != nil {
				list[i].Line = src.line
			}
		}
	}
}
