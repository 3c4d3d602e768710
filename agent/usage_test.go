package agent

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// TestAddUsageSaturates checks the run's sums: counts near the largest int stop there instead of
// wrapping to a negative total that no budget would see, and a negative count or cost (which the
// model layer refuses) lowers nothing.
func TestAddUsageSaturates(t *testing.T) {
	rn := &run{Runner: &Runner{Options: Options{MaxTokensTotal: 1000, MaxCostUSD: 1}}}
	rn.addUsage(model.Usage{InputTokens: math.MaxInt, OutputTokens: 10, CostUSD: 0.5})
	got := rn.addUsage(model.Usage{InputTokens: math.MaxInt, OutputTokens: math.MaxInt, CacheReadTokens: -5, CostUSD: -100})
	if got.InputTokens != math.MaxInt || got.OutputTokens != math.MaxInt || got.CacheReadTokens != 0 || got.CostUSD != 0.5 {
		t.Fatalf("usage %+v", got)
	}
	if why := rn.overBudget(); !strings.Contains(why, "max_tokens_total 1000 passed") {
		t.Errorf("overBudget %q, want the token budget passed", why)
	}
	rn.addUsage(model.Usage{CostUSD: math.NaN()})
	if u := rn.total(); u.CostUSD != 0.5 {
		t.Errorf("cost %g after NaN", u.CostUSD)
	}
}

// TestImpossibleUsageEndsTheRun runs the loop against an OpenRouter-like endpoint whose answer
// reports a negative cost and tokens: the request fails (exit 1) instead of answering past
// max_cost_usd and max_tokens_total.
func TestImpossibleUsageEndsTheRun(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	answer := `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":-1000000,"completion_tokens":5,"cost":-100}}`
	p := newProvider(t, []byte(answer), nil)
	m, err := model.New(model.Settings{Provider: "openrouter", BaseURL: p.URL, APIKeyEnv: "TEST_PROVIDER_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newRunner(m, &fakeCaller{}, Options{MaxCostUSD: 0.01, MaxTokensTotal: 100})
	rep, err := r.Run(context.Background(), "hello")
	if err == nil || !strings.Contains(err.Error(), "model provider openrouter") || !strings.Contains(err.Error(), "usage.cost -100") {
		t.Fatalf("err %v, want the request failed naming usage.cost", err)
	}
	if rep == nil || rep.Exit != ExitError || rep.Answer != "" {
		t.Fatalf("report %+v, want exit 1 without an answer", rep)
	}
}
