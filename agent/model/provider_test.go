package model

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNewProviders drives each HTTP provider against an httptest.Server
// answering with a recorded payload: the request must use the provider's
// method, path, key header and quirk headers, carry its default model and
// the recorded body, and the recorded answer must come back as the recorded
// Result.
func TestNewProviders(t *testing.T) {
	cases := []struct {
		provider   string
		format     string // testdata folder
		path       string
		keyEnv     string
		keyHeader  string // header that must carry the key; "" for none
		keyValue   func(key string) string
		model      string
		wantHeader map[string]string
		noHeader   []string
	}{
		{"anthropic", "anthropic", "/v1/messages", "ANTHROPIC_API_KEY", "x-api-key", plain, "claude-opus-5-5",
			map[string]string{"anthropic-version": "2023-06-01"}, []string{"Authorization"}},
		{"openai", "openai", "/chat/completions", "OPENAI_API_KEY", "Authorization", bearer, "gpt-4o-mini", nil, []string{"X-Title", "x-api-key"}},
		{"openai.responses", "responses", "/responses", "OPENAI_API_KEY", "Authorization", bearer, "gpt-4o-mini", nil, nil},
		{"openrouter", "openai", "/chat/completions", "OPENROUTER_API_KEY", "Authorization", bearer, "openai/gpt-5.5",
			map[string]string{"X-Title": "mcp-gateway"}, nil},
		{"deepseek", "openai", "/chat/completions", "DEEPSEEK_API_KEY", "Authorization", bearer, "deepseek-chat", nil, nil},
		{"qwen", "openai", "/chat/completions", "DASHSCOPE_API_KEY", "Authorization", bearer, "qwen-max-latest", nil, nil},
		{"mimo", "openai", "/chat/completions", "MIMO_API_KEY", "api-key", plain, "mimo-v2.5", nil, []string{"Authorization"}},
		{"ollama", "openai", "/chat/completions", "", "", nil, "llama3.2", nil, []string{"Authorization", "api-key", "x-api-key"}},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			if tc.keyEnv != "" {
				t.Setenv(tc.keyEnv, testKey)
			}
			rec := loadCase(t, filepath.Join("testdata", tc.format, "tool_turn1.json"))
			var wantReq map[string]any
			if err := json.Unmarshal(rec.Request, &wantReq); err != nil {
				t.Fatal(err)
			}
			wantReq["model"] = tc.model
			wantBody, _ := json.Marshal(wantReq)

			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests++
				if r.Method != http.MethodPost || r.URL.Path != "/base"+tc.path {
					t.Errorf("%s %s, want POST /base%s", r.Method, r.URL.Path, tc.path)
				}
				if tc.keyHeader != "" {
					if got, want := r.Header.Get(tc.keyHeader), tc.keyValue(testKey); got != want {
						t.Errorf("%s: %q, want %q", tc.keyHeader, got, want)
					}
				}
				for k, v := range tc.wantHeader {
					if got := r.Header.Get(k); got != v {
						t.Errorf("%s: %q, want %q", k, got, v)
					}
				}
				for _, k := range tc.noHeader {
					if got := r.Header.Get(k); got != "" {
						t.Errorf("unexpected %s: %q", k, got)
					}
				}
				body, _ := io.ReadAll(r.Body)
				assertSameJSON(t, "request", body, wantBody)
				for k, v := range rec.Headers {
					w.Header().Set(k, v)
				}
				w.Write(rec.Response)
			}))
			defer srv.Close()

			m, err := New(Settings{
				Provider:       tc.provider,
				BaseURL:        srv.URL + "/base/",
				MaxTokens:      rec.DefaultMaxTokens,
				MaxTokensParam: rec.MaxTokensParam,
				Timeout:        5 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			call := rec.Call
			call.Controls.Model = ""
			res, err := m.Generate(context.Background(), &call)
			if err != nil {
				t.Fatal(err)
			}
			if call.Controls.Model != "" {
				t.Errorf("Generate changed the caller's call: model %q", call.Controls.Model)
			}
			if requests != 1 {
				t.Errorf("made %d requests, want 1", requests)
			}
			got, _ := json.Marshal(res)
			assertSameJSON(t, "result", got, rec.Result)
		})
	}
}

