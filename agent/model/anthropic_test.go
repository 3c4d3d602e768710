package model

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// anthropicSettingsCase is the llm section's Messages settings under their names.
type anthropicSettingsCase struct {
	Thinking          string `json:"thinking"`
	Effort            string `json:"effort"`
	Fallbacks         string `json:"fallbacks"`
	StructuredOutputs bool   `json:"structured_outputs"`
	Sampling          bool   `json:"sampling"`
	MaxTokens         int    `json:"max_tokens"`
	StreamMaxTokens   int    `json:"stream_max_tokens"`
}

func (c anthropicSettingsCase) settings() Settings {
	return Settings{Provider: "anthropic", MaxTokens: c.MaxTokens, Anthropic: AnthropicSettings{
		Thinking: c.Thinking, Effort: c.Effort, Fallbacks: c.Fallbacks,
		StructuredOutputs: c.StructuredOutputs, Sampling: c.Sampling, StreamMaxTokens: c.StreamMaxTokens,
	}}
}

// TestAnthropicRequestSettings checks each Messages setting against its recorded request
// (testdata/anthropic/requests): the body sent and the headers the wire adds.
func TestAnthropicRequestSettings(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "anthropic", "requests", "*.json"))
	if len(files) < 10 {
		t.Fatalf("want the recorded requests of every setting, got %d files", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			var c struct {
				Settings anthropicSettingsCase `json:"settings"`
				Stream   bool                  `json:"stream"`
				Call     Call                  `json:"call"`
				Request  json.RawMessage       `json:"request"`
				Header   map[string]string     `json:"header"`
			}
			decodeStrict(t, file, &c)
			w, err := newMessagesWire(c.Settings.settings())
			if err != nil {
				t.Fatal(err)
			}
			body, err := w.request(&c.Call, c.Stream)
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, "request", body, c.Request)
			got := map[string]string{}
			for k, v := range w.header() {
				got[k] = strings.Join(v, ", ")
			}
			if !reflect.DeepEqual(got, c.Header) {
				t.Errorf("headers %v, want %v", got, c.Header)
			}
			if w.stream() == nil {
				t.Error("the Messages wire has no stream decoder")
			}
		})
	}
}

// TestAnthropicSettingsRejected checks that every wrong Messages setting is reported at
// once, each under its llm key and saying what to write instead.
func TestAnthropicSettingsRejected(t *testing.T) {
	cases := []struct {
		s    AnthropicSettings
		key  string
		want string
	}{
		{AnthropicSettings{Thinking: "enabled"}, "thinking", `"enabled" is not a thinking mode of provider anthropic: want adaptive (the default) or none`},
		{AnthropicSettings{Effort: "extreme"}, "effort", "want one of low, medium, high, xhigh, max"},
		{AnthropicSettings{Fallbacks: "claude-opus-4-8"}, "fallbacks", "want default (server-side refusal fallbacks, the default) or none"},
		{AnthropicSettings{Sampling: true}, "sampling", "set thinking: none too"},
		{AnthropicSettings{StreamMaxTokens: -1}, "stream_max_tokens", "-1 is negative"},
	}
	var all AnthropicSettings
	for _, tc := range cases {
		_, err := newMessagesWire(Settings{Provider: "anthropic", Anthropic: tc.s})
		var errs SettingErrors
		if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != tc.key || !strings.Contains(errs[0].Msg, tc.want) {
			t.Errorf("%+v: got %v, want %s: …%s…", tc.s, err, tc.key, tc.want)
		}
	}
	all = AnthropicSettings{Thinking: "x", Effort: "x", Fallbacks: "x", Sampling: true, StreamMaxTokens: -5}
	_, err := newMessagesWire(Settings{Provider: "anthropic", Anthropic: all})
	var errs SettingErrors
	if !errors.As(err, &errs) || len(errs) != len(cases) {
		t.Fatalf("all wrong: got %v, want %d problems", err, len(cases))
	}
	for i, se := range errs {
		if se.Key != cases[i].key {
			t.Errorf("problem %d is %q, want %q (in the settings' order)", i, se.Key, cases[i].key)
		}
	}
	if _, err := newMessagesWire(Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Sampling: true, Thinking: ThinkingNone}}); err != nil {
		t.Errorf("sampling with thinking none refused: %v", err)
	}
	if _, err := AnthropicRequest(validCall(), Settings{Provider: "anthropic", Anthropic: AnthropicSettings{Effort: "x"}}, false); err == nil {
		t.Error("AnthropicRequest took a wrong effort")
	}
}

// TestAnthropicRequestOutputSchemaObject checks that an output schema that is not an
// object is refused rather than sent.
func TestAnthropicRequestOutputSchemaObject(t *testing.T) {
	c := validCall()
	c.Controls.OutputSchema = json.RawMessage(`["done"]`)
	for _, structured := range []bool{false, true} {
		_, err := AnthropicRequest(c, Settings{Anthropic: AnthropicSettings{StructuredOutputs: structured}}, false)
		if err == nil || !strings.Contains(err.Error(), "output schema is not a JSON object") {
			t.Errorf("structured_outputs %v: got %v", structured, err)
		}
	}
}

// TestAnthropicResultRecorded reads each recorded response (testdata/anthropic/responses)
// as its expected result: fallbacks, refusal categories, usage iterations, redacted
// thinking, block types the translator does not read.
func TestAnthropicResultRecorded(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "anthropic", "responses", "*.json"))
	if len(files) < 7 {
		t.Fatalf("want the recorded responses, got %d files", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			var c struct {
				Headers  map[string]string `json:"headers"`
				Response json.RawMessage   `json:"response"`
				Result   json.RawMessage   `json:"result"`
			}
			decodeStrict(t, file, &c)
			h := http.Header{}
			for k, v := range c.Headers {
				h.Set(k, v)
			}
			res, err := AnthropicResult(c.Response, h)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(res)
			assertSameJSON(t, "result", got, c.Result)
		})
	}
}

// TestAnthropicDefaultMaxTokens checks the output limits of a request that sets none.
func TestAnthropicDefaultMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		s      Settings
		stream bool
		want   float64
	}{
		{Settings{}, false, DefaultAnthropicMaxTokens},
		{Settings{}, true, DefaultAnthropicStreamMaxTokens},
		{Settings{MaxTokens: 900}, false, 900},
		{Settings{MaxTokens: 900}, true, DefaultAnthropicStreamMaxTokens},
		{Settings{Anthropic: AnthropicSettings{StreamMaxTokens: 700}}, true, 700},
	} {
		body, err := AnthropicRequest(validCall(), tc.s, tc.stream)
		if err != nil {
			t.Fatal(err)
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		if req["max_tokens"] != tc.want {
			t.Errorf("%+v stream %v: max_tokens %v, want %v", tc.s, tc.stream, req["max_tokens"], tc.want)
		}
	}
	if DefaultAnthropicMaxTokens != 16000 || DefaultAnthropicStreamMaxTokens != 64000 {
		t.Errorf("defaults %d / %d, want the reference's 16000 / 64000", DefaultAnthropicMaxTokens, DefaultAnthropicStreamMaxTokens)
	}
}

// anthropicRecordedRequest builds a recorded case's request (wire_test.go) with the
// default Messages settings and the case's max_tokens.
func anthropicRecordedRequest(c *wireCase) ([]byte, error) {
	return AnthropicRequest(&c.Call, Settings{MaxTokens: c.DefaultMaxTokens}, false)
}

func decodeStrict(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
