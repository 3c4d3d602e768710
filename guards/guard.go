package guards

import (
	"context"
	"slices"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"
)

// Stage is where content is checked: the key under `guardrails` that lists the guards.
type Stage string

// The stages of SPEC.md §3 and §10.
const (
	// StageToolCall: arguments on their way to a tool.
	StageToolCall Stage = "tool_call"
	// StageToolResult: results on their way back to the caller.
	StageToolResult Stage = "tool_result"
	// StageToolDefinition: every string of the upstream definitions a client lists (tools,
	// prompts, resources, resource templates), scanned at discovery (tool poisoning).
	StageToolDefinition Stage = "tool_definition"
	// StageUpstreamContent: everything else an upstream puts in front of a model or a user
	// outside a tool result: resource contents, prompt messages, completion values, and the
	// sampling and elicitation requests it sends to the client.
	StageUpstreamContent Stage = "upstream_content"
	// StageInput: the task given to the built-in agent.
	StageInput Stage = "input"
	// StageOutput: the built-in agent's final answer.
	StageOutput Stage = "output"
)

// allStages lists every stage, in the order of the configuration file. Read-only.
var allStages = []Stage{StageToolCall, StageToolResult, StageToolDefinition, StageUpstreamContent, StageInput, StageOutput}

// AllStages lists every stage, in the order of the configuration file.
func AllStages() []Stage { return slices.Clone(allStages) }

func (s Stage) valid() bool { return slices.Contains(allStages, s) }

// Action is what a guard does to content it fires on.
type Action string

// The actions, from weakest to strongest.
const (
	// ActionNone: nothing fired.
	ActionNone Action = ""
	// ActionRedact: the findings are replaced and the content goes on.
	ActionRedact Action = "redact"
	// ActionEscalate: the content needs an operator's approval (SPEC.md §9).
	ActionEscalate Action = "escalate"
	// ActionBlock: the content is refused (kind guard_blocked).
	ActionBlock Action = "block"
)

// strength orders actions: none < redact < escalate < block; an unknown action ranks as none.
func (a Action) strength() int {
	switch a {
	case ActionRedact:
		return 1
	case ActionEscalate:
		return 2
	case ActionBlock:
		return 3
	}
	return 0
}

// Stronger reports whether a outranks b (block > escalate > redact > none).
func (a Action) Stronger(b Action) bool { return a.strength() > b.strength() }

// The values of the shared keys mode and fail_mode.
const (
	ModeEnforce = "enforce"
	ModeLogOnly = "log_only"
	FailClosed  = "closed"
	FailOpen    = "open"
)

// Session labels set by findings (SPEC.md §8: labels.private, labels.untrusted).
const (
	LabelPrivate   = "private"
	LabelUntrusted = "untrusted"
)

// DefaultTimeout bounds a [Bounded] guard (regex.deny) whose entry sets no timeout.
const DefaultTimeout = 100 * time.Millisecond

// Span is one finding of a guard in one text: byte offsets [Start, End) on UTF-8 boundaries,
// the category (an entity, a secret kind, a topic, …) and the session label it sets, if any.
type Span struct {
	Start, End int
	Category   string
	Label      string
}

// Guard is one content scanner. Implementations must be safe for concurrent use, must not keep
// the text they are given, and must never quote it in an error: errors end up in audit records.
type Guard interface {
	// Scan returns the spans of text the guard fires on, sorted by Start and not overlapping;
	// nil when there are none. ctx carries the entry's timeout, if it has one.
	Scan(ctx context.Context, text string) ([]Span, error)
	// DefaultAction is the action when the entry sets none.
	DefaultAction() Action
	// Stages lists the stages the guard may be configured in; Build refuses the others.
	Stages() []Stage
}

// Redactor is implemented by guards that redact other than by replacing each span with
// "[REDACTED]": pii.regex names the entity, size.limit truncates, injection.heuristic replaces
// the whole text. Redact gets spans Scan returned for the same text.
type Redactor interface {
	Redact(text string, spans []Span) string
}

// Bounded is implemented by guards whose matching can run away (user regular expressions).
// Build calls SetTimeout once, before first use, with the entry's timeout or DefaultTimeout;
// the guard must then give up with an error on any match that runs longer.
type Bounded interface {
	SetTimeout(d time.Duration)
}

// Factory builds a guard from its own settings: the keys of its entry other than the shared
// ones, nil when there are none. It decodes them strictly and reports problems as
// [SettingErrors], so each points at the line where the setting was written.
type Factory func(settings *yaml.Node) (Guard, error)

// registry maps each `use:` name to its guard.
var registry = map[string]Factory{
	"pii.regex":           newPII,
	"secrets.scan":        newSecrets,
	"injection.heuristic": newInjection,
	"regex.deny":          newRegexDeny,
	"size.limit":          newSizeLimit,
	"topic.deny":          newTopicDeny,
	"llm.judge":           newJudge,
}

// settingsTypes gives, for each `use:` name, a new zero value of the guard's settings struct,
// for documentation and JSON Schema generation.
var settingsTypes = map[string]func() any{
	"pii.regex":           func() any { return new(PIISettings) },
	"secrets.scan":        func() any { return new(SecretsSettings) },
	"injection.heuristic": func() any { return new(InjectionSettings) },
	"regex.deny":          func() any { return new(RegexDenySettings) },
	"size.limit":          func() any { return new(SizeLimitSettings) },
	"topic.deny":          func() any { return new(TopicDenySettings) },
	"llm.judge":           func() any { return new(JudgeSettings) },
}

// Uses lists the `use:` names of the built-in guards, sorted.
func Uses() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Settings returns a pointer to a new zero value of the settings struct of the guard named use
// (its yaml, json and jsonschema tags describe the guard's own keys), or nil for an unknown name.
func Settings(use string) any {
	if f, ok := settingsTypes[use]; ok {
		return f()
	}
	return nil
}

// stagesExcept is every stage but the ones given.
func stagesExcept(skip ...Stage) []Stage {
	var out []Stage
	for _, s := range allStages {
		if !slices.Contains(skip, s) {
			out = append(out, s)
		}
	}
	return out
}
