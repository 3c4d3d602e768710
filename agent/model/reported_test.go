package model

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// answerWith answers every request with status (200 when 0), the headers and body.
func answerWith(status int, header map[string]string, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		if status != 0 {
			w.WriteHeader(status)
		}
		io.WriteString(w, body)
	}
}

const chatHi = `{"id":"c","model":"m","choices":[{"message":{"content":"BODY-MARKER hi"},"finish_reason":"stop"}],`

// TestImpossibleUsageFailsTheRequest checks that an answer reporting usage no request can have
// (a negative count or cost, a count that would overflow the run's sums, Messages iterations
// whose sum wraps) fails the request, naming the provider and the field but nothing else of the
// body, streamed or not; an answer with possible usage passes.
func TestImpossibleUsageFailsTheRequest(t *testing.T) {
	const anthropicBody = `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"BODY-MARKER hi"}],"stop_reason":"end_turn","usage":`
	cases := []struct {
		name, provider, body, field string
		stream                      bool
	}{
		{"openrouter negative cost", "openrouter", chatHi + `"usage":{"prompt_tokens":10,"completion_tokens":5,"cost":-100}}`, "usage.cost -100", false},
		{"negative prompt tokens", "openai", chatHi + `"usage":{"prompt_tokens":-1000000,"completion_tokens":5}}`, "usage.prompt_tokens -1000000", false},
		{"overflowing prompt tokens", "openai", chatHi + `"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":5}}`, "usage.prompt_tokens 9223372036854775807", false},
		{"negative cached tokens", "openai", chatHi + `"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":-5}}}`, "usage.prompt_tokens_details.cached_tokens -5", false},
		{"anthropic iterations that wrap", "anthropic", anthropicBody + `{"input_tokens":1,"output_tokens":1,"iterations":[{"input_tokens":9223372036854775807,"output_tokens":1},{"input_tokens":9223372036854775807,"output_tokens":1},{"input_tokens":3,"output_tokens":1}]}}`, "usage.iterations[0].input_tokens 9223372036854775807", false},
		{"anthropic negative iteration", "anthropic", anthropicBody + `{"input_tokens":1,"output_tokens":1,"iterations":[{"input_tokens":5,"output_tokens":1},{"input_tokens":-900,"output_tokens":1}]}}`, "usage.iterations[1].input_tokens -900", false},
		{"anthropic negative output", "anthropic", anthropicBody + `{"input_tokens":1,"output_tokens":-7}}`, "usage.output_tokens -7", false},
		{"chat stream negative usage", "openai", "data: {\"id\":\"s\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"BODY-MARKER\"},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"id\":\"s\",\"choices\":[],\"usage\":{\"prompt_tokens\":-50,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n", "usage.prompt_tokens -50", true},
		{"anthropic stream negative input", "anthropic", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":-40,\"output_tokens\":1}}}\n\n", "message.usage.input_tokens -40", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ANTHROPIC_API_KEY", "k-anthropic")
			t.Setenv("OPENAI_API_KEY", "k-openai")
			t.Setenv("OPENROUTER_API_KEY", "k-openrouter")
			f := newFakeProvider(t, answerWith(0, map[string]string{"Content-Type": "application/json"}, tc.body))
			m, err := New(Settings{Provider: tc.provider, BaseURL: f.URL, Stream: tc.stream})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Generate(context.Background(), validCall())
			if err == nil {
				t.Fatalf("no error; usage %+v", res.Usage)
			}
			msg := err.Error()
			if !strings.Contains(msg, "model provider "+tc.provider+":") || !strings.Contains(msg, tc.field) || !strings.Contains(msg, "no request can use or cost") {
				t.Errorf("error %q, want it to name the provider %s and %s", msg, tc.provider, tc.field)
			}
			if strings.Contains(msg, "BODY-MARKER") {
				t.Errorf("error %q repeats the body", msg)
			}
		})
	}
	t.Run("possible usage passes", func(t *testing.T) {
		t.Setenv("OPENROUTER_API_KEY", "k")
		f := newFakeProvider(t, answerWith(0, nil, chatHi+`"usage":{"prompt_tokens":10,"completion_tokens":5,"cost":0.25,"is_byok":false,"prompt_tokens_details":{"cached_tokens":0}}}`))
		m, _ := New(Settings{Provider: "openrouter", BaseURL: f.URL})
		res, err := m.Generate(context.Background(), validCall())
		if err != nil || res.Usage.InputTokens != 10 || res.Usage.CostUSD != 0.25 {
			t.Fatalf("%v, %+v", err, res)
		}
	})
}

