package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
)

// rawEvents reads the transcript as JSON objects, as a consumer of the JSONL reads it.
func rawEvents(t *testing.T, jsonl *bytes.Buffer) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(jsonl.Bytes()))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// ofType returns the events of one type.
func ofType(evs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, ev := range evs {
		if ev["type"] == typ {
			out = append(out, ev)
		}
	}
	return out
}

// field returns the value at a dotted path of a JSON object.
func field(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestStepEventsShowCostReasoningAndEvidence runs a two-step loop whose answers carry reasoning
// (readable and encrypted), a cost, evidence and a provider warning, and reads the transcript
// as JSON: each step event has its usage with cost_usd and cost_source, the run's total so far,
// the reasoning ("[redacted thinking]" for the encrypted block) and the evidence with the
// loop's invocation id, which is also the one the model's context carried and the one the tool
// call's governor.Call (its audit record) holds. The printout shows the same.
func TestStepEventsShowCostReasoningAndEvidence(t *testing.T) {
	var invocations []string
	step := 0
	m := modelFunc(func(ctx context.Context, c *model.Call) (*model.Result, error) {
		invocations = append(invocations, model.InvocationID(ctx))
		step++
		res := &model.Result{
			Usage:    model.Usage{InputTokens: 100 * step, OutputTokens: 10, CostUSD: 0.01 * float64(step), CostSource: "header"},
			Evidence: model.Evidence{RequestID: "req_" + string(rune('a'+step-1)), Model: "gpt-4o-mini-2024-07-18"},
		}
		if step == 1 {
			res.FinishReason = model.FinishToolCalls
			res.Evidence.Warnings = []string{"temperature ignored by this model"}
			res.Blocks = []model.Block{
				{Kind: model.BlockReasoning, Text: "Plan: drive first,\nthen pick."},
				{Kind: model.BlockReasoning, Redacted: true, Data: "opaque"},
				{Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "call_1", Name: "robot__navigate_to", Arguments: json.RawMessage(`{"target":"table"}`)}},
			}
			return res, nil
		}
		res.FinishReason = model.FinishStop
		res.Blocks = []model.Block{{Kind: model.BlockText, Text: "At the table."}}
		return res, nil
	})
	caller := &fakeCaller{}
	r, jsonl := newRunner(m, caller, Options{})
	rep, err := r.Run(context.Background(), "go to the table")
	if err != nil || rep.Exit != ExitAnswered || rep.Answer != "At the table." {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if want := []string{"run-1-step1-req1", "run-1-step2-req2"}; !reflect.DeepEqual(invocations, want) {
		t.Errorf("invocation ids in the model's context %q, want %q", invocations, want)
	}
	steps := ofType(rawEvents(t, jsonl), "step")
	if len(steps) != 2 {
		t.Fatalf("%d step events", len(steps))
	}
	want := []map[string]any{
		{"usage.cost_usd": 0.01, "usage.cost_source": "header", "usage.input_tokens": 100.0, "total.cost_usd": 0.01, "total.input_tokens": 100.0,
			"reasoning": "Plan: drive first,\nthen pick.\n\n[redacted thinking]", "evidence.request_id": "req_a", "evidence.model": "gpt-4o-mini-2024-07-18",
			"evidence.invocation_id": "run-1-step1-req1", "text": nil},
		{"usage.cost_usd": 0.02, "usage.cost_source": "header", "total.cost_usd": 0.03, "total.input_tokens": 300.0, "total.output_tokens": 20.0,
			"reasoning": nil, "evidence.request_id": "req_b", "evidence.invocation_id": "run-1-step2-req2", "text": "At the table."},
	}
	for i, w := range want {
		for path, v := range w {
			if got := field(steps[i], path); got != v {
				t.Errorf("step %d: %s = %#v, want %#v", i+1, path, got, v)
			}
		}
	}
	if got := field(steps[0], "evidence.warnings"); !reflect.DeepEqual(got, []any{"temperature ignored by this model"}) {
		t.Errorf("step 1 warnings %v", got)
	}
	if len(caller.calls) != 1 || caller.calls[0].Model == nil ||
		!reflect.DeepEqual(*caller.calls[0].Model, governor.ModelEvidence{RequestID: "req_a", Model: "gpt-4o-mini-2024-07-18", InvocationID: "run-1-step1-req1",
			Warnings: []string{"temperature ignored by this model"}}) {
		t.Errorf("the call's model evidence %+v", caller.calls[0].Model)
	}
	out := r.Out.(*bytes.Buffer).String()
	for _, w := range []string{
		"step 1 (tool_calls, 100+10 tokens, 0.01 USD (header), 0.01 USD so far,",
		"step 2 (stop, 200+10 tokens, 0.02 USD (header), 0.03 USD so far,",
		"  provider: temperature ignored by this model\n",
		"  thinking: Plan: drive first,\n            then pick.\n\n            [redacted thinking]\n",
		"answer: At the table.",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("printout lacks %q:\n%s", w, out)
		}
	}
}

