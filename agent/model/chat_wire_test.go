package model

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestChatWireSettings checks the settings the Chat Completions wire takes: max_tokens_param is
// one of its two names, refused otherwise as a setting error naming the key and the provider;
// the Responses wire refuses stream.
func TestChatWireSettings(t *testing.T) {
	for _, p := range []string{"", MaxTokensParam, MaxCompletionTokensParam} {
		if _, err := newChatWire(Settings{Provider: "openai", MaxTokensParam: p}); err != nil {
			t.Errorf("max_tokens_param %q refused: %v", p, err)
		}
	}
	check := func(err error, key, provider string) {
		t.Helper()
		var errs SettingErrors
		if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != key || !strings.Contains(errs[0].Msg, provider) {
			t.Errorf("got %v; want one setting error on %s naming %s", err, key, provider)
		}
	}
	_, err := newChatWire(Settings{Provider: "deepseek", MaxTokensParam: "max_output_tokens"})
	check(err, "max_tokens_param", "deepseek")
	_, err = newResponsesWire(Settings{Provider: "openai.responses", Stream: true})
	check(err, "stream", "openai.responses")
	if w, err := newResponsesWire(Settings{Provider: "openai.responses"}); err != nil || w.stream() != nil {
		t.Errorf("responses wire: %v, stream decoder %v; want none", err, w)
	}
}

// TestOutputSchemaMustBeAnObject checks that the OpenAI wires refuse an output schema that is not
// a JSON object, instead of sending what the provider would reject or ignore.
func TestOutputSchemaMustBeAnObject(t *testing.T) {
	c := validCall()
	c.Controls.OutputSchema = json.RawMessage(`[1]`)
	if _, err := OpenAIChatRequest(c, ""); err == nil || !strings.Contains(err.Error(), "output schema is not a JSON object") {
		t.Errorf("chat: %v", err)
	}
	if _, err := OpenAIResponsesRequest(c); err == nil || !strings.Contains(err.Error(), "output schema is not a JSON object") {
		t.Errorf("responses: %v", err)
	}
}

// TestBlockEmptyAnswersWhitespace checks that an answer of whitespace or invisible characters
// alone (U+200B, U+FEFF) is empty for block_empty_answers, unstreamed and streamed, and that
// visible text is not.
func TestBlockEmptyAnswersWhitespace(t *testing.T) {
	for content, empty := range map[string]bool{`  \n `: true, `\u200b`: true, `\ufeff`: true, ` \u200b\u2060\ufeff\n`: true, `\u200bok`: false} {
		for _, stream := range []bool{false, true} {
			body := `{"id":"c","model":"m","choices":[{"message":{"content":"` + content + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
			if stream {
				body = `data: {"id":"s","model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n\ndata: [DONE]\n\n"
			}
			f := newFakeProvider(t, answerWith(0, nil, body))
			m, _ := New(Settings{Provider: "ollama", BaseURL: f.URL, BlockEmptyAnswers: true, Stream: stream})
			res, err := m.Generate(context.Background(), validCall())
			if err != nil {
				t.Fatal(err)
			}
			if res.Refusal != empty || (empty && res.FinishReason != FinishRefusal) {
				t.Errorf("%q stream %v: %+v, want a refusal %v", content, stream, res, empty)
			}
		}
	}
}

// TestTakesBlockEmptyAnswers checks that TakesBlockEmptyAnswers says of each HTTP provider
// what loading says: true exactly for those that load with block_empty_answers.
func TestTakesBlockEmptyAnswers(t *testing.T) {
	for name := range providers {
		_, err := New(Settings{Provider: name, BlockEmptyAnswers: true})
		if takes := TakesBlockEmptyAnswers(name); takes != (err == nil) {
			t.Errorf("%s: TakesBlockEmptyAnswers %v, loading with block_empty_answers: %v", name, takes, err)
		}
	}
	for _, name := range []string{"scripted", "mock", "nonesuch"} {
		if TakesBlockEmptyAnswers(name) {
			t.Errorf("%s takes block_empty_answers", name)
		}
	}
}
