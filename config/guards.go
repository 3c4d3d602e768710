package config

import (
	"strconv"
	"strings"

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
	When    string   `yaml:"when" json:"when,omitempty" jsonschema:"description=CEL expression over server\\, tool\\, upstream_tool and now; the guard applies when it is true."`
	// WhenLine and WhenColumn locate the first character of When's text in File (as a
	// policy rule's when), so that its problems are reported where they are written.
	WhenLine   int `yaml:"-" json:"-"`
	WhenColumn int `yaml:"-" json:"-"`
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
			if src := d.src[&list[i].Where]; src != nil {
				if e, ok := src.keys["when"]; ok && e.value != nil {
					list[i].Where.WhenLine, list[i].Where.WhenColumn = d.textStart(d.resolve(e.value))
				}
			}
		}
	}
}

// GuardrailProblem is a problem of one guard entry found beyond what Parse checks itself
// (Options.CheckGuardrails): a guard's settings, its stage, the llm section a judge needs.
type GuardrailProblem struct {
	// Stage and Index name the entry: its stage's key ("output") and its place in that list.
	Stage string
	Index int
	// Key is the entry's own setting the problem is about ("id", "use", "where.when"; "" for
	// the guard's settings, which loading does not check).
	Key string
	// LLMKey is the setting of the llm section the problem depends on ("provider", "aliases"),
	// if any.
	LLMKey string
	// Line is the problem's line (0: the entry's), Msg the problem as printed after
	// "FILE:LINE: " ("guard ID: …").
	Line int
	Msg  string
}

// guardrailProblems reports the problems of check, leaving out those loading already reported:
// of an entry that is not a mapping, of a setting of the entry that did not decode (it is left
// zero, which would only repeat the problem), of the llm setting a problem depends on.
func (d *decoder) guardrailProblems(cfg *Config, check func(*Config) []GuardrailProblem) {
	top := d.src[cfg]
	if top == nil || d.src[&cfg.Guardrails] == nil {
		return
	}
	llmBroken := top.given("llm") && d.src[&cfg.LLM] == nil // reported: not a mapping
	stages := cfg.Guardrails.Stages()
	for _, p := range check(cfg) {
		var g *Guard
		if list := stages[p.Stage]; p.Index >= 0 && p.Index < len(list) {
			g = &list[p.Index]
		}
		if p.LLMKey != "" && (llmBroken || d.reportedInLLM(p.LLMKey)) || g != nil && d.reportedInGuard(p, g) {
			continue
		}
		line := p.Line
		if line == 0 && g != nil {
			line = g.Line
		}
		if line == 0 {
			line = d.src[&cfg.Guardrails].line
		}
		d.errs.add(d.file, line, "%s", p.Msg)
	}
}

// reportedInGuard reports whether loading already reported a problem that p would repeat: the
// entry g is not a mapping, or the setting p is about (or one inside it or around it) did not
// decode. A problem of the entry itself (a duplicate key) does not count.
func (d *decoder) reportedInGuard(p GuardrailProblem, g *Guard) bool {
	if d.src[g] == nil {
		return true
	}
	if p.Key == "" {
		return false
	}
	entry := "guardrails." + p.Stage + "[" + strconv.Itoa(p.Index) + "]."
	key := entry + p.Key
	for _, e := range d.guardErrors {
		if strings.HasPrefix(e, entry) && (related(e, key) || related(key, e)) {
			return true
		}
	}
	return false
}
