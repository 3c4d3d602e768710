package agent

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
)

// ModelSettings converts the llm section into the model package's settings. The scripted
// provider's free-form values (arguments, output) are decoded here; errors name where they sit
// in the section.
func ModelSettings(l config.LLM) (model.Settings, error) {
	s := model.Settings{
		Provider:       l.Provider,
		Model:          l.Model,
		BaseURL:        l.BaseURL,
		APIKeyEnv:      l.APIKeyEnv,
		MaxTokens:      l.MaxTokens,
		MaxTokensParam: l.MaxTokensParam,
		Timeout:        time.Duration(l.Timeout),
		MaxRetries:     l.MaxRetries,
		Headers:        l.Headers,
		ReplayPath:     l.ReplayPath,
	}
	if len(l.Rules) == 0 && len(l.Replies) == 0 {
		return s, nil
	}
	script := &model.ScriptedSettings{RepeatLast: l.RepeatLast}
	for i, r := range l.Rules {
		reply, err := scriptReply(r.Reply, fmt.Sprintf("llm.rules[%d].reply", i))
		if err != nil {
			return s, err
		}
		script.Rules = append(script.Rules, model.ScriptRule{Contains: r.Contains, Matches: r.Matches, Role: r.Role, Times: r.Times, Reply: reply})
	}
	for i, r := range l.Replies {
		reply, err := scriptReply(r, fmt.Sprintf("llm.replies[%d]", i))
		if err != nil {
			return s, err
		}
		script.Replies = append(script.Replies, reply)
	}
	s.Script = script
	return s, nil
}

func scriptReply(r config.ScriptReply, where string) (model.Reply, error) {
	out := model.Reply{Text: r.Text, CostUSD: r.CostUSD, Model: r.Model, FinishReason: r.FinishReason, Fail: r.Fail}
	if r.Output != nil {
		if err := r.Output.Decode(&out.Output); err != nil {
			return out, fmt.Errorf("%s.output (line %d): %w", where, r.Output.Line, err)
		}
	}
	if r.Usage != nil {
		out.Usage = &model.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CacheReadTokens: r.Usage.CacheReadTokens, CostUSD: r.Usage.CostUSD}
	}
	for j, tc := range r.ToolCalls {
		call := model.ScriptToolCall{ID: tc.ID, Name: tc.Name}
		if tc.Arguments != nil {
			if tc.Arguments.Kind != yaml.MappingNode {
				return out, fmt.Errorf("%s.tool_calls[%d].arguments (line %d): want a mapping of argument names to values", where, j, tc.Arguments.Line)
			}
			if err := tc.Arguments.Decode(&call.Arguments); err != nil {
				return out, fmt.Errorf("%s.tool_calls[%d].arguments (line %d): %w", where, j, tc.Arguments.Line, err)
			}
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	return out, nil
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
		Experience:           cfg.Experience,
	}
}
