package model

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// TestCostSources checks where a request's cost comes from, in order: the cost header (the
// default x-litellm-response-cost, another one, or none), the cost the body reports
// (OpenRouter's usage.cost), the price table by the model that answered, else by the model
// asked for; and that a model the table does not price costs 0 with a warning, once.
func TestCostSources(t *testing.T) {
	answer := func(header, body string) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			if header != "" {
				name, value, _ := strings.Cut(header, ": ")
				w.Header().Set(name, value)
			}
			io.WriteString(w, body)
		}
	}
	const (
		plain = `{"id":"c","model":"gpt-4.1-2025","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"prompt_tokens_details":{"cached_tokens":400}}}`
		other = `{"id":"c","model":"unknown-model","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100}}`
		byOR  = `{"id":"c","model":"gpt-4.1-2025","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"cost":0.5}}`
	)
	prices := map[string]Price{
		"gpt-4.1-2025": {Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 2},
		"gpt-4.1":      {Input: 10, Output: 10, CacheRead: 10, CacheWrite: 10},
	}
	// 600 plain input tokens at 2, 400 cached at 0.5, 100 output at 8, per million.
	const priced = (600*2 + 400*0.5 + 100*8) / 1e6
	cases := []struct {
		name, header, body, costHeader string
		prices                         map[string]Price
		cost                           float64
		source                         string
		warning                        string
	}{
		{"default header", "x-litellm-response-cost: 0.0123", plain, "", prices, 0.0123, CostFromHeader, ""},
		{"header before body", "x-litellm-response-cost: 0.25", byOR, "", prices, 0.25, CostFromHeader, ""},
		{"configured header", "x-gateway-cost: 0.75", plain, "x-gateway-cost", prices, 0.75, CostFromHeader, ""},
		{"other header not read", "x-litellm-response-cost: 0.9", plain, "x-gateway-cost", prices, priced, CostFromPrices, ""},
		{"header none", "x-litellm-response-cost: 0.9", plain, CostHeaderNone, prices, priced, CostFromPrices, ""},
		{"body cost before prices", "", byOR, "", prices, 0.5, CostFromProvider, ""},
		{"prices by the model that answered", "", plain, "", prices, priced, CostFromPrices, ""},
		{"prices by the model asked for", "", other, "", map[string]Price{"m": {Input: 1, Output: 1}}, 1100 / 1e6, CostFromPrices, ""},
		{"header not a number", "x-litellm-response-cost: free", plain, "", prices, priced, CostFromPrices, `the cost header x-litellm-response-cost is not a decimal number of USD`},
		{"no price", "", other, "", prices, 0, "", "no price for model unknown-model (nor m, the model asked for) in llm.prices"},
		{"no table", "", other, "", nil, 0, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t, answer(tc.header, tc.body))
			m, err := New(Settings{Provider: "ollama", BaseURL: f.URL, CostHeader: tc.costHeader, Prices: tc.prices})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Generate(context.Background(), validCall())
			if err != nil {
				t.Fatal(err)
			}
			if !near(res.Usage.CostUSD, tc.cost) || res.Usage.CostSource != tc.source {
				t.Errorf("cost %g from %q, want %g from %q", res.Usage.CostUSD, res.Usage.CostSource, tc.cost, tc.source)
			}
			warnings := strings.Join(res.Evidence.Warnings, "\n")
			if (tc.warning == "") != (warnings == "") || !strings.Contains(warnings, tc.warning) {
				t.Errorf("warnings %q, want %q", warnings, tc.warning)
			}
			if tc.warning != "" && strings.HasPrefix(tc.warning, "no price") {
				again, _ := m.Generate(context.Background(), validCall())
				if len(again.Evidence.Warnings) != 0 {
					t.Errorf("warned again: %q", again.Evidence.Warnings)
				}
			}
		})
	}
}

// TestPriceCacheWrite checks a Messages answer priced with cache writes.
func TestPriceCacheWrite(t *testing.T) {
	u := Usage{InputTokens: 1000, CacheReadTokens: 200, CacheWriteTokens: 300, OutputTokens: 50}
	p := Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	if got, want := p.cost(u), (500*3+200*0.3+300*3.75+50*15)/1e6; !near(got, want) {
		t.Errorf("cost %g, want %g", got, want)
	}
}

// TestScriptedCost checks the cost rules on the scripted and mock models: a reply's cost_usd
// counts as "scripted", else the price table prices the reply's model; the invocation id is in
// the evidence.
func TestScriptedCost(t *testing.T) {
	m, err := New(Settings{Provider: "scripted", Prices: map[string]Price{"sim-1": {Input: 1000, Output: 1000}},
		Script: &ScriptedSettings{Replies: []Reply{
			{Text: "one", CostUSD: 0.02},
			{Text: "two", Model: "sim-1", Usage: &Usage{InputTokens: 10, OutputTokens: 5}},
			{Text: "three", Model: "sim-2", Usage: &Usage{InputTokens: 10, OutputTokens: 5}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithInvocationID(context.Background(), "inv-1")
	want := []struct {
		cost    float64
		source  string
		warning bool
	}{{0.02, CostFromScript, false}, {0.015, CostFromPrices, false}, {0, "", true}}
	for i, w := range want {
		res, err := m.Generate(ctx, userCall("go"))
		if err != nil {
			t.Fatal(err)
		}
		if !near(res.Usage.CostUSD, w.cost) || res.Usage.CostSource != w.source || (len(res.Evidence.Warnings) > 0) != w.warning {
			t.Errorf("reply %d: cost %g from %q, warnings %q; want %g from %q", i, res.Usage.CostUSD, res.Usage.CostSource, res.Evidence.Warnings, w.cost, w.source)
		}
		if res.Evidence.InvocationID != "inv-1" {
			t.Errorf("reply %d: invocation id %q", i, res.Evidence.InvocationID)
		}
	}
}

// TestReplayKeepsItsCost checks that a replayed decision keeps the cost it was recorded with (a
// decision written in the short, scripted-reply form has a cost written by hand: "scripted"),
// and that a decision without one is priced from the table.
func TestReplayKeepsItsCost(t *testing.T) {
	path := writeReplay(t, `{"text":"a","usage":{"input_tokens":1,"output_tokens":1,"cost_usd":0.3}}
{"blocks":[{"kind":"text","text":"b"}],"finish_reason":"stop","usage":{"input_tokens":1000,"output_tokens":0,"cost_usd":0.1,"cost_source":"header"}}
{"blocks":[{"kind":"text","text":"c"}],"finish_reason":"stop","usage":{"input_tokens":1000,"output_tokens":0},"evidence":{"model":"m"}}
`)
	m, err := New(Settings{Provider: "mock", ReplayPath: path, Prices: map[string]Price{"m": {Input: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		cost   float64
		source string
	}{{0.3, CostFromScript}, {0.1, CostFromHeader}, {0.001, CostFromPrices}} {
		res, err := m.Generate(context.Background(), userCall("go"))
		if err != nil {
			t.Fatal(err)
		}
		if !near(res.Usage.CostUSD, w.cost) || res.Usage.CostSource != w.source {
			t.Errorf("decision %d: cost %g from %q, want %g from %q", i+1, res.Usage.CostUSD, res.Usage.CostSource, w.cost, w.source)
		}
	}
}
