package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorded is one request a fake provider received.
type recorded struct {
	header http.Header
	body   map[string]any
}

// fakeProvider is an httptest provider endpoint that records every request and answers each
// with answer (status 200 when it writes none).
type fakeProvider struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

func newFakeProvider(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *fakeProvider {
	t.Helper()
	f := &fakeProvider{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("request body is not JSON: %v\n%s", err, raw)
		}
		f.mu.Lock()
		f.requests = append(f.requests, recorded{header: r.Header.Clone(), body: body})
		f.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeProvider) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeProvider) last(t *testing.T) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("the provider got no request")
	}
	return f.requests[len(f.requests)-1]
}

// chatAnswer answers as a Chat Completions server: text from model, with usage.
func chatAnswer(model, text string, in, out int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		content, _ := json.Marshal(text)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","model":"`+model+`","choices":[{"index":0,"message":{"role":"assistant","content":`+string(content)+`},"finish_reason":"stop"}],"usage":{"prompt_tokens":`+itoa(in)+`,"completion_tokens":`+itoa(out)+`}}`)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// settingKeys returns the keys of New's SettingErrors, failing when err is not one.
func settingErrors(t *testing.T, err error) SettingErrors {
	t.Helper()
	var list SettingErrors
	if !errors.As(err, &list) {
		t.Fatalf("want SettingErrors, got %T: %v", err, err)
	}
	return list
}

// TestNewRefusesWhatTheProviderDoesNotTake checks the settings validated per provider: each
// mistake is one SettingError under the setting's key, saying what is wrong and what to do.
func TestNewRefusesWhatTheProviderDoesNotTake(t *testing.T) {
	temp := func(v float64) *float64 { return &v }
	cases := []struct {
		name string
		s    Settings
		key  string
		want string
	}{
		{"thinking on openai", Settings{Provider: "openai", Anthropic: AnthropicSettings{Thinking: "adaptive"}},
			"thinking", "is a setting of provider anthropic only; provider openai (Chat Completions) does not take it"},
		{"effort on openrouter", Settings{Provider: "openrouter", Anthropic: AnthropicSettings{Effort: "high"}},
			"effort", "provider anthropic only; provider openrouter (Chat Completions)"},
		{"fallbacks on openai.responses", Settings{Provider: "openai.responses", Anthropic: AnthropicSettings{Fallbacks: "none"}},
			"fallbacks", "provider openai.responses (Responses) does not take it"},
		{"structured_outputs on qwen", Settings{Provider: "qwen", Anthropic: AnthropicSettings{StructuredOutputs: true}}, "structured_outputs", "anthropic only"},
		{"sampling on deepseek", Settings{Provider: "deepseek", Anthropic: AnthropicSettings{Sampling: true}}, "sampling", "anthropic only"},
		{"stream_max_tokens on ollama", Settings{Provider: "ollama", Anthropic: AnthropicSettings{StreamMaxTokens: 10}}, "stream_max_tokens", "anthropic only"},
		{"aliases on openai", Settings{Provider: "openai", Anthropic: AnthropicSettings{Aliases: map[string]string{"fast": "x"}}}, "aliases", "anthropic only"},
		{"default on mimo", Settings{Provider: "mimo", Anthropic: AnthropicSettings{Default: "x"}}, "default", "anthropic only"},
		{"max_tokens_param on anthropic", Settings{Provider: "anthropic", MaxTokensParam: MaxTokensParam},
			"max_tokens_param", "is a setting of the Chat Completions providers only (deepseek, mimo, ollama, openai, openrouter, qwen); provider anthropic (Messages) does not take it"},
		{"block_empty_answers on anthropic", Settings{Provider: "anthropic", BlockEmptyAnswers: true}, "block_empty_answers", "Chat Completions providers only"},
		{"stream on openai.responses", Settings{Provider: "openai.responses", Stream: true},
			"stream", "is a setting of the Chat Completions providers (deepseek, mimo, ollama, openai, openrouter, qwen) and anthropic only; provider openai.responses (Responses) does not take it"},
		{"hold_stream on openai.responses", Settings{Provider: "openai.responses", HoldStream: true}, "hold_stream", "provider openai.responses (Responses) does not take it"},
		{"hold_stream without stream", Settings{Provider: "openai", HoldStream: true}, "hold_stream", "stream is not set; set stream: true, or remove hold_stream"},
		{"temperature without sampling on anthropic", Settings{Provider: "anthropic", Temperature: temp(0.5)},
			"temperature", "only with sampling: true, since current models reject sampling parameters; set sampling: true (older models only), or remove temperature"},
		{"temperature above 1 on anthropic", Settings{Provider: "anthropic", Temperature: temp(1.5), Anthropic: AnthropicSettings{Sampling: true, Thinking: ThinkingNone}}, "temperature", "must be from 0 to 1"},
		{"temperature above 2", Settings{Provider: "openai", Temperature: temp(2.5)}, "temperature", "must be from 0 to 2 for provider openai, got 2.5"},
		{"negative temperature", Settings{Provider: "openai", Temperature: temp(-1)}, "temperature", "must be from 0 to 2"},
		{"negative timeout", Settings{Provider: "openai", Timeout: -time.Second}, "timeout", "must not be negative; remove it for the default of 1m0s"},
		{"negative max_retries", Settings{Provider: "anthropic", MaxRetries: ptr(-1)}, "max_retries", "must be 0 (no retries"},
		{"negative max_tokens", Settings{Provider: "openai", MaxTokens: -1}, "max_tokens", "must not be negative"},
		{"negative stream_max_tokens", Settings{Provider: "anthropic", Anthropic: AnthropicSettings{StreamMaxTokens: -1}}, "stream_max_tokens", "must not be negative"},
		{"cost header not a header name", Settings{Provider: "openai", CostHeader: "x cost"}, "cost_header", `"x cost" is not an HTTP header name`},
		{"header name", Settings{Provider: "openai", Headers: map[string]string{"X Team": "v"}}, "headers_env.X Team", "is not an HTTP header name"},
		{"negative price", Settings{Provider: "openai", Prices: map[string]Price{"gpt-4.1": {Input: 1, Output: -2}}}, "prices.gpt-4.1.output", "must be 0 or more USD per million tokens, got -2"},
		{"negative price on scripted", Settings{Provider: "scripted", Script: &ScriptedSettings{Replies: []Reply{{Text: "x"}}}, Prices: map[string]Price{"m": {CacheRead: -1}}},
			"prices.m.cache_read", "must be 0 or more"},
		{"price without a model", Settings{Provider: "openai", Prices: map[string]Price{"": {}}}, "prices", "needs the model id"},
		{"max_tokens_param value", Settings{Provider: "openai", MaxTokensParam: "max_output"}, "max_tokens_param", `"max_output" is not valid; use one of: max_tokens, max_completion_tokens`},
		{"thinking value", Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Thinking: "adaptiv"}}, "thinking", `"adaptiv" is not valid (did you mean "adaptive"?); use one of: adaptive, none`},
		{"effort value", Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Effort: "huge"}}, "effort", "use one of: low, medium, high, xhigh, max"},
		{"fallbacks value", Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Fallbacks: "off"}}, "fallbacks", "use one of: default, none"},
		{"default not an alias", Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Default: "strnog", Aliases: map[string]string{"strong": "a", "fast": "b"}}},
			"default", `"strnog" is not one of the aliases (did you mean "strong"?) (fast, strong); name an alias, or give a model id in model instead`},
		{"default and model", Settings{Provider: "anthropic", Model: "x", Anthropic: AnthropicSettings{Default: "y"}}, "default", "and model are both given"},
		{"alias without a model id", Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Aliases: map[string]string{"fast": ""}}}, "aliases.fast", "names no model id"},
		{"misspelled provider", Settings{Provider: "anthropc"}, "provider", `"anthropc" is not a model provider (did you mean "anthropic"?)`},
		{"scripted regex", Settings{Provider: "scripted", Script: &ScriptedSettings{Rules: []ScriptRule{{Contains: "a", Reply: Reply{Text: "x"}}, {Matches: "(", Reply: Reply{Text: "y"}}}}},
			"rules[1].matches", "not a Go regular expression"},
		{"scripted role", Settings{Provider: "scripted", Script: &ScriptedSettings{Rules: []ScriptRule{{Role: "system", Reply: Reply{Text: "x"}}}}}, "rules[0].role", "want user, assistant or tool"},
		{"scripted chunks", Settings{Provider: "scripted", Script: &ScriptedSettings{Replies: []Reply{{Text: "hi"}, {Text: "hello", Chunks: []string{"hel", "l"}}}}},
			"replies[1].chunks", `the chunks join to "hell", not to the reply's text "hello"`},
		{"scripted finish reason", Settings{Provider: "scripted", Script: &ScriptedSettings{Replies: []Reply{{Text: "hi", FinishReason: "done"}}}}, "replies[0].finish_reason", "want stop, tool_calls"},
		{"scripted negative cost", Settings{Provider: "scripted", Script: &ScriptedSettings{Replies: []Reply{{Text: "hi", CostUSD: -1}}}}, "replies[0].cost_usd", "must not be negative"},
		{"scripted negative usage", Settings{Provider: "scripted", Script: &ScriptedSettings{Rules: []ScriptRule{{Reply: Reply{Text: "hi", Usage: &Usage{OutputTokens: -3}}}}}},
			"rules[0].reply.usage.output_tokens", "must not be negative, got -3"},
		{"scripted regex on another provider", Settings{Provider: "openai", Script: &ScriptedSettings{Rules: []ScriptRule{{Matches: "[", Reply: Reply{Text: "y"}}}}}, "rules[0].matches", "not a Go regular expression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.s)
			list := settingErrors(t, err)
			if len(list) != 1 || list[0].Key != tc.key || !strings.Contains(list[0].Msg, tc.want) {
				t.Fatalf("got %q, want one problem of %s containing %q", err, tc.key, tc.want)
			}
		})
	}
}

