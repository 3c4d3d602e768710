package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
)

// fakeCaller answers every call with outcome(name) and records the calls.
type fakeCaller struct {
	calls   []*governor.Call
	outcome func(name string) *governor.Outcome
}

func (f *fakeCaller) Call(_ context.Context, c *governor.Call) *governor.Outcome {
	f.calls = append(f.calls, c)
	if f.outcome != nil {
		return f.outcome(c.Name)
	}
	return succeeded(c.Name)
}

func succeeded(name string) *governor.Outcome {
	return &governor.Outcome{
		Result:  &mcp.CallToolResult{StructuredContent: map[string]any{"success": true, "data": map[string]any{"tool": name}}},
		Success: true,
	}
}

// modelFunc is a Model made of a function, for results the scripted model cannot give.
type modelFunc func(ctx context.Context, c *model.Call) (*model.Result, error)

func (f modelFunc) Generate(ctx context.Context, c *model.Call) (*model.Result, error) {
	return f(ctx, c)
}

func scripted(t *testing.T, replies ...model.Reply) model.Model {
	t.Helper()
	m, err := model.NewScripted(model.ScriptedSettings{Replies: replies})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func callTo(name string, args map[string]any) model.ScriptToolCall {
	return model.ScriptToolCall{Name: name, Arguments: args}
}

var robotTools = []*governor.Tool{
	{Public: "robot__navigate_to", Upstream: "navigate_to", Definition: &mcp.Tool{Name: "robot__navigate_to", Description: "Drive to a target.", InputSchema: map[string]any{"type": "object"}}},
	{Public: "robot__pick_object", Upstream: "pick_object", Definition: &mcp.Tool{Name: "robot__pick_object", Description: "Pick an object.", InputSchema: map[string]any{"type": "object"}}},
	{Public: "robot__internal", Upstream: "internal", Hidden: true},
}

func newRunner(m model.Model, c Caller, o Options) (*Runner, *bytes.Buffer) {
	var jsonl bytes.Buffer
	if o.MaxSteps == 0 {
		o.MaxSteps = 20
	}
	return &Runner{Model: m, Caller: c, Tools: robotTools, Options: o, Transcript: &jsonl, Out: &bytes.Buffer{}, RunID: "run-1"}, &jsonl
}

func events(t *testing.T, jsonl *bytes.Buffer) []Event {
	t.Helper()
	var evs []Event
	sc := bufio.NewScanner(bytes.NewReader(jsonl.Bytes()))
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestRunCompletesATwoToolTask(t *testing.T) {
	var offered []model.Tool
	inner := scripted(t,
		model.Reply{ToolCalls: []model.ScriptToolCall{callTo("robot__navigate_to", map[string]any{"target": "table"})}},
		model.Reply{ToolCalls: []model.ScriptToolCall{callTo("robot__pick_object", map[string]any{"object": "red_cup"})}},
		model.Reply{Text: "The red cup is in the gripper."},
	)
	m := modelFunc(func(ctx context.Context, c *model.Call) (*model.Result, error) {
		offered = c.Tools
		return inner.Generate(ctx, c)
	})
	caller := &fakeCaller{}
	r, jsonl := newRunner(m, caller, Options{HaltOnUnknownOutcome: true, Experience: map[string]string{"pick_object": "Grasp cups by the handle."}})
	rep, err := r.Run(context.Background(), "pick up the red cup")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit != ExitAnswered || rep.Answer != "The red cup is in the gripper." || rep.Steps != 3 || rep.Calls != 2 {
		t.Fatalf("report = %+v", rep)
	}
	if len(caller.calls) != 2 || caller.calls[0].Name != "robot__navigate_to" || caller.calls[1].Name != "robot__pick_object" {
		t.Fatalf("calls = %+v", caller.calls)
	}
	for _, c := range caller.calls {
		if c.Principal != Principal || c.Session != "run-1" {
			t.Errorf("call %s made as %q in session %q", c.Name, c.Principal, c.Session)
		}
	}
	if string(caller.calls[1].Args) != `{"object":"red_cup"}` {
		t.Errorf("args = %s", caller.calls[1].Args)
	}
	if len(offered) != 2 {
		t.Fatalf("tools offered = %+v, want the two listed ones", offered)
	}
	if offered[1].Description != "Pick an object.\n\nTool Experience:\nGrasp cups by the handle." || offered[0].Description != "Drive to a target." {
		t.Errorf("descriptions = %q, %q", offered[0].Description, offered[1].Description)
	}
	var types []string
	for _, ev := range events(t, jsonl) {
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, ","); got != "task,step,tool,step,tool,step,end" {
		t.Errorf("transcript events = %s", got)
	}
}

func TestRunOneToolPerTurnRefusesTheSecondCall(t *testing.T) {
	var toolMsg model.Message
	inner := scripted(t,
		model.Reply{ToolCalls: []model.ScriptToolCall{
			callTo("robot__navigate_to", map[string]any{"target": "table"}),
			callTo("robot__pick_object", map[string]any{"object": "red_cup"}),
		}},
		model.Reply{Text: "done"},
	)
	m := modelFunc(func(ctx context.Context, c *model.Call) (*model.Result, error) {
		if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == model.RoleTool {
			toolMsg = c.Messages[n-1]
		}
		return inner.Generate(ctx, c)
	})
	caller := &fakeCaller{}
	r, _ := newRunner(m, caller, Options{OneToolPerTurn: true, HaltOnUnknownOutcome: true})
	rep, err := r.Run(context.Background(), "task")
	if err != nil || rep.Exit != ExitAnswered {
		t.Fatalf("report = %+v, err = %v", rep, err)
	}
	if len(caller.calls) != 1 || caller.calls[0].Name != "robot__navigate_to" {
		t.Fatalf("executed %d calls, want only the first: %+v", len(caller.calls), caller.calls)
	}
	if len(toolMsg.ToolResults) != 2 {
		t.Fatalf("tool results = %+v", toolMsg.ToolResults)
	}
	second := toolMsg.ToolResults[1]
	if !second.IsError || !strings.Contains(second.Content, `"kind":"one_tool_per_turn"`) {
		t.Errorf("second result = %+v", second)
	}
}

func TestRunHaltsOnUnknownOutcome(t *testing.T) {
	m := scripted(t,
		model.Reply{ToolCalls: []model.ScriptToolCall{
			callTo("robot__navigate_to", map[string]any{"target": "table"}),
			callTo("robot__pick_object", map[string]any{"object": "red_cup"}),
		}},
		model.Reply{ToolCalls: []model.ScriptToolCall{callTo("robot__navigate_to", map[string]any{"target": "table"})}},
	)
	caller := &fakeCaller{outcome: func(string) *governor.Outcome {
		out := governor.Refuse(governor.KindExecutionStatusUnknown, "robot__navigate_to timed out after 1s")
		out.Unknown = true
		return out
	}}
	r, jsonl := newRunner(m, caller, Options{HaltOnUnknownOutcome: true})
	rep, err := r.Run(context.Background(), "task")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit != ExitHalted || rep.Steps != 1 {
		t.Fatalf("report = %+v", rep)
	}
	if len(caller.calls) != 1 {
		t.Fatalf("%d calls made, want none after the unknown outcome", len(caller.calls))
	}
	evs := events(t, jsonl)
	last := evs[len(evs)-1]
	if last.Type != "end" || last.Exit == nil || *last.Exit != ExitHalted || last.Outcome != "halted" {
		t.Errorf("last event = %+v", last)
	}
}

func TestRunEndsOnRefusal(t *testing.T) {
	m := scripted(t, model.Reply{Text: "I will not move the robot.", FinishReason: "refusal"})
	caller := &fakeCaller{}
	r, _ := newRunner(m, caller, Options{HaltOnUnknownOutcome: true})
	rep, err := r.Run(context.Background(), "task")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit != ExitRefused || !strings.Contains(rep.Reason, "model_refusal") || len(caller.calls) != 0 {
		t.Fatalf("report = %+v, calls = %d", rep, len(caller.calls))
	}
}

func TestRunStopsAtMaxSteps(t *testing.T) {
	m := scripted(t, model.Reply{ToolCalls: []model.ScriptToolCall{callTo("robot__navigate_to", map[string]any{"target": "table"})}})
	caller := &fakeCaller{}
	r, _ := newRunner(m, caller, Options{MaxSteps: 3, HaltOnUnknownOutcome: true})
	rep, err := r.Run(context.Background(), "task")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit != ExitBudget || rep.Steps != 3 || len(caller.calls) != 3 || !strings.Contains(rep.Reason, "max_steps 3") {
		t.Fatalf("report = %+v, calls = %d", rep, len(caller.calls))
	}
}

// TestRunStopsAtTokenAndCostBudgets checks that a budget stops the run as soon as the spend
// passes it, and not before: spending exactly the budget is within it.
func TestRunStopsAtTokenAndCostBudgets(t *testing.T) {
	tests := []struct {
		name  string
		o     Options
		want  string
		steps int
	}{
		{"tokens", Options{MaxTokensTotal: 25}, "max_tokens_total 25", 2},
		{"tokens spent exactly", Options{MaxTokensTotal: 30}, "max_tokens_total 30", 3},
		{"cost", Options{MaxCostUSD: 0.015}, "max_cost_usd 0.015", 2},
		{"cost spent exactly", Options{MaxCostUSD: 0.02}, "max_cost_usd 0.02", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := scripted(t, model.Reply{
				ToolCalls: []model.ScriptToolCall{callTo("robot__navigate_to", map[string]any{"target": "table"})},
				Usage:     &model.Usage{InputTokens: 10, OutputTokens: 5}, CostUSD: 0.01,
			})
			caller := &fakeCaller{}
			r, _ := newRunner(m, caller, tt.o)
			rep, err := r.Run(context.Background(), "task")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Exit != ExitBudget || rep.Steps != tt.steps || len(caller.calls) != tt.steps-1 || !strings.Contains(rep.Reason, tt.want) {
				t.Fatalf("report = %+v, calls = %d", rep, len(caller.calls))
			}
		})
	}
}

func TestRunAnswersUnparseableArgumentsWithoutRunningTheTool(t *testing.T) {
	var toolMsg model.Message
	step := 0
	m := modelFunc(func(_ context.Context, c *model.Call) (*model.Result, error) {
		step++
		if step == 1 {
			return &model.Result{FinishReason: model.FinishToolCalls, Blocks: []model.Block{{
				Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "c1", Name: "robot__navigate_to", Raw: `{"target": tab`},
			}}}, nil
		}
		toolMsg = c.Messages[len(c.Messages)-1]
		return &model.Result{FinishReason: model.FinishStop, Blocks: []model.Block{{Kind: model.BlockText, Text: "gave up"}}}, nil
	})
	caller := &fakeCaller{}
	r, _ := newRunner(m, caller, Options{HaltOnUnknownOutcome: true})
	rep, err := r.Run(context.Background(), "task")
	if err != nil || rep.Exit != ExitAnswered {
		t.Fatalf("report = %+v, err = %v", rep, err)
	}
	if len(caller.calls) != 0 {
		t.Fatalf("the tool ran with unparseable arguments: %+v", caller.calls)
	}
	if len(toolMsg.ToolResults) != 1 {
		t.Fatalf("tool message = %+v", toolMsg)
	}
	res := toolMsg.ToolResults[0]
	if res.CallID != "c1" || !res.IsError || !strings.Contains(res.Content, `"kind":"invalid_tool_arguments"`) {
		t.Errorf("result = %+v", res)
	}
}