func plain(key string) string  { return key }
func bearer(key string) string { return "Bearer " + key }

// TestNewSettings checks the overrides: api_key_env, extra headers,
// OPENAI_BASE_URL, max_retries, and that a missing key names its variable.
func TestNewSettings(t *testing.T) {
	var seen http.Header
	var path string
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		seen, path = r.Header.Clone(), r.URL.Path
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	t.Setenv("MY_KEY", testKey)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/proxy")
	m, err := New(Settings{Provider: "openai", APIKeyEnv: "MY_KEY", MaxRetries: ptr(0),
		Headers: map[string]string{"X-Team": "robots"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), validCall())
	if err == nil || !strings.Contains(err.Error(), "model provider openai") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("want a 503 error naming the provider, got %v", err)
	}
	if n != 1 || path != "/proxy/chat/completions" {
		t.Errorf("got %d requests to %s, want 1 (max_retries -1) to /proxy/chat/completions", n, path)
	}
	if seen.Get("Authorization") != "Bearer "+testKey || seen.Get("X-Team") != "robots" {
		t.Errorf("headers %v", seen)
	}

	n = 0
	m, _ = New(Settings{Provider: "deepseek", BaseURL: srv.URL, APIKeyEnv: "MY_KEY", MaxRetries: ptr(1)})
	tr := m.(*httpModel).transport
	tr.Backoff = func(int) time.Duration { return time.Millisecond }
	if _, err := m.Generate(context.Background(), validCall()); err == nil || n != 2 {
		t.Errorf("max_retries 1: got %v after %d requests, want an error after 2", err, n)
	}

	t.Setenv("ANTHROPIC_API_KEY", "")
	m, _ = New(Settings{Provider: "anthropic", BaseURL: srv.URL})
	if _, err := m.Generate(context.Background(), validCall()); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY is not set") {
		t.Errorf("want the missing key named, got %v", err)
	}
}

func TestNewDefaults(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	cases := map[string]string{
		"anthropic":        "https://api.anthropic.com/v1/messages",
		"openai":           "https://api.openai.com/v1/chat/completions",
		"openai.responses": "https://api.openai.com/v1/responses",
		"openrouter":       "https://openrouter.ai/api/v1/chat/completions",
		"mimo":             "https://token-plan-cn.xiaomimimo.com/v1/chat/completions",
		"qwen":             "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions",
		"deepseek":         "https://api.deepseek.com/v1/chat/completions",
		"ollama":           "http://localhost:11434/v1/chat/completions",
	}
	for provider, want := range cases {
		m, err := New(Settings{Provider: provider})
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		tr := m.(*httpModel).transport
		if got := tr.BaseURL + tr.Path; got != want {
			t.Errorf("%s: endpoint %s, want %s", provider, got, want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	t.Setenv(ReplayEnv, "")
	cases := []struct {
		s    Settings
		want string
	}{
		{Settings{Provider: "gemini"}, `provider: "gemini" is not a model provider; use one of: anthropic, deepseek, mimo, mock, ollama, openai, openai.responses, openrouter, qwen, scripted`},
		{Settings{Provider: "anthropc"}, `provider: "anthropc" is not a model provider (did you mean "anthropic"?)`},
		{Settings{Provider: ""}, "provider: is not set; choose one of anthropic"},
		{Settings{Provider: "anthropic", MaxTokensParam: MaxCompletionTokensParam}, "max_tokens_param: is a setting of the Chat Completions providers only (deepseek, mimo, ollama, openai, openrouter, qwen); provider anthropic (Messages) does not take it"},
		{Settings{Provider: "openai", MaxTokensParam: "max_output"}, `max_tokens_param: "max_output" is not valid; use one of: max_tokens, max_completion_tokens`},
		{Settings{Provider: "openai", MaxTokens: -1}, "max_tokens: must not be negative"},
		{Settings{Provider: "scripted"}, "provider: scripted needs a script"},
		{Settings{Provider: "mock"}, "replay_path: is not set: provider mock replays a recorded file; set replay_path or $LLM_REPLAY"},
	}
	for _, tc := range cases {
		if _, err := New(tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): got %v, want an error containing %q", tc.s, err, tc.want)
		}
	}
}
