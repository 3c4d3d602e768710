package config

import (
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/internal/envname"
)

// Defaults of the agent options in the llm section.
const (
	DefaultMaxSteps = 20
)

// LLM chooses the model of the built-in agent (`mcp-gateway agent`) and the options of its loop.
// The provider settings mirror agent/model.Settings; the agent package converts them, so this
// package does not depend on it.
type LLM struct {
	Provider       string   `yaml:"provider" json:"provider,omitempty" jsonschema:"enum=anthropic,enum=openai,enum=openai.responses,enum=openrouter,enum=deepseek,enum=qwen,enum=mimo,enum=ollama,enum=scripted,enum=mock,description=Model provider of the agent."`
	Model          string   `yaml:"model" json:"model,omitempty" jsonschema:"description=Model id (default: the provider's)."`
	BaseURL        string   `yaml:"base_url" json:"base_url,omitempty" jsonschema:"description=Endpoint overriding the provider's default."`
	APIKeyEnv      string   `yaml:"api_key_env" json:"api_key_env,omitempty" jsonschema:"description=Environment variable holding the API key (default: the provider's)."`
	MaxTokens      int      `yaml:"max_tokens" json:"max_tokens,omitempty" jsonschema:"minimum=0,description=Output token limit of one model request."`
	MaxTokensParam string   `yaml:"max_tokens_param" json:"max_tokens_param,omitempty" jsonschema:"enum=max_tokens,enum=max_completion_tokens,description=Name of the output limit on Chat Completions providers."`
	Timeout        Duration `yaml:"timeout" json:"timeout,omitempty" jsonschema:"type=string,description=Deadline of one HTTP attempt such as 60s."`
	MaxRetries     *int     `yaml:"max_retries" json:"max_retries,omitempty" jsonschema:"minimum=0,description=Retries of a failed model request; 0 for none (default: 0 for Chat Completions and Responses providers\\, 2 for anthropic)."`
	// Headers is refused: header values come from the environment (HeadersEnv). The field is
	// kept so that the refusal can say so.
	Headers    map[string]string `yaml:"headers" json:"-"`
	HeadersEnv map[string]string `yaml:"headers_env" json:"headers_env,omitempty" jsonschema:"description=Extra HTTP headers of every model request: header name to the environment variable holding its value."`
	// Temperature is the sampling temperature sent when a request sets none (anthropic: only
	// with sampling: true).
	Temperature *float64 `yaml:"temperature" json:"temperature,omitempty" jsonschema:"minimum=0,maximum=2,description=Sampling temperature (anthropic: only with sampling: true)."`
	CostHeader  string   `yaml:"cost_header" json:"cost_header,omitempty" jsonschema:"description=Response header with the request's cost reported by a gateway (default x-litellm-response-cost; none to read none)."`
	// Prices price requests by model when the provider reports no cost.
	Prices            map[string]LLMPrice `yaml:"prices" json:"prices,omitempty" jsonschema:"description=Model id to its price in USD per million tokens\\, used when the provider reports no cost."`
	BlockEmptyAnswers bool                `yaml:"block_empty_answers" json:"block_empty_answers,omitempty" jsonschema:"description=Treat an answer with no text and no tool calls as declined (model_refusal)."`
	Stream            bool                `yaml:"stream" json:"stream,omitempty" jsonschema:"description=Stream answers (Chat Completions and anthropic providers)."`
	HoldStream        bool                `yaml:"hold_stream" json:"hold_stream,omitempty" jsonschema:"description=Show a streamed answer's chunks only once it has finished\\, so nothing of a declined answer is shown."`
	// GuardReasoning passes the model's reasoning through the input and output guards too.
	GuardReasoning bool `yaml:"guard_reasoning" json:"guard_reasoning,omitempty" jsonschema:"description=Also screen the model's reasoning with the output guards (default: reasoning is shown in the transcript only)."`

	// The settings of the anthropic provider alone (model.AnthropicSettings).
	Thinking          string            `yaml:"thinking" json:"thinking,omitempty" jsonschema:"enum=adaptive,enum=none,description=anthropic: adaptive thinking (default) or none."`
	Effort            string            `yaml:"effort" json:"effort,omitempty" jsonschema:"enum=low,enum=medium,enum=high,enum=xhigh,enum=max,description=anthropic: effort (default: the model's)."`
	Fallbacks         string            `yaml:"fallbacks" json:"fallbacks,omitempty" jsonschema:"enum=default,enum=none,description=anthropic: server-side refusal fallbacks (default) or none."`
	StructuredOutputs bool              `yaml:"structured_outputs" json:"structured_outputs,omitempty" jsonschema:"description=anthropic: send output schemas as the API's structured output format."`
	Sampling          bool              `yaml:"sampling" json:"sampling,omitempty" jsonschema:"description=anthropic: forward temperature (older models only)."`
	StreamMaxTokens   int               `yaml:"stream_max_tokens" json:"stream_max_tokens,omitempty" jsonschema:"minimum=0,description=anthropic: output limit of a streamed request (default 64000)."`
	Default           string            `yaml:"default" json:"default,omitempty" jsonschema:"description=anthropic: the alias (or model id) used when a request names no model."`
	Aliases           map[string]string `yaml:"aliases" json:"aliases,omitempty" jsonschema:"description=anthropic: alias names to model ids."`

	// Rules, Replies and RepeatLast are the script of the scripted provider.
	Rules      []ScriptRule  `yaml:"rules" json:"rules,omitempty" jsonschema:"description=scripted: rules matched against the last message first."`
	Replies    []ScriptReply `yaml:"replies" json:"replies,omitempty" jsonschema:"description=scripted: replies used in order when no rule matches."`
	RepeatLast *bool         `yaml:"repeat_last" json:"repeat_last,omitempty" jsonschema:"description=scripted: repeat the last reply once the replies run out (default true)."`
	// ReplayPath is the JSONL file the mock provider replays.
	ReplayPath string `yaml:"replay_path" json:"replay_path,omitempty" jsonschema:"description=mock: the JSONL file of decisions to replay (default $LLM_REPLAY)."`

	// MaxSteps bounds the model requests of one run.
	MaxSteps int `yaml:"max_steps" json:"max_steps,omitempty" jsonschema:"minimum=1,description=Most model requests in one run (default 20)."`
	// OneToolPerTurn refuses every tool call of a turn after the first, unexecuted.
	OneToolPerTurn bool `yaml:"one_tool_per_turn" json:"one_tool_per_turn,omitempty" jsonschema:"description=Run only the first tool call of a turn; the others get one_tool_per_turn."`
	// HaltOnUnknownOutcome ends the run when a call's outcome is unknown (a lockout), so the
	// model never retries physical actions blind. Nil means true.
	HaltOnUnknownOutcome *bool `yaml:"halt_on_unknown_outcome" json:"halt_on_unknown_outcome,omitempty" jsonschema:"description=End the run when a call's outcome is unknown (default true)."`
	// MaxTokensTotal and MaxCostUSD are the run's budgets; zero means none.
	MaxTokensTotal int     `yaml:"max_tokens_total" json:"max_tokens_total,omitempty" jsonschema:"minimum=0,description=Token budget of one run (input plus output); 0 for none."`
	MaxCostUSD     float64 `yaml:"max_cost_usd" json:"max_cost_usd,omitempty" jsonschema:"minimum=0,description=Cost budget of one run in USD; 0 for none."`

	// lines is where each setting of the section was written, by its path (see Line); filled
	// by Parse.
	lines map[string]int
}

