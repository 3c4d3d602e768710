package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
)

// modelOf is the model the agent builds from the llm section l.
func modelOf(t *testing.T, l config.LLM) model.Model {
	t.Helper()
	s, err := ModelSettings(l)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

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
	m := modelOf(t, cfg.LLM)
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
	var list model.SettingErrors
	if !errors.As(err, &list) || len(list) != 1 || list[0].Key != "replies[0].tool_calls[0].arguments" || cfg.LLM.Line(list[0].Key) != 5 ||
		list[0].Msg != "want a mapping of argument names to values" {
		t.Fatalf("err = %v", err)
	}
}

// TestModelSettingsConvertsEverySetting checks that each setting of the llm section reaches
// model.Settings: headers_env read from the environment, prices with their cache defaults, the
// anthropic settings, and scripted chunks.
func TestModelSettingsConvertsEverySetting(t *testing.T) {
	t.Setenv("TEST_MODEL_AUTH", "Bearer from-env")
	cfg, err := config.Parse("robot.yaml", []byte(`servers: [{name: robot, command: robot}]
llm:
  provider: anthropic
  base_url: http://gateway:4000
  api_key_env: GATEWAY_KEY
  max_tokens: 900
  timeout: 90s
  max_retries: 0
  headers_env: {Authorization: TEST_MODEL_AUTH}
  temperature: 0.2
  cost_header: x-cost
  prices: {claude-x: {input: 3, output: 15, cache_write: 3.75}}
  stream: true
  hold_stream: true
  thinking: none
  effort: high
  fallbacks: none
  structured_outputs: true
  sampling: true
  stream_max_tokens: 32000
  default: strong
  aliases: {strong: claude-x}
  replies:
    - {text: hello, chunks: [hel, lo], cost_usd: 0.5}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ModelSettings(cfg.LLM)
	if err != nil {
		t.Fatal(err)
	}
	want := model.Settings{
		Provider: "anthropic", BaseURL: "http://gateway:4000", APIKeyEnv: "GATEWAY_KEY", MaxTokens: 900,
		Timeout: 90 * time.Second, MaxRetries: new(int), Headers: map[string]string{"Authorization": "Bearer from-env"},
		CostHeader: "x-cost", Prices: map[string]model.Price{"claude-x": {Input: 3, Output: 15, CacheRead: 3, CacheWrite: 3.75}},
		Stream: true, HoldStream: true,
		Anthropic: model.AnthropicSettings{Thinking: "none", Effort: "high", Fallbacks: "none", StructuredOutputs: true, Sampling: true,
			StreamMaxTokens: 32000, Default: "strong", Aliases: map[string]string{"strong": "claude-x"}},
		Script: &model.ScriptedSettings{Replies: []model.Reply{{Text: "hello", Chunks: []string{"hel", "lo"}, CostUSD: 0.5}}},
	}
	if s.Temperature == nil || *s.Temperature != 0.2 {
		t.Errorf("temperature %v", s.Temperature)
	}
	s.Temperature = nil
	if !reflect.DeepEqual(s, want) {
		t.Errorf("settings\n%+v\nwant\n%+v", s, want)
	}

	t.Setenv("TEST_MODEL_AUTH", "")
	_, err = ModelSettings(cfg.LLM)
	if err == nil || err.Error() != "headers_env.Authorization: names the environment variable TEST_MODEL_AUTH, which is not set; set it, or remove the header" {
		t.Errorf("unset variable: %v", err)
	}
}

// TestCheckLLM checks that CheckLLM reports what building the model finds, keyed for the
// lines, and keeps an unset headers_env variable apart; AgentLLMCheck counts it as a problem.
func TestCheckLLM(t *testing.T) {
	l := &config.LLM{Provider: "openai", Thinking: "adaptive", HeadersEnv: map[string]string{"X-Team": "TEAM"},
		Replies: []config.ScriptReply{{Text: "hi", ToolCalls: []config.ScriptToolCall{{Name: "t", Arguments: &yaml.Node{Kind: yaml.SequenceNode}}}}}}
	getenv := func(string) string { return "" }
	problems, unset := CheckLLM(l, getenv)
	if len(problems) != 2 || problems[0].Key != "replies[0].tool_calls[0].arguments" || problems[1].Key != "thinking" ||
		!strings.Contains(problems[1].Msg, "is a setting of provider anthropic only; provider openai (Chat Completions) does not take it") {
		t.Errorf("problems %+v", problems)
	}
	if len(unset) != 1 || unset[0] != (config.LLMProblem{Key: "headers_env.X-Team", Msg: "names the environment variable TEAM, which is not set"}) {
		t.Errorf("unset %+v", unset)
	}
	if got := AgentLLMCheck(getenv)(l); len(got) != 3 || got[2].Key != "headers_env.X-Team" || !strings.HasSuffix(got[2].Msg, "; set it, or remove the header") {
		t.Errorf("agent: %+v", got)
	}
	problems, unset = CheckLLM(&config.LLM{Provider: "ollama", HeadersEnv: map[string]string{"X-Team": "TEAM"}}, func(string) string { return "robots" })
	if len(problems) != 0 || len(unset) != 0 {
		t.Errorf("a good section: %+v %+v", problems, unset)
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

// TestHeadersEnvReachTheProvider checks that a header of llm.headers_env is sent on every model
// request with the value of its variable, replacing the provider's own header of that name.
func TestHeadersEnvReachTheProvider(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Clone())
		io.WriteString(w, `{"id":"c","model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	t.Setenv("TEST_GATEWAY_TEAM", "robots")
	t.Setenv("TEST_GATEWAY_TITLE", "cell-7")
	t.Setenv("TEST_OR_KEY", "sk-or")
	cfg, err := config.Parse("robot.yaml", []byte(`servers: [{name: robot, command: robot}]
llm:
  provider: openrouter
  base_url: `+srv.URL+`
  api_key_env: TEST_OR_KEY
  headers_env: {X-Team: TEST_GATEWAY_TEAM, X-Title: TEST_GATEWAY_TITLE}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := modelOf(t, cfg.LLM)
	if _, err := m.Generate(context.Background(), &model.Call{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	h := got.Load().(http.Header)
	if h.Get("X-Team") != "robots" || h.Get("X-Title") != "cell-7" || h.Get("Authorization") != "Bearer sk-or" {
		t.Errorf("headers %v", h)
	}
}

// TestCheckLLMHeadersEnvNotAVariable checks that a headers_env value that is not a variable name
// is one problem, never looked up as a variable nor repeated, and not also "not set".
func TestCheckLLMHeadersEnvNotAVariable(t *testing.T) {
	l := &config.LLM{Provider: "openai", HeadersEnv: map[string]string{"X-Team": "team secret value"}}
	problems, unset := CheckLLM(l, func(string) string { return "" })
	if len(unset) != 0 || len(problems) != 1 || problems[0].Key != "headers_env.X-Team" ||
		!strings.Contains(problems[0].Msg, "does not look like an environment variable name") || strings.Contains(problems[0].Msg, "secret") {
		t.Fatalf("problems %+v, unset %+v", problems, unset)
	}
}
