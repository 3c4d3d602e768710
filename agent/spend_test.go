package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// toolCallAnswer is a Chat Completions answer asking for a tool call, so that a run that is not
// stopped by its budget goes on to call the tool.
const toolCallAnswer = `{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
	`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"move_arm","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}],` +
	`"usage":{"prompt_tokens":300,"completion_tokens":10}}`

// TestCostBudgetTripsOnHeaderAndPrices runs the loop with the real openai provider against an
// endpoint whose answer asks for a tool call: when the request's cost, from the gateway's cost
// header or from llm.prices, passes max_cost_usd, the run ends budget_exhausted (exit 3) before
// the tool runs, and the step records the cost and where it came from.
func TestCostBudgetTripsOnHeaderAndPrices(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	for _, tc := range []struct {
		name   string
		header map[string]string
		prices map[string]model.Price
		cost   float64
		source string
	}{
		{"cost header", map[string]string{"x-litellm-response-cost": "0.02"}, nil, 0.02, model.CostFromHeader},
		{"price table", nil, map[string]model.Price{"gpt-x": {Input: 100, Output: 1000}}, 0.04, model.CostFromPrices},
		{"header before the table", map[string]string{"x-litellm-response-cost": "0.02"}, map[string]model.Price{"gpt-x": {Input: 1}}, 0.02, model.CostFromHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, []byte(toolCallAnswer), tc.header)
			m, err := model.New(model.Settings{Provider: "openai", BaseURL: p.URL, APIKeyEnv: "TEST_PROVIDER_KEY", Prices: tc.prices})
			if err != nil {
				t.Fatal(err)
			}
			caller := &fakeCaller{}
			r, jsonl := newRunner(m, caller, Options{MaxCostUSD: 0.01})
			rep, err := r.Run(context.Background(), "move the arm")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Exit != ExitBudget || !strings.Contains(rep.Reason, "max_cost_usd") || len(caller.calls) != 0 || !near(rep.Usage.CostUSD, tc.cost) {
				t.Fatalf("report %+v, %d calls; want budget_exhausted at %g USD before any call", rep, len(caller.calls), tc.cost)
			}
			var step *Event
			for _, ev := range events(t, jsonl) {
				if ev.Type == "step" {
					step = &ev
				}
			}
			if step == nil || step.Usage == nil || step.Usage.CostSource != tc.source || !near(step.Usage.CostUSD, tc.cost) {
				t.Errorf("step event %+v; want cost %g from %q", step, tc.cost, tc.source)
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestStreamedRefusalUnderHoldStream streams a Chat Completions answer that a content filter cuts
// off after some text: with hold_stream no chunk of it reaches the transcript or the printout,
// without it the chunks were shown live; either way the run ends refused, never answered.
func TestStreamedRefusalUnderHoldStream(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	sse, err := os.ReadFile("model/testdata/openai/stream/content_filter.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	defer srv.Close()
	for _, hold := range []bool{true, false} {
		m, err := model.New(model.Settings{Provider: "openai", BaseURL: srv.URL, APIKeyEnv: "TEST_PROVIDER_KEY", Stream: true, HoldStream: hold})
		if err != nil {
			t.Fatal(err)
		}
		r, jsonl := newRunner(m, &fakeCaller{}, Options{})
		rep, err := r.Run(context.Background(), "open the safe")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Exit != ExitRefused || rep.Answer != "" || !strings.HasPrefix(rep.Reason, "model_refusal") {
			t.Fatalf("hold %v: report %+v; want refused", hold, rep)
		}
		shown := strings.Contains(jsonl.String(), "the safe by") || strings.Contains(r.Out.(interface{ String() string }).String(), "the safe by")
		if hold && shown {
			t.Errorf("hold_stream: the declined answer's text reached the transcript or the printout:\n%s", jsonl)
		}
		if !hold && !shown {
			t.Errorf("without hold_stream: the streamed chunks were not shown live:\n%s", jsonl)
		}
	}
}