// TestNewListsEveryProblem checks that New does not stop at the first problem.
func TestNewListsEveryProblem(t *testing.T) {
	_, err := New(Settings{Provider: "openai", MaxTokens: -1, MaxTokensParam: "x",
		Anthropic: AnthropicSettings{Thinking: "adaptive", Effort: "max"}, Prices: map[string]Price{"m": {Input: -1}}})
	var keys []string
	for _, e := range settingErrors(t, err) {
		keys = append(keys, e.Key)
	}
	if got := strings.Join(keys, " "); got != "max_tokens prices.m.input thinking effort max_tokens_param" {
		t.Fatalf("keys %q (%v)", got, err)
	}
}

// TestNewTakesWhatTheProviderTakes checks that the settings of each provider load, and that
// scripted ignores those meant for a real provider, so an overlay can switch to it.
func TestNewTakesWhatTheProviderTakes(t *testing.T) {
	temp := 0.4
	for _, s := range []Settings{
		{Provider: "openai", MaxTokensParam: MaxCompletionTokensParam, BlockEmptyAnswers: true, Temperature: &temp, CostHeader: "x-cost", Timeout: time.Second, MaxRetries: ptr(0),
			Headers: map[string]string{"X-Team": "robots"}, Prices: map[string]Price{"gpt-4.1": {Input: 2, Output: 8}}},
		{Provider: "anthropic", Temperature: &temp, CostHeader: CostHeaderNone, Anthropic: AnthropicSettings{Thinking: "none", Effort: "xhigh", Fallbacks: "none",
			StructuredOutputs: true, Sampling: true, StreamMaxTokens: 1000, Default: "fast", Aliases: map[string]string{"fast": "claude-haiku"}}},
		{Provider: "anthropic", Anthropic: AnthropicSettings{Default: "claude-opus"}},
		{Provider: "openai.responses", Temperature: &temp},
		{Provider: "scripted", Script: &ScriptedSettings{Replies: []Reply{{Text: "hello", Chunks: []string{"hel", "lo"}}}},
			BaseURL: "http://x", Timeout: -1, MaxTokensParam: "bogus", Stream: true, HoldStream: true, Temperature: &temp,
			Anthropic: AnthropicSettings{Thinking: "adaptive"}, Headers: map[string]string{"X Bad": "v"}},
	} {
		if _, err := New(s); err != nil {
			t.Errorf("New(%s): %v", s.Provider, err)
		}
	}
}

