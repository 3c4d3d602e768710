package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// TestRetriesFromConfig checks that the llm section's max_retries and timeout reach the
// transport the loop uses: against a server that always answers 503, a request is made
// max_retries+1 times (the default when zero, once when negative), each retry reported to the
// OnRetry hook; timeout bounds each attempt.
func TestRetriesFromConfig(t *testing.T) {
	for _, tc := range []struct {
		maxRetries *int
		attempts   int
	}{{nil, 1}, {new(int), 1}, {intp(1), 2}, {intp(4), 5}} {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		s, err := ModelSettings(config.LLM{Provider: "ollama", BaseURL: srv.URL, MaxRetries: tc.maxRetries})
		if err != nil {
			t.Fatal(err)
		}
		var retries atomic.Int32
		s.OnRetry = func(int, error) { retries.Add(1) }
		m, err := model.New(s)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Generate(context.Background(), &model.Call{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		srv.Close()
		var status *model.StatusError
		if !errors.As(err, &status) || status.StatusCode != http.StatusServiceUnavailable || status.Attempts != tc.attempts {
			t.Errorf("max_retries %v: error %v, want HTTP 503 after %d attempts", tc.maxRetries, err, tc.attempts)
		}
		if int(n.Load()) != tc.attempts || int(retries.Load()) != tc.attempts-1 {
			t.Errorf("max_retries %v: %d requests and %d retries, want %d and %d", tc.maxRetries, n.Load(), retries.Load(), tc.attempts, tc.attempts-1)
		}
	}

	t.Run("timeout", func(t *testing.T) {
		var n atomic.Int32
		stop := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}))
		defer srv.Close()
		defer close(stop)
		s, err := ModelSettings(config.LLM{Provider: "ollama", BaseURL: srv.URL, MaxRetries: new(int), Timeout: config.Duration(50 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.New(s)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = m.Generate(context.Background(), &model.Call{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second || n.Load() != 1 {
			t.Errorf("error %v after %s and %d requests, want the per-request deadline after one", err, time.Since(start), n.Load())
		}
	})
}

func intp(n int) *int { return &n }