func TestRunReportsAFailedModelRequest(t *testing.T) {
	m := scripted(t, model.Reply{Fail: true})
	r, _ := newRunner(m, &fakeCaller{}, Options{})
	rep, err := r.Run(context.Background(), "task")
	if err == nil || rep.Exit != ExitError {
		t.Fatalf("report = %+v, err = %v", rep, err)
	}
}

// guardSet builds one stage's guards as the config loader does, settings given as YAML.
func guardSet(t *testing.T, stage guards.Stage, id, use string, action guards.Action, settings string) *guards.Set {
	t.Helper()
	spec := guards.Spec{ID: id, Use: use, Action: action}
	if settings != "" {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(settings), &doc); err != nil {
			t.Fatal(err)
		}
		spec.Settings = doc.Content[0]
	}
	set, err := guards.Build(stage, []guards.Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

const awsKey = "AKIAIOSFODNN7EXAMPLE"

func TestRunInputGuardBlocksTheTask(t *testing.T) {
	for _, action := range []guards.Action{guards.ActionBlock, guards.ActionEscalate} {
		t.Run(string(action), func(t *testing.T) {
			requests := 0
			m := modelFunc(func(context.Context, *model.Call) (*model.Result, error) {
				requests++
				return nil, errors.New("the model must not be asked")
			})
			caller := &fakeCaller{}
			r, jsonl := newRunner(m, caller, Options{})
			r.InputGuards = guardSet(t, guards.StageInput, "no-secrets", "secrets.scan", action, "")
			rep, err := r.Run(context.Background(), "log in with "+awsKey+" and pick up the red cup")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Exit != ExitGuardBlocked || rep.Steps != 0 || requests != 0 || len(caller.calls) != 0 {
				t.Fatalf("report = %+v, model requests %d, calls %d", rep, requests, len(caller.calls))
			}
			if !strings.Contains(rep.Reason, "no-secrets") || !strings.Contains(rep.Reason, "input guard") {
				t.Errorf("reason %q does not name the guard", rep.Reason)
			}
			out := r.Out.(*bytes.Buffer).String()
			if strings.Contains(jsonl.String(), awsKey) || strings.Contains(out, awsKey) {
				t.Errorf("the blocked task was written out:\n%s\n%s", out, jsonl)
			}
			evs := events(t, jsonl)
			if last := evs[len(evs)-1]; last.Type != "end" || last.Outcome != "guard_blocked" || *last.Exit != ExitGuardBlocked {
				t.Errorf("last event = %+v", last)
			}
		})
	}
}

func TestRunInputGuardRedactsTheTask(t *testing.T) {
	var sent string
	m := modelFunc(func(_ context.Context, c *model.Call) (*model.Result, error) {
		sent = c.Messages[0].Text
		return scripted(t, model.Reply{Text: "done"}).Generate(context.Background(), c)
	})
	r, jsonl := newRunner(m, &fakeCaller{}, Options{})
	r.InputGuards = guardSet(t, guards.StageInput, "no-secrets", "secrets.scan", guards.ActionRedact, "")
	rep, err := r.Run(context.Background(), "log in with "+awsKey+" and pick up the red cup")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit != ExitAnswered || rep.Answer != "done" {
		t.Fatalf("report = %+v", rep)
	}
	if strings.Contains(sent, awsKey) || !strings.Contains(sent, "pick up the red cup") {
		t.Errorf("task sent to the model = %q, want it redacted", sent)
	}
	if strings.Contains(jsonl.String(), awsKey) {
		t.Errorf("the transcript holds the secret:\n%s", jsonl)
	}
}

// comboDeny redacts or blocks the combination. The secret, Q47X11, has letters: a transcript's
// timestamps hold runs of digits, and a digits-only secret could turn up in them by chance.
const comboDeny = `patterns: ['combination is \w+']`

func TestRunOutputGuardBlocksTheAnswer(t *testing.T) {
	for _, action := range []guards.Action{guards.ActionBlock, guards.ActionEscalate} {
		t.Run(string(action), func(t *testing.T) {
			r, jsonl := newRunner(scripted(t, model.Reply{Text: "The safe's combination is Q47X11."}), &fakeCaller{}, Options{})
			r.OutputGuards = guardSet(t, guards.StageOutput, "no-combinations", "regex.deny", action, comboDeny)
			rep, err := r.Run(context.Background(), "open the safe")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Exit != ExitGuardBlocked || rep.Answer != "" || rep.Steps != 1 {
				t.Fatalf("report = %+v", rep)
			}
			if !strings.Contains(rep.Reason, "no-combinations") || !strings.Contains(rep.Reason, "output guard") {
				t.Errorf("reason %q does not name the guard", rep.Reason)
			}
			out := r.Out.(*bytes.Buffer).String()
			if strings.Contains(out, "Q47X11") || strings.Contains(jsonl.String(), "Q47X11") {
				t.Errorf("the blocked answer was written out:\n%s\n%s", out, jsonl)
			}
			if !strings.Contains(out, "stopped (guard_blocked)") {
				t.Errorf("printed transcript:\n%s", out)
			}
		})
	}
}

func TestRunOutputGuardRedactsTheAnswer(t *testing.T) {
	r, jsonl := newRunner(scripted(t, model.Reply{Text: "The safe's combination is Q47X11."}), &fakeCaller{}, Options{})
	r.OutputGuards = guardSet(t, guards.StageOutput, "no-combinations", "regex.deny", guards.ActionRedact, comboDeny)
	rep, err := r.Run(context.Background(), "open the safe")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Exit != ExitAnswered || strings.Contains(rep.Answer, "Q47X11") || !strings.HasPrefix(rep.Answer, "The safe's ") {
		t.Fatalf("report = %+v, want a redacted answer", rep)
	}
	out := r.Out.(*bytes.Buffer).String()
	if strings.Contains(out, "Q47X11") || strings.Contains(jsonl.String(), "Q47X11") || !strings.Contains(out, "answer: "+rep.Answer) {
		t.Errorf("printed or recorded answer not redacted:\n%s\n%s", out, jsonl)
	}
	evs := events(t, jsonl)
	if last := evs[len(evs)-1]; last.Outcome != "answered" || last.Text != rep.Answer {
		t.Errorf("last event = %+v", last)
	}
}