// TestNewTimeouts checks the per-request timeout of each wire: the reference's defaults, else
// the configured one.
func TestNewTimeouts(t *testing.T) {
	for provider, want := range map[string]time.Duration{"openai": 60 * time.Second, "ollama": 60 * time.Second, "openai.responses": 60 * time.Second, "anthropic": 600 * time.Second} {
		m, err := New(Settings{Provider: provider})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.(*httpModel).transport.Timeout; got != want {
			t.Errorf("%s: timeout %s, want %s", provider, got, want)
		}
	}
	m, _ := New(Settings{Provider: "anthropic", Timeout: 5 * time.Second})
	if got := m.(*httpModel).transport.Timeout; got != 5*time.Second {
		t.Errorf("configured timeout %s, want 5s", got)
	}
}

// TestStalledProviderTimesOut checks that a provider that never answers fails the request at
// the configured timeout, naming it, and that the timed-out request is retried as configured.
func TestStalledProviderTimesOut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	f := newFakeProvider(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	for _, tc := range []struct {
		provider string
		retries  int
	}{{"openai", 0}, {"anthropic", 1}} {
		before := f.count()
		m, err := New(Settings{Provider: tc.provider, BaseURL: f.URL, APIKeyEnv: "TEST_STALL_KEY", Timeout: 150 * time.Millisecond, MaxRetries: ptr(tc.retries)})
		if err != nil {
			t.Fatal(err)
		}
		m.(*httpModel).transport.Backoff = func(int) time.Duration { return time.Millisecond }
		t.Setenv("TEST_STALL_KEY", testKey)
		start := time.Now()
		_, err = m.Generate(context.Background(), validCall())
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no complete answer within the request timeout of 150ms (llm.timeout)") {
			t.Errorf("%s: got %v, want the request timeout", tc.provider, err)
		}
		attempts := tc.retries + 1
		if min := time.Duration(attempts) * 150 * time.Millisecond; took < min || took > min+2*time.Second {
			t.Errorf("%s: failed after %s, want about %s", tc.provider, took, min)
		}
		if n := f.count() - before; n != attempts {
			t.Errorf("%s: %d requests, want %d", tc.provider, n, attempts)
		}
	}
}

