package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// provider is an httptest provider endpoint that answers every request with one recorded
// response (body and headers) and keeps each request's body and headers.
type provider struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	response []byte
	header   map[string]string
}

func newProvider(t *testing.T, response []byte, header map[string]string) *provider {
	t.Helper()
	p := &provider{response: response, header: header}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		p.mu.Lock()
		p.bodies = append(p.bodies, body.Bytes())
		p.headers = append(p.headers, r.Header.Clone())
		p.mu.Unlock()
		for k, v := range p.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(p.response)
	}))
	t.Cleanup(p.Close)
	return p
}

// recorded returns a recorded exchange of the model package's testdata: the response body and
// its headers.
func recorded(t *testing.T, file string) ([]byte, map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("model", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Response json.RawMessage   `json:"response"`
		Headers  map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c.Response, c.Headers
}

// anthropicRefusal is a Messages answer declined after some text: stop_reason refusal.
const anthropicRefusal = `{"id":"msg_01C","type":"message","role":"assistant","model":"claude-sonnet-4-20250514",` +
	`"content":[{"type":"text","text":"Forcing the drawer"}],"stop_reason":"refusal","stop_sequence":null,` +
	`"usage":{"input_tokens":610,"output_tokens":4}}`

// TestRefusalVariantsEndModelRefusal runs the loop with the real providers (model.New) against
// provider endpoints answering each way a model declines: the refusal field, LiteLLM's
// provider_specific_fields.refusal, finish_reason content_filter, an empty answer under
// block_empty_answers, the Responses refusal part and Anthropic's refusal stop reason. Each ends
// the run refused (exit 2) with a reason starting model_refusal; nothing of the declined answer
// is shown or answered, and its tokens count in the report, the metrics and the transcript.
func TestRefusalVariantsEndModelRefusal(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	cases := []struct {
		name      string
		provider  string
		file      string // in model/testdata, or "" for body
		body      string
		block     bool
		reason    string // the refusal reason's start, after "model_refusal: "
		tokens    [2]int
		notShown  string // partial text of the declined answer
		requestID string
	}{
		{name: "refusal field", provider: "openai", file: "openai/refusal.json",
			reason: "I'm sorry, I can't help with that.", tokens: [2]int{300, 10}, requestID: "req_ref"},
		{name: "refusal field after partial text", provider: "openai", file: "openai/refusal_partial.json",
			reason: "Actually, I can't do that.", tokens: [2]int{300, 12}, notShown: "Sure, I will"},
		{name: "LiteLLM provider_specific_fields", provider: "openai", file: "openai/litellm_refusal.json",
			reason: "I can't help with moving that.", tokens: [2]int{300, 12}, requestID: "req_litellm"},
		{name: "content_filter", provider: "openai", file: "openai/content_filter.json",
			reason: "finish_reason content_filter", tokens: [2]int{300, 3}, notShown: "Partial answer that"},
		{name: "empty answer with block_empty_answers", provider: "openai", file: "openai/empty_blocked.json", block: true,
			reason: "the answer has no text and no tool calls, and block_empty_answers", tokens: [2]int{300, 1}},
		{name: "responses refusal part", provider: "openai.responses", file: "responses/refusal.json",
			reason: "I can't assist with that.", tokens: [2]int{300, 7}},
		{name: "anthropic refusal stop reason", provider: "anthropic", body: anthropicRefusal,
			reason: "", tokens: [2]int{610, 4}, notShown: "Forcing the drawer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, header := []byte(tc.body), map[string]string{}
			if tc.file != "" {
				body, header = recorded(t, tc.file)
			}
			p := newProvider(t, body, header)
			m, err := model.New(model.Settings{Provider: tc.provider, BaseURL: p.URL, APIKeyEnv: "TEST_PROVIDER_KEY", BlockEmptyAnswers: tc.block})
			if err != nil {
				t.Fatal(err)
			}
			metrics := NewMetrics(prometheus.NewRegistry(), tc.provider)
			caller := &fakeCaller{}
			r, jsonl := newRunner(m, caller, Options{})
			r.Metrics = metrics
			rep, err := r.Run(context.Background(), "force the drawer open")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Exit != 2 || !strings.HasPrefix(rep.Reason, "model_refusal: "+tc.reason) || rep.Answer != "" {
				t.Fatalf("report %+v; want exit 2 with a reason starting %q", rep, "model_refusal: "+tc.reason)
			}
			if rep.Usage.InputTokens != tc.tokens[0] || rep.Usage.OutputTokens != tc.tokens[1] || len(caller.calls) != 0 {
				t.Errorf("usage %+v, %d calls; want %v tokens and no call", rep.Usage, len(caller.calls), tc.tokens)
			}
			p.mu.Lock()
			bodies, headers := p.bodies, p.headers
			p.mu.Unlock()
			if len(bodies) != 1 || !bytes.Contains(bodies[0], []byte(`force the drawer open`)) {
				t.Errorf("the provider got %d requests: %s", len(bodies), bodies)
			} else if key := headers[0].Get("Authorization") + headers[0].Get("x-api-key"); !strings.Contains(key, "sk-test") {
				t.Errorf("the request carried no key: %v", headers[0])
			}
			if got := testutil.ToFloat64(metrics.requests.WithLabelValues(tc.provider, statusRefused)); got != 1 {
				t.Errorf("refused requests %g, want 1", got)
			}
			if got := testutil.ToFloat64(metrics.tokens.WithLabelValues(tc.provider, "input")); got != float64(tc.tokens[0]) {
				t.Errorf("input tokens counted %g, want %d", got, tc.tokens[0])
			}
			out := r.Out.(*bytes.Buffer).String()
			if strings.Contains("\n"+out, "\nanswer:") || !strings.Contains(out, "stopped (refused): model_refusal") {
				t.Errorf("printed:\n%s", out)
			}
			if tc.notShown != "" && (strings.Contains(out, tc.notShown) || strings.Contains(jsonl.String(), tc.notShown)) {
				t.Errorf("the declined answer's text %q was shown:\n%s\n%s", tc.notShown, out, jsonl)
			}
			evs := events(t, jsonl)
			step, end := evs[len(evs)-2], evs[len(evs)-1]
			if step.Type != "step" || step.FinishReason == "" || step.Text != "" || step.Usage == nil || step.Usage.InputTokens != tc.tokens[0] ||
				!strings.HasPrefix(step.Reason, "model_refusal") || step.Evidence == nil || step.Evidence.InvocationID != "run-1-step1-req1" {
				t.Errorf("step event %+v", step)
			}
			if tc.requestID != "" && step.Evidence.RequestID != tc.requestID {
				t.Errorf("step evidence %+v, want request id %s", step.Evidence, tc.requestID)
			}
			if end.Type != "end" || end.Outcome != "refused" || *end.Exit != ExitRefused || end.Usage.OutputTokens != tc.tokens[1] {
				t.Errorf("end event %+v", end)
			}
		})
	}
}