// TestFinalAnswerPastTheBudgetIsWithheld checks that a final answer whose request passes
// max_cost_usd ends the run with the budget's exit, its answer neither the report's nor shown,
// with the cost from the provider's usage.cost (OpenRouter) and from scripted replies, and that
// spending exactly the budget still answers.
func TestFinalAnswerPastTheBudgetIsWithheld(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	body, header := recorded(t, "openai/tool_turn2.json") // OpenRouter: "The cup is in the drawer.", usage.cost 0.00042
	p := newProvider(t, body, header)
	openrouter, err := model.New(model.Settings{Provider: "openrouter", BaseURL: p.URL, APIKeyEnv: "TEST_PROVIDER_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		m      model.Model
		budget float64
		exit   Exit
		cost   float64
		source string
	}{
		{"openrouter usage.cost passes", openrouter, 0.0004, ExitBudget, 0.00042, "provider"},
		{"openrouter within", openrouter, 0.0005, ExitAnswered, 0.00042, "provider"},
		{"scripted cost_usd passes", scripted(t, model.Reply{Text: "The cup is in the drawer.", CostUSD: 0.01}), 0.005, ExitBudget, 0.01, "scripted"},
		{"scripted spends exactly", scripted(t, model.Reply{Text: "The cup is in the drawer.", CostUSD: 0.01}), 0.01, ExitAnswered, 0.01, "scripted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, jsonl := newRunner(tc.m, &fakeCaller{}, Options{MaxCostUSD: tc.budget})
			rep, err := r.Run(context.Background(), "where is the cup?")
			if err != nil || rep.Exit != tc.exit || rep.Usage.CostUSD != tc.cost {
				t.Fatalf("report %+v, %v; want exit %v having spent %g", rep, err, tc.exit, tc.cost)
			}
			evs := rawEvents(t, jsonl)
			step := ofType(evs, "step")[0]
			if field(step, "usage.cost_source") != tc.source || field(step, "total.cost_usd") != tc.cost {
				t.Errorf("step event %v", step)
			}
			out := r.Out.(*bytes.Buffer).String()
			if tc.exit == ExitAnswered {
				if rep.Answer != "The cup is in the drawer." {
					t.Errorf("answer %q", rep.Answer)
				}
				return
			}
			if rep.Answer != "" || strings.Contains(out, "The cup is in the drawer.") || strings.Contains(jsonl.String(), "The cup is in the drawer.") {
				t.Errorf("the answer bought past the budget was shown:\n%s\n%s", out, jsonl)
			}
			if !strings.Contains(rep.Reason, "max_cost_usd") || !strings.Contains(out, "stopped (budget_exhausted)") {
				t.Errorf("reason %q, printout:\n%s", rep.Reason, out)
			}
			if end := evs[len(evs)-1]; field(end, "exit") != 3.0 || field(end, "usage.cost_usd") != tc.cost {
				t.Errorf("end event %v", end)
			}
		})
	}
}

// TestUnpricedRequestWarns checks that a request whose cost nobody reports is noted when a cost
// budget is set, since the budget cannot count it.
func TestUnpricedRequestWarns(t *testing.T) {
	r, jsonl := newRunner(scripted(t, model.Reply{Text: "done", Model: "local-llm"}), &fakeCaller{}, Options{MaxCostUSD: 1})
	if rep, err := r.Run(context.Background(), "task"); err != nil || rep.Exit != ExitAnswered {
		t.Fatalf("report %+v, %v", rep, err)
	}
	step := ofType(rawEvents(t, jsonl), "step")[0]
	if w, _ := step["warning"].(string); !strings.Contains(w, `llm.prices for model "local-llm"`) {
		t.Errorf("step warning %q", w)
	}
	if out := r.Out.(*bytes.Buffer).String(); !strings.Contains(out, "  warning: the cost of this request is unknown") {
		t.Errorf("printout:\n%s", out)
	}
}