// TestMaxRetries counts the requests at the server: nil takes the provider's default (none for
// Chat Completions and Responses, 2 for anthropic), 0 is none.
func TestMaxRetries(t *testing.T) {
	f := newFakeProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	t.Setenv("TEST_RETRY_KEY", testKey)
	for _, tc := range []struct {
		provider string
		retries  *int
		requests int
	}{
		{"openai", nil, 1}, {"openai.responses", nil, 1}, {"openai", ptr(2), 3},
		{"anthropic", nil, 3}, {"anthropic", ptr(0), 1}, {"anthropic", ptr(1), 2},
	} {
		before := f.count()
		m, err := New(Settings{Provider: tc.provider, BaseURL: f.URL, APIKeyEnv: "TEST_RETRY_KEY", MaxRetries: tc.retries})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Generate(context.Background(), validCall())
		var status *StatusError
		if !errors.As(err, &status) || status.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: got %v, want HTTP 503", tc.provider, err)
		}
		if n := f.count() - before; n != tc.requests {
			t.Errorf("%s max_retries %v: %d requests, want %d", tc.provider, tc.retries, n, tc.requests)
		}
	}
}

// TestHeadersAndInvocationID checks the headers of a request: the configured ones (headers_env)
// replacing the provider's own of the same name, and the loop's invocation id, which the answer
// carries in its evidence.
func TestHeadersAndInvocationID(t *testing.T) {
	f := newFakeProvider(t, chatAnswer("openai/gpt-5.5", "hi", 1, 1))
	t.Setenv("TEST_HDR_KEY", testKey)
	m, err := New(Settings{Provider: "openrouter", BaseURL: f.URL, APIKeyEnv: "TEST_HDR_KEY",
		Headers: map[string]string{"X-Team": "robots", "X-Title": "cell-7"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Generate(WithInvocationID(context.Background(), "run1-step3"), validCall())
	if err != nil {
		t.Fatal(err)
	}
	h := f.last(t).header
	if h.Get("X-Team") != "robots" || h.Get("X-Title") != "cell-7" || h.Get(InvocationHeader) != "run1-step3" || h.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("headers %v", h)
	}
	if res.Evidence.InvocationID != "run1-step3" {
		t.Errorf("evidence %+v, want the invocation id", res.Evidence)
	}
	if _, err := m.Generate(context.Background(), validCall()); err != nil {
		t.Fatal(err)
	}
	if h := f.last(t).header; h.Get(InvocationHeader) != "" {
		t.Errorf("an invocation id without one in the context: %q", h.Get(InvocationHeader))
	}
}

// TestControlsFromSettings checks that temperature and max_tokens are sent when a call sets
// none, and that a call's own win.
func TestControlsFromSettings(t *testing.T) {
	f := newFakeProvider(t, chatAnswer("m", "hi", 1, 1))
	temp := 0.3
	m, err := New(Settings{Provider: "ollama", BaseURL: f.URL, Temperature: &temp, MaxTokens: 77})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), validCall()); err != nil {
		t.Fatal(err)
	}
	if b := f.last(t).body; b["temperature"] != 0.3 || b["max_tokens"] != 77.0 {
		t.Errorf("body %v, want temperature 0.3 and max_tokens 77", b)
	}
	own := 0.9
	c := validCall()
	c.Controls.Temperature, c.Controls.MaxTokens = &own, 5
	if _, err := m.Generate(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if b := f.last(t).body; b["temperature"] != 0.9 || b["max_tokens"] != 5.0 {
		t.Errorf("body %v, want the call's temperature 0.9 and max_tokens 5", b)
	}
	if c.Controls.Temperature != &own {
		t.Error("Generate changed the caller's call")
	}
}

// TestAliases checks anthropic's default and aliases: a call naming no model gets the default
// alias's model id, a call naming an alias (as the llm.judge guard does) the alias's, and a
// call naming a model id that id.
func TestAliases(t *testing.T) {
	f := newFakeProvider(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
	})
	t.Setenv("TEST_ALIAS_KEY", testKey)
	s := Settings{Provider: "anthropic", BaseURL: f.URL, APIKeyEnv: "TEST_ALIAS_KEY",
		Anthropic: AnthropicSettings{Default: "strong", Aliases: map[string]string{"strong": "claude-opus-5-5", "fast": "claude-haiku-5-5"}}}
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ asked, sent string }{{"", "claude-opus-5-5"}, {"fast", "claude-haiku-5-5"}, {"claude-3-7-sonnet", "claude-3-7-sonnet"}} {
		c := validCall()
		c.Controls.Model = tc.asked
		if _, err := m.Generate(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if got := f.last(t).body["model"]; got != tc.sent {
			t.Errorf("a call naming %q sent model %v, want %s", tc.asked, got, tc.sent)
		}
	}
	if got := s.RequestModel(); got != "claude-opus-5-5" {
		t.Errorf("RequestModel %q", got)
	}
	if got := s.ResolveModel("fast"); got != "claude-haiku-5-5" {
		t.Errorf("ResolveModel(fast) %q", got)
	}
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{Provider: "anthropic"}, "claude-opus-5-5"},
		{Settings{Provider: "anthropic", Model: "claude-x"}, "claude-x"},
		{Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Default: "claude-y"}}, "claude-y"},
	} {
		if got := tc.s.RequestModel(); got != tc.want {
			t.Errorf("RequestModel of %+v: %q, want %q", tc.s.Anthropic, got, tc.want)
		}
	}
}