// TestMockReplayWithNegativeUsageFails checks that the mock provider's recorded decisions go
// through the same check as a provider's answer.
func TestMockReplayWithNegativeUsageFails(t *testing.T) {
	path := writeReplay(t, `{"blocks":[{"kind":"text","text":"b"}],"finish_reason":"stop","usage":{"input_tokens":-1000,"output_tokens":0}}`+"\n")
	m, err := New(Settings{Provider: "mock", ReplayPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), validCall()); err == nil || !strings.Contains(err.Error(), "input_tokens -1000") {
		t.Fatalf("err %v, want the negative input_tokens refused", err)
	}
}

// TestNoUsageIsEstimated checks that an answer whose provider reports no usage, unstreamed or
// streamed without the usage chunk, counts estimated tokens with a warning saying so.
func TestNoUsageIsEstimated(t *testing.T) {
	cases := []struct {
		name, body string
		stream     bool
	}{
		{"no usage object", `{"id":"c","model":"m","choices":[{"message":{"content":"the answer, forty characters long ......"},"finish_reason":"stop"}]}`, false},
		{"stream without usage", "data: {\"id\":\"s\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"the answer, forty characters long ......\"}}]}\n\n" +
			"data: {\"id\":\"s\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeProvider(t, answerWith(0, nil, tc.body))
			m, _ := New(Settings{Provider: "ollama", BaseURL: f.URL, Stream: tc.stream})
			c := validCall()
			res, err := m.Generate(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if want := tokens(callChars(c)); res.Usage.InputTokens != want || res.Usage.OutputTokens != 10 {
				t.Errorf("usage %+v, want %d input and 10 output tokens estimated", res.Usage, want)
			}
			if w := strings.Join(res.Evidence.Warnings, "\n"); !strings.Contains(w, "the provider reported no usage for this request: its tokens were estimated") {
				t.Errorf("warnings %q", w)
			}
		})
	}
	t.Run("reported usage is kept", func(t *testing.T) {
		f := newFakeProvider(t, chatAnswer("m", "hi", 0, 3))
		m, _ := New(Settings{Provider: "ollama", BaseURL: f.URL})
		res, err := m.Generate(context.Background(), validCall())
		if err != nil || res.Usage.InputTokens != 0 || res.Usage.OutputTokens != 3 || len(res.Evidence.Warnings) != 0 {
			t.Fatalf("%v %+v", err, res)
		}
	})
}

// TestCostHeaderFailsClosed checks the cost header's values: a cost too large for any request
// ("1e309", "Inf") or a negative one fails the request, so that max_cost_usd is never disabled;
// what is not a decimal number (NaN, a hex float, text) is warned of and ignored.
func TestCostHeaderFailsClosed(t *testing.T) {
	cases := []struct {
		value   string
		fails   string
		warning bool
		cost    float64
	}{
		{"1e309", "reports a cost too large for any request (1e309)", false, 0},
		{"Inf", "too large", false, 0},
		{"+infinity", "too large", false, 0},
		{"-1", "reports the cost -1, which no request can cost", false, 0},
		{"-1e309", "no request can cost", false, 0},
		{"2e12", "no request can cost", false, 0},
		{"NaN", "", true, 0},
		{"0x1p4", "", true, 0},
		{"1_0", "", true, 0},
		{"free", "", true, 0},
		{"0.25", "", false, 0.25},
		{".5e-1", "", false, 0.05},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			f := newFakeProvider(t, answerWith(0, map[string]string{DefaultCostHeader: tc.value}, chatHi+`"usage":{"prompt_tokens":10,"completion_tokens":5}}`))
			m, _ := New(Settings{Provider: "ollama", BaseURL: f.URL})
			res, err := m.Generate(context.Background(), validCall())
			if tc.fails != "" {
				if err == nil || !strings.Contains(err.Error(), "model provider ollama: the cost header x-litellm-response-cost reports") || !strings.Contains(err.Error(), tc.fails) {
					t.Fatalf("err %v, want %q", err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := len(res.Evidence.Warnings) > 0; got != tc.warning || !near(res.Usage.CostUSD, tc.cost) {
				t.Errorf("cost %g, warnings %q; want %g, warning %v", res.Usage.CostUSD, res.Evidence.Warnings, tc.cost, tc.warning)
			}
		})
	}
}
