package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
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

// streamOf is a Chat Completions stream answering text in chunks, then finish stop, then the
// usage (stream_options include_usage), the way a provider sends it.
func streamOf(chunks []string, input, output int) string {
	var b strings.Builder
	for i, c := range chunks {
		delta := map[string]any{"content": c}
		if i == 0 {
			delta["role"] = "assistant"
		}
		line, _ := json.Marshal(map[string]any{"id": "chatcmpl-s", "model": "gpt-x", "choices": []any{map[string]any{"index": 0, "delta": delta}}})
		fmt.Fprintf(&b, "data: %s\n\n", line)
	}
	b.WriteString(`data: {"id":"chatcmpl-s","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-s","model":"gpt-x","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}`+"\n\n", input, output)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// TestHoldStreamHoldsChunksUntilTheAnswerIsShown streams a final answer with hold_stream and no
// output guards. Past max_tokens_total (the usage comes last), the answer is withheld: no chunk
// event and nothing of its text on the printout. Within the budget, its chunks go out once,
// before the step event, and the answer is printed once. The hold comes from the configuration
// (OptionsOf), as mcp-gateway agent builds it.
func TestHoldStreamHoldsChunksUntilTheAnswerIsShown(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	chunks := []string{"OVERBUDGET1 ", "OVERBUDGET2"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, streamOf(chunks, 10, 5))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name   string
		budget int
		exit   Exit
		shown  bool
	}{
		{"over budget", 10, ExitBudget, false},
		{"within budget", 100, ExitAnswered, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{LLM: config.LLM{Provider: "openai", Stream: true, HoldStream: true, MaxTokensTotal: tc.budget}}
			opts := OptionsOf(cfg)
			if !opts.HoldStream {
				t.Fatalf("OptionsOf dropped hold_stream: %+v", opts)
			}
			m, err := model.New(model.Settings{Provider: "openai", BaseURL: srv.URL, APIKeyEnv: "TEST_PROVIDER_KEY", Stream: true, HoldStream: true})
			if err != nil {
				t.Fatal(err)
			}
			r, jsonl := newRunner(m, &fakeCaller{}, opts)
			rep, err := r.Run(context.Background(), "say something")
			if err != nil || rep.Exit != tc.exit {
				t.Fatalf("report %+v, %v; want exit %s", rep, err, tc.exit)
			}
			evs := rawEvents(t, jsonl)
			var got []string
			for i, ev := range evs {
				if ev["type"] == "chunk" {
					got = append(got, ev["text"].(string))
					if evs[i+1]["type"] != "chunk" && evs[i+1]["type"] != "step" {
						t.Errorf("chunk event %v is not before its step's event", ev)
					}
				}
			}
			out := r.Out.(*bytes.Buffer).String()
			if !tc.shown {
				if got != nil || strings.Contains(out, "OVERBUDGET") {
					t.Errorf("the withheld answer got out: chunk events %q, printout:\n%s", got, out)
				}
				return
			}
			if !reflect.DeepEqual(got, chunks) || strings.Count(out, "  model: OVERBUDGET1 OVERBUDGET2\n") != 1 || rep.Answer != "OVERBUDGET1 OVERBUDGET2" {
				t.Errorf("chunk events %q, answer %q, printout:\n%s", got, rep.Answer, out)
			}
		})
	}
}