// TestBlockEmptyAnswers checks that with block_empty_answers an answer with no text and no tool
// calls is a refusal, its tokens still counted, and that without it (or with text) it is not.
func TestBlockEmptyAnswers(t *testing.T) {
	f := newFakeProvider(t, chatAnswer("m", "", 12, 0))
	m, err := New(Settings{Provider: "ollama", BaseURL: f.URL, BlockEmptyAnswers: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Generate(context.Background(), validCall())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Refusal || res.FinishReason != FinishRefusal || !strings.Contains(res.RefusalReason, "block_empty_answers") || res.Usage.InputTokens != 12 {
		t.Errorf("result %+v, want a refusal naming block_empty_answers with its usage", res)
	}
	plain, _ := New(Settings{Provider: "ollama", BaseURL: f.URL})
	if res, err := plain.Generate(context.Background(), validCall()); err != nil || res.Refusal {
		t.Errorf("without block_empty_answers: %+v, %v", res, err)
	}
	g := newFakeProvider(t, chatAnswer("m", "fine", 1, 1))
	m, _ = New(Settings{Provider: "ollama", BaseURL: g.URL, BlockEmptyAnswers: true})
	if res, err := m.Generate(context.Background(), validCall()); err != nil || res.Refusal || res.Text() != "fine" {
		t.Errorf("an answer with text: %+v, %v", res, err)
	}
}

// TestChatStreamNeedsADecoder checks that stream on a wire without a stream decoder is refused
// when the model is built, not at the first request.
func TestChatStreamNeedsADecoder(t *testing.T) {
	w, err := newChatWire(Settings{Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Settings{Provider: "openai", Stream: true})
	if w.stream() == nil {
		if list := settingErrors(t, err); list[0].Key != "stream" || !strings.Contains(list[0].Msg, "cannot stream yet") {
			t.Errorf("got %v", err)
		}
	} else if err != nil {
		t.Errorf("openai streams: %v", err)
	}
}

// TestNewRefusesAKeyInAPIKeyEnv checks that an api_key_env that is not a variable name (the key
// written in its place) is refused without repeating it.
func TestNewRefusesAKeyInAPIKeyEnv(t *testing.T) {
	_, err := New(Settings{Provider: "openai", APIKeyEnv: "sk-proj-PLANTED123"})
	list := settingErrors(t, err)
	if len(list) != 1 || list[0].Key != "api_key_env" || !strings.Contains(list[0].Msg, "does not look like an environment variable name") ||
		strings.Contains(err.Error(), "PLANTED") {
		t.Fatalf("%v", err)
	}
}
