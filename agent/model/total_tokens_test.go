package model

import (
	"context"
	"testing"
)

// TestTotalTokensCounted checks, through provider endpoints, that a usage reporting only
// total_tokens (Chat Completions, streamed or not, and Responses) counts the total as input
// tokens rather than an estimate, that a total past input and output together counts the
// difference as input, and that a consistent total changes nothing.
func TestTotalTokensCounted(t *testing.T) {
	const chat = `{"id":"c","model":"m","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":`
	const responses = `{"id":"r","object":"response","status":"completed","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],"usage":`
	chatStream := func(usage string) string {
		return "data: {\"id\":\"s\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n" +
			"data: {\"id\":\"s\",\"choices\":[],\"usage\":" + usage + "}\n\ndata: [DONE]\n\n"
	}
	cases := []struct {
		name, provider, body string
		stream               bool
		in, out              int
	}{
		{"chat total only", "openai", chat + `{"total_tokens":500000}}`, false, 500000, 0},
		{"chat zero counts", "openai", chat + `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":500000}}`, false, 500000, 0},
		{"chat total past the counts", "openai", chat + `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":500000}}`, false, 499999, 1},
		{"chat consistent", "openai", chat + `{"prompt_tokens":300,"completion_tokens":3,"total_tokens":303}}`, false, 300, 3},
		{"chat stream total only", "openai", chatStream(`{"total_tokens":500000}`), true, 500000, 0},
		{"responses total only", "openai.responses", responses + `{"total_tokens":500000}}`, false, 500000, 0},
		{"responses consistent", "openai.responses", responses + `{"input_tokens":300,"output_tokens":50,"total_tokens":350}}`, false, 300, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "k-openai")
			f := newFakeProvider(t, answerWith(0, map[string]string{"Content-Type": "application/json"}, tc.body))
			m, err := New(Settings{Provider: tc.provider, BaseURL: f.URL, Stream: tc.stream})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Generate(context.Background(), validCall())
			if err != nil {
				t.Fatal(err)
			}
			if res.Usage.InputTokens != tc.in || res.Usage.OutputTokens != tc.out {
				t.Errorf("usage %+v, want %d input and %d output tokens", res.Usage, tc.in, tc.out)
			}
			if len(res.Evidence.Warnings) != 0 {
				t.Errorf("warnings %q, want none (the usage was reported, not estimated)", res.Evidence.Warnings)
			}
		})
	}
}
