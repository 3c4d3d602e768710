package model

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
)

// TestMessagesProviderLimitsAndBetas drives the anthropic provider end to end against an
// httptest Messages endpoint that answers a recorded stream or message: a configured max_tokens
// is the limit of a request, while a streamed request that sets none takes stream_max_tokens
// (the provider must not fill the call's limit with max_tokens first), and a user's own
// anthropic-beta header is sent together with the refusal-fallbacks beta, not instead of it.
func TestMessagesProviderLimitsAndBetas(t *testing.T) {
	sse, err := os.ReadFile("testdata/anthropic/stream/tool_use.sse")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []map[string]any
	var betas []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		mu.Lock()
		bodies = append(bodies, body)
		betas = append(betas, r.Header.Get("anthropic-beta"))
		mu.Unlock()
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(sse)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	}))
	defer srv.Close()
	t.Setenv("TEST_ANTHROPIC_KEY", "k")
	call := &Call{Messages: []Message{{Role: RoleUser, Text: "hi"}}}
	for _, tc := range []struct {
		stream bool
		want   float64
	}{{false, 100}, {true, DefaultAnthropicStreamMaxTokens}} {
		m, err := New(Settings{Provider: "anthropic", BaseURL: srv.URL, APIKeyEnv: "TEST_ANTHROPIC_KEY", MaxTokens: 100, Stream: tc.stream,
			Headers: map[string]string{"anthropic-beta": "my-beta-2026-01-01"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Generate(context.Background(), call); err != nil {
			t.Fatalf("stream %v: %v", tc.stream, err)
		}
		mu.Lock()
		got, beta := bodies[len(bodies)-1]["max_tokens"], betas[len(betas)-1]
		mu.Unlock()
		if got != tc.want {
			t.Errorf("stream %v: max_tokens %v, want %v", tc.stream, got, tc.want)
		}
		if beta != "my-beta-2026-01-01,"+FallbackBeta {
			t.Errorf("stream %v: anthropic-beta %q, want the user's beta and %q", tc.stream, beta, FallbackBeta)
		}
	}
}
