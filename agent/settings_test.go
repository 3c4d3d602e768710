package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestModelSettingsBuildsTheScriptedModelFromTheConfig(t *testing.T) {
	cfg, err := config.Parse("robot.yaml", []byte(`servers: [{name: robot, command: robot}]
llm:
  provider: scripted
  max_tokens_total: 500
  rules:
    - contains: timed out
      reply: {text: stopping}
  replies:
    - tool_calls: [{name: robot__navigate_to, arguments: {target: table, speed: 0.5}}]
      usage: {input_tokens: 7, output_tokens: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ModelSettings(cfg.LLM)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Generate(context.Background(), &model.Call{Messages: []model.Message{{Role: model.RoleUser, Text: "go"}}})
	if err != nil {
		t.Fatal(err)
	}
	calls := res.ToolCalls()
	if len(calls) != 1 || string(calls[0].Arguments) != `{"speed":0.5,"target":"table"}` || res.Usage.InputTokens != 7 {
		t.Fatalf("result = %+v", res)
	}
	res, err = m.Generate(context.Background(), &model.Call{Messages: []model.Message{{Role: model.RoleTool, ToolResults: []model.ToolResult{{CallID: "c", Content: "it timed out"}}}}})
	if err != nil || res.Text() != "stopping" {
		t.Fatalf("rule not applied: %+v, %v", res, err)
	}
	o := OptionsOf(cfg)
	if o.MaxSteps != config.DefaultMaxSteps || !o.HaltOnUnknownOutcome || o.MaxTokensTotal != 500 {
		t.Errorf("options = %+v", o)
	}
}

func TestModelSettingsRefusesArgumentsThatAreNotAMapping(t *testing.T) {
	cfg, err := config.Parse("robot.yaml", []byte(`servers: [{name: robot, command: robot}]
llm:
  provider: scripted
  replies:
    - tool_calls: [{name: robot__navigate_to, arguments: [table]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ModelSettings(cfg.LLM)
	if err == nil || !strings.Contains(err.Error(), "llm.replies[0].tool_calls[0].arguments (line 5)") {
		t.Fatalf("err = %v", err)
	}
}
