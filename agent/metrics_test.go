package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
)

// TestMetrics runs scripted runs (answered, refused, failed) and one over HTTP that is retried,
// then checks the counters and that the metrics pass promlint.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, "scripted")

	// Answered in two requests.
	r, _ := newRunner(scripted(t,
		model.Reply{ToolCalls: []model.ScriptToolCall{callTo("robot__navigate_to", map[string]any{"target": "table"})}, Usage: &model.Usage{InputTokens: 10, OutputTokens: 5}, CostUSD: 0.25},
		model.Reply{Text: "done", Usage: &model.Usage{InputTokens: 20, OutputTokens: 3}, CostUSD: 0.5},
	), &fakeCaller{}, Options{})
	r.Metrics = m
	if rep, err := r.Run(context.Background(), "go to the table"); err != nil || rep.Exit != ExitAnswered {
		t.Fatalf("answered run: %+v, %v", rep, err)
	}
	// Refused.
	r, _ = newRunner(scripted(t, model.Reply{FinishReason: string(model.FinishRefusal), Usage: &model.Usage{InputTokens: 4, OutputTokens: 1}}), &fakeCaller{}, Options{})
	r.Metrics = m
	if rep, _ := r.Run(context.Background(), "do something bad"); rep.Exit != ExitRefused {
		t.Fatalf("refused run: %+v", rep)
	}
	// Failed.
	r, _ = newRunner(modelFunc(func(context.Context, *model.Call) (*model.Result, error) {
		return nil, errors.New("boom")
	}), &fakeCaller{}, Options{})
	r.Metrics = m
	if rep, _ := r.Run(context.Background(), "anything"); rep.Exit != ExitError {
		t.Fatalf("failed run: %+v", rep)
	}

	want := map[[2]string]float64{{"scripted", "ok"}: 2, {"scripted", "refused"}: 1, {"scripted", "error"}: 1}
	for labels, n := range want {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(labels[0], labels[1])); got != n {
			t.Errorf("model_requests_total%v = %g, want %g", labels, got, n)
		}
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("scripted", "input")); got != 34 {
		t.Errorf("input tokens %g, want 34", got)
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("scripted", "output")); got != 9 {
		t.Errorf("output tokens %g, want 9", got)
	}
	if got := testutil.ToFloat64(m.cost); got != 0.75 {
		t.Errorf("cost %g, want 0.75", got)
	}
	if got := testutil.ToFloat64(m.retries); got != 0 {
		t.Errorf("retries %g, want 0", got)
	}
	// Three statuses, two directions, one cost and one retry series: bounded label sets.
	if n := testutil.CollectAndCount(m.requests); n != 3 {
		t.Errorf("%d request series, want 3", n)
	}
	if n := testutil.CollectAndCount(m.tokens); n != 2 {
		t.Errorf("%d token series, want 2", n)
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, name := range []string{"mcp_gateway_model_requests_total", "mcp_gateway_model_tokens_total", "mcp_gateway_model_cost_usd_total", "mcp_gateway_model_retries_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
			t.Errorf("%s: %d series, %v", name, n, err)
		}
	}
}

// TestMetricsCountRetries runs the loop over an HTTP provider, configured as the command does,
// against a server that answers 429 then the answer: one retry, one ok request, its tokens.
func TestMetricsCountRetries(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, `{"id":"c1","model":"llama3.2","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}`)
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg, "ollama")
	s, err := ModelSettings(config.LLM{Provider: "ollama", BaseURL: srv.URL, MaxRetries: intp(2)})
	if err != nil {
		t.Fatal(err)
	}
	s.OnRetry = metrics.OnRetry
	m, err := model.New(s)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newRunner(m, &fakeCaller{}, Options{})
	r.Metrics = metrics
	rep, err := r.Run(context.Background(), "say done")
	if err != nil || rep.Exit != ExitAnswered || rep.Answer != "done" {
		t.Fatalf("run: %+v, %v", rep, err)
	}
	if got := testutil.ToFloat64(metrics.retries); got != 1 {
		t.Errorf("retries %g, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.requests.WithLabelValues("ollama", "ok")); got != 1 {
		t.Errorf("ok requests %g, want 1", got)
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcp_gateway_model_tokens_total Tokens of the built-in agent's model requests by provider and direction (input, output).
# TYPE mcp_gateway_model_tokens_total counter
mcp_gateway_model_tokens_total{direction="input",provider="ollama"} 7
mcp_gateway_model_tokens_total{direction="output",provider="ollama"} 2
`), "mcp_gateway_model_tokens_total")
	if err != nil {
		t.Error(err)
	}
}

// TestRunCancelled checks that a cancelled context ends the run with ExitError and a clear
// reason, before any model request is made, and that a cancellation during a request does too.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var requests int
	r, jsonl := newRunner(modelFunc(func(ctx context.Context, _ *model.Call) (*model.Result, error) {
		requests++
		return nil, ctx.Err()
	}), &fakeCaller{}, Options{})
	rep, err := r.Run(ctx, "anything")
	if !errors.Is(err, context.Canceled) || rep.Exit != ExitError || !strings.Contains(rep.Reason, "cancelled") || requests != 0 {
		t.Fatalf("report %+v, error %v, %d requests; want ExitError, cancelled, none", rep, err, requests)
	}
	evs := events(t, jsonl)
	if last := evs[len(evs)-1]; last.Type != "end" || last.Exit == nil || *last.Exit != ExitError {
		t.Errorf("last event %+v, want the end with exit 1", last)
	}

	// Cancelled while the model request is in flight.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	r, _ = newRunner(modelFunc(func(ctx context.Context, _ *model.Call) (*model.Result, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	}), &fakeCaller{}, Options{})
	rep, err = r.Run(ctx, "anything")
	if !errors.Is(err, context.Canceled) || rep.Exit != ExitError || !strings.Contains(rep.Reason, "cancelled") || rep.Steps != 1 {
		t.Fatalf("report %+v, error %v; want ExitError, cancelled, after one step", rep, err)
	}
}