// TestRefusalCategoryInTheReason checks that a refusal whose provider names a category (the
// Messages API after fallbacks) ends with the category in the reason and the step event.
func TestRefusalCategoryInTheReason(t *testing.T) {
	m := modelFunc(func(context.Context, *model.Call) (*model.Result, error) {
		return &model.Result{Blocks: []model.Block{}, FinishReason: model.FinishRefusal, Refusal: true,
			RefusalReason: "stop_reason refusal", RefusalCategory: "cyber", Usage: model.Usage{InputTokens: 50, OutputTokens: 2}}, nil
	})
	r, jsonl := newRunner(m, &fakeCaller{}, Options{})
	rep, err := r.Run(context.Background(), "task")
	if err != nil || rep.Exit != ExitRefused || rep.Reason != "model_refusal (category cyber): stop_reason refusal" || rep.Usage.InputTokens != 50 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	evs := events(t, jsonl)
	if step := evs[len(evs)-2]; step.Category != "cyber" || step.Reason != rep.Reason {
		t.Errorf("step event %+v", step)
	}
}

// TestEmptyAnswerIsNotPrintedAsAnAnswer checks that an answer with no text and no tool calls,
// block_empty_answers off, ends the run answered (a model may end a tool loop with nothing to
// add) without an answer line, saying so and naming the setting.
func TestEmptyAnswerIsNotPrintedAsAnAnswer(t *testing.T) {
	t.Setenv("TEST_PROVIDER_KEY", "sk-test")
	body, header := recorded(t, "openai/empty_answer.json")
	p := newProvider(t, body, header)
	m, err := model.New(model.Settings{Provider: "openai", BaseURL: p.URL, APIKeyEnv: "TEST_PROVIDER_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	r, jsonl := newRunner(m, &fakeCaller{}, Options{})
	r.Provider = "openai"
	rep, err := r.Run(context.Background(), "anything else?")
	if err != nil || rep.Exit != ExitAnswered || rep.Answer != "" || !strings.Contains(rep.Reason, "block_empty_answers") {
		t.Fatalf("report %+v, %v", rep, err)
	}
	out := r.Out.(*bytes.Buffer).String()
	if strings.Contains("\n"+out, "\nanswer:") || strings.Contains(out, "  model:") || !strings.Contains(out, "ended without an answer: the model gave no text") {
		t.Errorf("printed:\n%s", out)
	}
	evs := events(t, jsonl)
	if end := evs[len(evs)-1]; end.Outcome != "answered" || end.Text != "" || !strings.Contains(end.Reason, "no text and no tool calls") {
		t.Errorf("end event %+v", end)
	}
}

// TestWhiteSpaceAnswerIsNoAnswer checks that an answer of white space or invisible characters
// alone (U+200B, U+FEFF, U+2060), block_empty_answers off, ends like an empty one: answered with
// no answer, never printed as the model's words.
func TestWhiteSpaceAnswerIsNoAnswer(t *testing.T) {
	for _, text := range []string{"  \n\t ", "\u200b", "\ufeff", " \u200b\u2060\n"} {
		m, err := model.NewScripted(model.ScriptedSettings{Replies: []model.Reply{{Text: text}}})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := newRunner(m, &fakeCaller{}, Options{})
		rep, err := r.Run(context.Background(), "anything else?")
		if err != nil || rep.Exit != ExitAnswered || rep.Answer != "" || !strings.Contains(rep.Reason, "the model gave no text") {
			t.Fatalf("%q: report %+v, %v", text, rep, err)
		}
		if out := r.Out.(*bytes.Buffer).String(); strings.Contains(out, "  model:") || !strings.Contains(out, "ended without an answer") {
			t.Errorf("%q: printed:\n%s", text, out)
		}
	}
}

// TestEmptyAnswerHintOnlyWhereTaken checks that an empty answer's reason advises
// llm.block_empty_answers only for a provider that takes it (Chat Completions), not for
// anthropic or openai.responses, which refuse it at load, nor scripted, which ignores it.
func TestEmptyAnswerHintOnlyWhereTaken(t *testing.T) {
	m := modelFunc(func(context.Context, *model.Call) (*model.Result, error) {
		return &model.Result{Blocks: []model.Block{}, FinishReason: model.FinishStop, Usage: model.Usage{InputTokens: 5, OutputTokens: 1}}, nil
	})
	for provider, hint := range map[string]bool{"openai": true, "ollama": true, "anthropic": false, "openai.responses": false, "scripted": false} {
		r, _ := newRunner(m, &fakeCaller{}, Options{})
		r.Provider = provider
		rep, err := r.Run(context.Background(), "anything else?")
		if err != nil || rep.Exit != ExitAnswered || !strings.Contains(rep.Reason, "the model gave no text and no tool calls") {
			t.Fatalf("%s: report %+v, %v", provider, rep, err)
		}
		if got := strings.Contains(rep.Reason, "block_empty_answers"); got != hint {
			t.Errorf("%s: reason %q, want the block_empty_answers hint %v", provider, rep.Reason, hint)
		}
	}
}
