package model

import (
	"context"
	"testing"
)

// TestAnthropicUsageNeverCountsLess checks, through a provider endpoint, that the usage
// counted is per count the larger of the top-level usage and the iterations' sum (a
// provider listing tiny or empty iterations under a large top-level usage cannot make the
// budgets count less), and in a stream the larger of message_start's and message_delta's
// counts (a later, smaller count does not replace a larger one).
func TestAnthropicUsageNeverCountsLess(t *testing.T) {
	const head = `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":`
	start := func(usage string) string {
		return "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"model\":\"claude\",\"content\":[],\"usage\":" + usage + "}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Done.\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	}
	end := func(usage string) string {
		return "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":" + usage + "}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	cases := []struct {
		name, body string
		stream     bool
		want       Usage
	}{
		{"tiny iterations", head + `{"input_tokens":5000,"output_tokens":5000,"iterations":[{"type":"message","input_tokens":1,"output_tokens":1}]}}`, false,
			Usage{InputTokens: 5000, OutputTokens: 5000}},
		{"an empty iteration", head + `{"input_tokens":5000,"output_tokens":5000,"iterations":[{}]}}`, false,
			Usage{InputTokens: 5000, OutputTokens: 5000}},
		{"iterations larger than the top level", head + `{"input_tokens":10,"output_tokens":3,"cache_read_input_tokens":0,"iterations":[{"input_tokens":400,"output_tokens":2,"cache_read_input_tokens":50},{"input_tokens":400,"output_tokens":2}]}}`, false,
			Usage{InputTokens: 850, OutputTokens: 4, CacheReadTokens: 50}},
		{"stream delta smaller than start", start(`{"input_tokens":5000,"output_tokens":5000}`) + end(`{"input_tokens":1,"output_tokens":1}`), true,
			Usage{InputTokens: 5000, OutputTokens: 5000}},
		{"stream delta with tiny iterations", start(`{"input_tokens":5000,"output_tokens":1}`) + end(`{"output_tokens":5000,"iterations":[{"input_tokens":1,"output_tokens":1}]}`), true,
			Usage{InputTokens: 5000, OutputTokens: 5000}},
		{"stream cumulative output", start(`{"input_tokens":40,"cache_read_input_tokens":100,"output_tokens":1}`) + end(`{"output_tokens":96}`), true,
			Usage{InputTokens: 140, OutputTokens: 96, CacheReadTokens: 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ANTHROPIC_API_KEY", "k-anthropic")
			f := newFakeProvider(t, answerWith(0, map[string]string{"Content-Type": "application/json"}, tc.body))
			m, err := New(Settings{Provider: "anthropic", BaseURL: f.URL, Stream: tc.stream})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Generate(context.Background(), validCall())
			if err != nil {
				t.Fatal(err)
			}
			got := res.Usage
			got.CostUSD, got.CostSource = 0, ""
			if got != tc.want {
				t.Errorf("usage %+v, want %+v", got, tc.want)
			}
			if len(res.Evidence.Warnings) != 0 {
				t.Errorf("warnings %q, want none (the usage was reported, not estimated)", res.Evidence.Warnings)
			}
		})
	}
}