// Line is the line of the file where the setting at path was written: path is a setting's
// path inside the llm section, as agent/model.SettingError.Key gives it ("thinking",
// "headers_env.Authorization", "rules[2].matches", "prices.gpt-4o.input"). A path that was
// not written gives the line of the nearest setting above it that was ("rules[2]" for
// "rules[2].reply.text" when the reply has no text), and "" (or nothing found) the line of the
// llm key itself; 0 when the section was not read from a file.
func (l *LLM) Line(path string) int {
	for {
		if line, ok := l.lines[path]; ok {
			return line
		}
		if path == "" {
			return 0
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
}

// LLMProblem is a problem of one setting of the llm section found beyond what Parse checks
// itself (Options.CheckLLM): Key is the setting's path inside the section (see LLM.Line), Msg
// says what is wrong, written to follow "llm.<Key>: ".
type LLMProblem struct {
	Key, Msg string
}

// Options are checks ParseWith and LoadWith make beyond those of the file itself.
type Options struct {
	// CheckLLM, when set, is called with the llm section once it has been decoded and checked
	// without a problem of its own (whatever the other sections' problems), if the file has
	// one; each problem it returns is reported with the others, at the line of its setting,
	// as "llm.<Key>: <Msg>". mcp-gateway check and agent build the model provider with it
	// (agent.CheckLLM), so that its problems are listed with the file's, in one pass.
	CheckLLM func(l *LLM) []LLMProblem
	// CheckGuardrails, when set, is called with the decoded config once the guardrails section
	// has been decoded as a mapping (whatever the other sections' problems); each problem it
	// returns is reported with the others, at its line, unless loading already reported one
	// about the same setting of the same entry, or about the llm setting it depends on.
	// mcp-gateway check builds the guards with it (gateway.CheckGuards), so that a guard's
	// problems are listed with the file's, in one pass.
	CheckGuardrails func(cfg *Config) []GuardrailProblem
	// CheckPolicies, when set, is called with the decoded config once the policies section has
	// been decoded as a mapping, or when the file has none (whatever the other sections'
	// problems); each problem it returns is reported with the others, at its line (a policy
	// file's at its own file and line, after the config's), unless loading already reported one
	// about the same setting of the same rule, the same policies.files entry or the same
	// setting of the section. mcp-gateway check and agent compile the policies with it
	// (gateway.CheckPolicies), so that a rule's problems are listed with the file's, in one pass.
	CheckPolicies func(cfg *Config) []PolicyProblem
}

// LLMPrice is a model's price in USD per million tokens (agent/model.Price).
type LLMPrice struct {
	Input      float64 `yaml:"input" json:"input" jsonschema:"minimum=0,description=USD per million input tokens (those not read from or written to the cache)."`
	Output     float64 `yaml:"output" json:"output" jsonschema:"minimum=0,description=USD per million output tokens."`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read,omitempty" jsonschema:"minimum=0,description=USD per million input tokens read from the prompt cache (default: input)."`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write,omitempty" jsonschema:"minimum=0,description=USD per million input tokens written to the prompt cache (default: input)."`
}

// ScriptRule is a rule of the scripted provider (agent/model.ScriptRule).
type ScriptRule struct {
	Contains string      `yaml:"contains" json:"contains,omitempty" jsonschema:"description=Matches when the last message holds this text\\, ignoring case."`
	Matches  string      `yaml:"matches" json:"matches,omitempty" jsonschema:"description=Go regular expression the last message must match."`
	Role     string      `yaml:"role" json:"role,omitempty" jsonschema:"enum=user,enum=assistant,enum=tool,description=Role of the last message."`
	Times    int         `yaml:"times" json:"times,omitempty" jsonschema:"minimum=0,description=How many times the rule may answer; 0 for always."`
	Reply    ScriptReply `yaml:"reply" json:"reply" jsonschema:"description=The reply the rule gives."`
}

// ScriptReply is one answer of the scripted provider (agent/model.Reply).
type ScriptReply struct {
	Text string `yaml:"text" json:"text,omitempty" jsonschema:"description=Answer text."`
	// Output is structured output of any shape, sent as its JSON text.
	Output       *yaml.Node       `yaml:"output" json:"output,omitempty" jsonschema:"description=Structured output\\, sent as its JSON text."`
	ToolCalls    []ScriptToolCall `yaml:"tool_calls" json:"tool_calls,omitempty" jsonschema:"description=Tool calls the reply makes."`
	Usage        *ScriptUsage     `yaml:"usage" json:"usage,omitempty" jsonschema:"description=Usage reported (default: one token per four characters)."`
	CostUSD      float64          `yaml:"cost_usd" json:"cost_usd,omitempty" jsonschema:"minimum=0,description=Cost reported in USD."`
	Model        string           `yaml:"model" json:"model,omitempty" jsonschema:"description=Resolved model reported."`
	Chunks       []string         `yaml:"chunks" json:"chunks,omitempty" jsonschema:"description=How the text would be streamed: pieces whose concatenation is text."`
	FinishReason string           `yaml:"finish_reason" json:"finish_reason,omitempty" jsonschema:"enum=stop,enum=tool_calls,enum=length,enum=refusal,enum=content_filter,enum=error,description=Finish reason (default tool_calls or stop)."`
	Fail         bool             `yaml:"fail" json:"fail,omitempty" jsonschema:"description=Fail the model request instead of answering."`
}

// ScriptToolCall is a tool call of a scripted reply.
type ScriptToolCall struct {
	ID        string     `yaml:"id" json:"id,omitempty" jsonschema:"description=Call id (default call_1\\, call_2 …)."`
	Name      string     `yaml:"name" json:"name" jsonschema:"required,description=Public tool name."`
	Arguments *yaml.Node `yaml:"arguments" json:"arguments,omitempty" jsonschema:"description=Arguments object."`
}

// ScriptUsage is the usage a scripted reply reports.
type ScriptUsage struct {
	InputTokens     int     `yaml:"input_tokens" json:"input_tokens,omitempty" jsonschema:"minimum=0"`
	OutputTokens    int     `yaml:"output_tokens" json:"output_tokens,omitempty" jsonschema:"minimum=0"`
	CacheReadTokens int     `yaml:"cache_read_tokens" json:"cache_read_tokens,omitempty" jsonschema:"minimum=0"`
	CostUSD         float64 `yaml:"cost_usd" json:"cost_usd,omitempty" jsonschema:"minimum=0"`
}

// checkLLM fills in the agent defaults and checks what the model package cannot: the loop's
// options. The provider's own settings are checked by agent/model.New when the agent starts.
func (d *decoder) checkLLM(cfg *Config) {
	l := &cfg.LLM
	src := d.src[l]
	if src == nil {
		src = &source{}
	}
	loc := location{path: "llm"}
	switch {
	case !src.has("max_steps"):
		l.MaxSteps = DefaultMaxSteps
	case src.valid("max_steps") && l.MaxSteps < 1:
		d.errorf(src.valueLine("max_steps"), loc.field("max_steps"), "must be at least 1")
	}
	if !src.has("halt_on_unknown_outcome") {
		yes := true
		l.HaltOnUnknownOutcome = &yes
	}
	for _, k := range []struct {
		key string
		neg bool
	}{{"max_tokens", l.MaxTokens < 0}, {"max_tokens_total", l.MaxTokensTotal < 0}, {"max_cost_usd", l.MaxCostUSD < 0}} {
		if src.valid(k.key) && k.neg {
			d.errorf(src.valueLine(k.key), loc.field(k.key), "must not be negative")
		}
	}
	if src.valid("timeout") && l.Timeout < 0 {
		d.errorf(src.valueLine("timeout"), loc.field("timeout"), "must not be negative")
	}
	if src.valid("api_key_env") && l.APIKeyEnv != "" && !envname.Valid(l.APIKeyEnv) {
		// The value is not repeated: it may be the key itself, written here by mistake.
		d.errorf(src.valueLine("api_key_env"), loc.field("api_key_env"), "does not look like an environment variable name (letters, digits and _, not starting with a digit, and not shaped like a key); "+
			"the API key belongs in the environment, never in the file: put it in a variable and name the variable here")
	}
	if src.valid("base_url") && l.BaseURL != "" {
		if _, problem := webURL(l.BaseURL, "must start with http:// or https://, such as http://localhost:4000/v1",
			"must not carry credentials; name the environment variable holding the key in api_key_env"); problem != "" {
			d.errorf(src.valueLine("base_url"), loc.field("base_url"), "%s", problem)
		}
	}
	if src.given("provider") && src.valid("provider") && l.Provider == "" {
		d.errorf(src.valueLine("provider"), loc.field("provider"), "is empty")
	}
	top := d.src[cfg]
	if e, ok := top.keys["llm"]; ok {
		l.lines = d.settingLines(e.value, e.line)
	}
	d.checkLLMNumbers(l)
	if src.has("headers") {
		d.refuseLiteralHeaders(l, src, loc)
	}
	d.checkHeadersEnv(l.HeadersEnv, d.src[&l.HeadersEnv], loc.field("headers_env"))
	for name, p := range l.Prices {
		// A price not given for cache reads and writes is the input price (a negative one is
		// refused once, as the input price).
		if _, given := l.lines["prices."+name+".cache_read"]; !given && p.Input >= 0 {
			p.CacheRead = p.Input
		}
		if _, given := l.lines["prices."+name+".cache_write"]; !given && p.Input >= 0 {
			p.CacheWrite = p.Input
		}
		l.Prices[name] = p
	}
	for name, text := range cfg.Experience {
		if strings.TrimSpace(text) == "" {
			d.errorf(top.lineOf("experience"), location{path: "experience"}, "tool %q: the text is empty", truncate(name))
		}
	}
}

// checkLLMNumbers refuses a number of the llm section that is not finite (YAML's .nan, .inf):
// NaN compares false with everything, so max_cost_usd: .nan would disable the budget, and an
// infinite price or cost prices nothing. Each is reported at its line.
func (d *decoder) checkLLMNumbers(l *LLM) {
	bad := func(path string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			d.errorf(l.Line(path), location{path: "llm"}.field(path), "must be a finite number, got %g", v)
		}
	}
	if !math.IsInf(l.MaxCostUSD, -1) { // refused as negative
		bad("max_cost_usd", l.MaxCostUSD)
	}
	if l.Temperature != nil {
		bad("temperature", *l.Temperature)
	}
	for name, p := range l.Prices {
		for _, f := range []struct {
			key string
			v   float64
		}{{"input", p.Input}, {"output", p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}} {
			bad("prices."+name+"."+f.key, f.v)
		}
	}
	reply := func(at string, r ScriptReply) {
		bad(at+".cost_usd", r.CostUSD)
		if r.Usage != nil {
			bad(at+".usage.cost_usd", r.Usage.CostUSD)
		}
	}
	for i, r := range l.Rules {
		reply("rules["+strconv.Itoa(i)+"].reply", r.Reply)
	}
	for i, r := range l.Replies {
		reply("replies["+strconv.Itoa(i)+"]", r)
	}
}

// refuseLiteralHeaders refuses llm.headers: a header's value (a credential, as often as not)
// is never written in the file, like the API key; headers_env names the variable holding it.
func (d *decoder) refuseLiteralHeaders(l *LLM, src *source, loc location) {
	const why = "a header's value is never written in the file, where whoever reads the file reads it (like api_key); " +
		"put it in an environment variable and name that in headers_env instead"
	headers := d.src[&l.Headers]
	if headers == nil || len(headers.keys) == 0 {
		d.errorf(src.lineOf("headers"), loc.field("headers"), "%s (headers_env: {Header-Name: VARIABLE})", why)
		return
	}
	for name, e := range headers.keys {
		// The value is not repeated: it may be the secret itself.
		d.errorf(e.line, loc.field("headers").field(name), "%s (headers_env: {%s: VARIABLE})", why, truncate(name))
	}
}

// maxSettingLines bounds the settings settingLines records; a real llm section has far fewer.
const maxSettingLines = 10_000

// settingLines records where each setting under n (the llm section, its key at line) was
// written, by path: the value's line for a scalar, the key's for a mapping or a list, its own
// line for an element of a list ("rules[2]"). "" is the line of the section's key. Aliases are
// followed and << merges expanded, a key written in a mapping winning over a merged one.
func (d *decoder) settingLines(n *yaml.Node, line int) map[string]int {
	lines := map[string]int{"": line}
	var walk func(n *yaml.Node, path string, depth int)
	mapping := func(n *yaml.Node, path string, depth int) {
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				merges = append(merges, v)
				continue
			}
			key := d.resolve(k)
			if key == nil || key.Kind != yaml.ScalarNode {
				continue
			}
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			if _, seen := lines[p]; seen || len(lines) >= maxSettingLines {
				continue
			}
			lines[p] = k.Line
			if val := d.resolve(v); val != nil && val.Kind == yaml.ScalarNode {
				lines[p] = val.Line
			}
			walk(v, p, depth+1)
		}
		for _, m := range merges {
			m = d.resolve(m)
			if m != nil && m.Kind == yaml.SequenceNode {
				for _, el := range m.Content {
					walk(el, path, depth+1)
				}
				continue
			}
			walk(m, path, depth+1)
		}
	}
	walk = func(n *yaml.Node, path string, depth int) {
		n = d.resolve(n)
		if n == nil || depth > maxMergeDepth*4 {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			mapping(n, path, depth)
		case yaml.SequenceNode:
			for i, el := range n.Content {
				p := path + "[" + strconv.Itoa(i) + "]"
				if _, seen := lines[p]; seen || len(lines) >= maxSettingLines {
					continue
				}
				lines[p] = el.Line
				walk(el, p, depth+1)
			}
		}
	}
	walk(n, "", 0)
	return lines
}
