package agent

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
)

// ModelSettings converts the llm section into the model package's settings: headers_env is read
// from the environment (a variable that is not set is an error naming it, never its value) and
// the scripted provider's free-form values (arguments, output) are decoded. Its error, like
// model.New's, is model.SettingErrors, each under the path of its setting in the section; the
// section's own lines are config.LLM.Line's.
func ModelSettings(l config.LLM) (model.Settings, error) {
	s, problems, unset := modelSettings(l, os.Getenv)
	for _, e := range unset {
		problems = append(problems, &model.SettingError{Key: e.Key, Msg: e.Msg + unsetFix})
	}
	if len(problems) > 0 {
		return s, problems
	}
	return s, nil
}

// CheckLLM builds the model provider of the llm section l exactly as mcp-gateway agent does
// (ModelSettings, then model.New), without sending anything, and returns every problem, each
// under the path of its setting (config.LLMProblem.Key), for config.Options.CheckLLM. A
// headers_env variable that is not set in getenv is not among them but in unset ("names the
// environment variable X, which is not set"), so that the caller decides: mcp-gateway agent
// refuses to start, check warns (its environment may not be the agent's).
func CheckLLM(l *config.LLM, getenv func(string) string) (problems, unset []config.LLMProblem) {
	s, errs, missing := modelSettings(*l, getenv)
	if _, err := model.New(s); err != nil {
		var list model.SettingErrors
		if !errors.As(err, &list) {
			list = model.SettingErrors{{Msg: err.Error()}}
		}
		errs = append(errs, list...)
	}
	seen := map[string]bool{}
	for _, e := range errs {
		// A script value that did not decode is left out of the settings, and New may
		// report its reply again; the first problem of a setting says it.
		if seen[e.Key] && e.Key != "" {
			continue
		}
		seen[e.Key] = true
		problems = append(problems, config.LLMProblem{Key: e.Key, Msg: e.Msg})
	}
	for _, e := range missing {
		unset = append(unset, config.LLMProblem{Key: e.Key, Msg: e.Msg})
	}
	return problems, unset
}

// AgentLLMCheck is the config.Options.CheckLLM of mcp-gateway agent: CheckLLM, with a
// headers_env variable that is not set a problem too.
func AgentLLMCheck(getenv func(string) string) func(l *config.LLM) []config.LLMProblem {
	return func(l *config.LLM) []config.LLMProblem {
		problems, unset := CheckLLM(l, getenv)
		for _, u := range unset {
			problems = append(problems, config.LLMProblem{Key: u.Key, Msg: u.Msg + unsetFix})
		}
		return problems
	}
}

// unsetFix ends the problem of a headers_env variable that is not set.
const unsetFix = "; set it, or remove the header"