// TestChunksReachTheTranscript checks the chunk events of a chunked answer: live, before the
// step event, without output guards (printed once, as they come); held until the output guards
// pass the answer, and dropped when they redact or block it; a declined answer's go out only
// when nothing holds them (the stream was live), never under hold_stream.
func TestChunksReachTheTranscript(t *testing.T) {
	chunked := model.Reply{Text: "The cup is in the drawer.", Chunks: []string{"The cup ", "is in ", "the drawer."}}
	secret := model.Reply{Text: "The combination is Q47X11.", Chunks: []string{"The combination ", "is Q47X11."}}
	refusal := model.Reply{Text: "I won't open it.", Chunks: []string{"I won't ", "open it."}, FinishReason: "refusal"}
	cases := []struct {
		name   string
		reply  model.Reply
		hold   bool
		guard  guards.Action // an output guard denying the combination, or none
		chunks []string
		exit   Exit
	}{
		{"live", chunked, false, "", []string{"The cup ", "is in ", "the drawer."}, ExitAnswered},
		{"held until the guards pass", chunked, false, guards.ActionBlock, []string{"The cup ", "is in ", "the drawer."}, ExitAnswered},
		{"redacted answer", secret, false, guards.ActionRedact, nil, ExitAnswered},
		{"blocked answer", secret, false, guards.ActionBlock, nil, ExitGuardBlocked},
		{"refusal streamed live", refusal, false, "", []string{"I won't ", "open it."}, ExitRefused},
		{"refusal under hold_stream", refusal, true, "", nil, ExitRefused},
		{"refusal held by the guards", refusal, false, guards.ActionBlock, nil, ExitRefused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.NewScripted(model.ScriptedSettings{Replies: []model.Reply{tc.reply}, HoldStream: tc.hold})
			if err != nil {
				t.Fatal(err)
			}
			r, jsonl := newRunner(m, &fakeCaller{}, Options{})
			if tc.guard != "" {
				r.OutputGuards = guardSet(t, guards.StageOutput, "no-combinations", "regex.deny", tc.guard, comboDeny)
			}
			rep, err := r.Run(context.Background(), "task")
			if err != nil || rep.Exit != tc.exit {
				t.Fatalf("report %+v, %v", rep, err)
			}
			evs := rawEvents(t, jsonl)
			var chunks []string
			for i, ev := range evs {
				if ev["type"] != "chunk" {
					continue
				}
				chunks = append(chunks, ev["text"].(string))
				if ev["step"] != 1.0 || evs[i+1]["type"] != "chunk" && evs[i+1]["type"] != "step" {
					t.Errorf("chunk event %v is not before its step's event", ev)
				}
			}
			if !reflect.DeepEqual(chunks, tc.chunks) {
				t.Errorf("chunk events %q, want %q", chunks, tc.chunks)
			}
			out := r.Out.(*bytes.Buffer).String()
			if strings.Contains(out, "Q47X11") || strings.Contains(jsonl.String(), "Q47X11") {
				t.Errorf("the screened answer's text got out:\n%s\n%s", out, jsonl)
			}
			if tc.exit == ExitAnswered && tc.chunks != nil && strings.Count(out, "  model: The cup is in the drawer.\n") != 1 {
				t.Errorf("the answer is not printed once:\n%s", out)
			}
			if tc.chunks == nil && strings.Contains(out, "  model: I won't") {
				t.Errorf("a held refusal was printed:\n%s", out)
			}
		})
	}
}

// TestGuardReasoning checks that the reasoning stays out of the output guards by default and is
// screened by them with guard_reasoning: a block ends the run guard_blocked without showing it, a
// redaction shows it redacted.
func TestGuardReasoning(t *testing.T) {
	m := modelFunc(func(context.Context, *model.Call) (*model.Result, error) {
		return &model.Result{FinishReason: model.FinishStop, Blocks: []model.Block{
			{Kind: model.BlockReasoning, Text: "The combination is Q47X11, but I must not say it."},
			{Kind: model.BlockText, Text: "The safe is open."},
		}, Usage: model.Usage{InputTokens: 5, OutputTokens: 5}}, nil
	})
	cases := []struct {
		name      string
		on        bool
		action    guards.Action
		exit      Exit
		reasoning string // in the step event
	}{
		{"off", false, guards.ActionBlock, ExitAnswered, "The combination is Q47X11, but I must not say it."},
		{"on, block", true, guards.ActionBlock, ExitGuardBlocked, ""},
		{"on, escalate", true, guards.ActionEscalate, ExitGuardBlocked, ""},
		{"on, redact", true, guards.ActionRedact, ExitAnswered, "The [REDACTED], but I must not say it."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, jsonl := newRunner(m, &fakeCaller{}, Options{GuardReasoning: tc.on})
			r.OutputGuards = guardSet(t, guards.StageOutput, "no-combinations", "regex.deny", tc.action, comboDeny)
			rep, err := r.Run(context.Background(), "open the safe")
			if err != nil || rep.Exit != tc.exit {
				t.Fatalf("report %+v, %v", rep, err)
			}
			step := ofType(rawEvents(t, jsonl), "step")[0]
			if got, _ := step["reasoning"].(string); got != tc.reasoning {
				t.Errorf("step reasoning %q, want %q", got, tc.reasoning)
			}
			out := r.Out.(*bytes.Buffer).String()
			if tc.on && (strings.Contains(out, "Q47X11") || strings.Contains(jsonl.String(), "Q47X11")) {
				t.Errorf("screened reasoning got out:\n%s", out)
			}
			if tc.exit == ExitGuardBlocked && !strings.Contains(rep.Reason, "reasoning is withheld") {
				t.Errorf("reason %q", rep.Reason)
			}
		})
	}
}