// modelSettings is ModelSettings reading the environment with getenv; unset lists the
// headers_env variables that are not set (their headers are sent empty).
func modelSettings(l config.LLM, getenv func(string) string) (s model.Settings, problems, unset model.SettingErrors) {
	s = model.Settings{
		Provider:          l.Provider,
		Model:             l.Model,
		BaseURL:           l.BaseURL,
		APIKeyEnv:         l.APIKeyEnv,
		MaxTokens:         l.MaxTokens,
		MaxTokensParam:    l.MaxTokensParam,
		Temperature:       l.Temperature,
		Timeout:           time.Duration(l.Timeout),
		MaxRetries:        l.MaxRetries,
		CostHeader:        l.CostHeader,
		BlockEmptyAnswers: l.BlockEmptyAnswers,
		Stream:            l.Stream,
		HoldStream:        l.HoldStream,
		ReplayPath:        l.ReplayPath,
		Anthropic: model.AnthropicSettings{
			Thinking:          l.Thinking,
			Effort:            l.Effort,
			Fallbacks:         l.Fallbacks,
			StructuredOutputs: l.StructuredOutputs,
			Sampling:          l.Sampling,
			StreamMaxTokens:   l.StreamMaxTokens,
			Default:           l.Default,
			Aliases:           l.Aliases,
		},
	}
	if len(l.Headers) > 0 {
		// Parse refuses the key; a section built in code is refused here.
		problems = append(problems, &model.SettingError{Key: "headers", Msg: "a header's value is never given literally, like the API key; name the environment variable holding it in headers_env"})
	}
	if len(l.HeadersEnv) > 0 {
		s.Headers = map[string]string{}
		names := make([]string, 0, len(l.HeadersEnv))
		for name := range l.HeadersEnv {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			env := l.HeadersEnv[name]
			if !model.IsEnvName(env) {
				// Not a variable name (the loader says so too): never looked up, never repeated.
				problems = append(problems, &model.SettingError{Key: "headers_env." + name, Msg: model.NotAVariable})
				continue
			}
			v := getenv(env)
			if v == "" {
				unset = append(unset, &model.SettingError{Key: "headers_env." + name,
					Msg: fmt.Sprintf("names the environment variable %s, which is not set", env)})
			}
			s.Headers[name] = v
		}
	}
	if len(l.Prices) > 0 {
		s.Prices = map[string]model.Price{}
		for name, p := range l.Prices {
			s.Prices[name] = model.Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}
		}
	}
	if len(l.Rules) == 0 && len(l.Replies) == 0 {
		return s, problems, unset
	}
	script := &model.ScriptedSettings{RepeatLast: l.RepeatLast}
	for i, r := range l.Rules {
		reply, errs := scriptReply(r.Reply, fmt.Sprintf("rules[%d].reply", i))
		problems = append(problems, errs...)
		script.Rules = append(script.Rules, model.ScriptRule{Contains: r.Contains, Matches: r.Matches, Role: r.Role, Times: r.Times, Reply: reply})
	}
	for i, r := range l.Replies {
		reply, errs := scriptReply(r, fmt.Sprintf("replies[%d]", i))
		problems = append(problems, errs...)
		script.Replies = append(script.Replies, reply)
	}
	s.Script = script
	return s, problems, unset
}

// scriptReply converts one scripted reply, at path where in the section. A value that does not
// decode is a problem and is left out of the reply, so the others are still checked.
func scriptReply(r config.ScriptReply, where string) (model.Reply, model.SettingErrors) {
	var problems model.SettingErrors
	out := model.Reply{Text: r.Text, CostUSD: r.CostUSD, Model: r.Model, Chunks: r.Chunks, FinishReason: r.FinishReason, Fail: r.Fail}
	if r.Output != nil {
		if err := r.Output.Decode(&out.Output); err != nil {
			problems = append(problems, &model.SettingError{Key: where + ".output", Msg: err.Error()})
			out.Output = nil
		}
	}
	if r.Usage != nil {
		out.Usage = &model.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CacheReadTokens: r.Usage.CacheReadTokens, CostUSD: r.Usage.CostUSD}
	}
	for j, tc := range r.ToolCalls {
		call := model.ScriptToolCall{ID: tc.ID, Name: tc.Name}
		at := fmt.Sprintf("%s.tool_calls[%d].arguments", where, j)
		switch {
		case tc.Arguments == nil:
		case tc.Arguments.Kind != yaml.MappingNode:
			problems = append(problems, &model.SettingError{Key: at, Msg: "want a mapping of argument names to values"})
		default:
			if err := tc.Arguments.Decode(&call.Arguments); err != nil {
				problems = append(problems, &model.SettingError{Key: at, Msg: err.Error()})
				call.Arguments = nil
			}
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	return out, problems
}

// OptionsOf returns the loop options of a configuration.
func OptionsOf(cfg *config.Config) Options {
	l := cfg.LLM
	return Options{
		MaxSteps:             l.MaxSteps,
		OneToolPerTurn:       l.OneToolPerTurn,
		HaltOnUnknownOutcome: l.HaltOnUnknownOutcome == nil || *l.HaltOnUnknownOutcome,
		MaxTokensTotal:       l.MaxTokensTotal,
		MaxCostUSD:           l.MaxCostUSD,
		GuardReasoning:       l.GuardReasoning,
		HoldStream:           l.HoldStream,
		Experience:           cfg.Experience,
	}
}
