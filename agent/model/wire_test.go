package model

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// wireCase is one recorded exchange in testdata/<format>/<case>.json: the
// canonical call, the request body it must translate to, a recorded
// response with its headers, and the canonical result it must read as.
type wireCase struct {
	DefaultMaxTokens int    `json:"default_max_tokens"`
	MaxTokensParam   string `json:"max_tokens_param"`
	// BlockEmptyAnswers is the setting of the Chat Completions and Responses wires.
	BlockEmptyAnswers bool              `json:"block_empty_answers"`
	Call              Call              `json:"call"`
	Request           json.RawMessage   `json:"request"`
	Headers           map[string]string `json:"headers"`
	Response          json.RawMessage   `json:"response"`
	Result            json.RawMessage   `json:"result"`
}

// recordedFormat pairs a format's translators for the table of recorded cases.
type recordedFormat struct {
	dir     string
	request func(c *wireCase) ([]byte, error)
	result  func(c *wireCase, body []byte, h http.Header) (*Result, error)
}

var wireFormats = []recordedFormat{
	{"anthropic", anthropicRecordedRequest,
		func(_ *wireCase, body []byte, h http.Header) (*Result, error) { return AnthropicResult(body, h) }},
	{"openai", func(c *wireCase) ([]byte, error) { return caseWire(c, newChatWire).request(&c.Call, false) },
		func(c *wireCase, body []byte, h http.Header) (*Result, error) {
			return caseWire(c, newChatWire).result(body, h)
		}},
	{"responses", func(c *wireCase) ([]byte, error) { return caseWire(c, newResponsesWire).request(&c.Call, false) },
		func(c *wireCase, body []byte, h http.Header) (*Result, error) {
			return caseWire(c, newResponsesWire).result(body, h)
		}},
}

// caseWire builds a wire from the settings a recorded case names; they are valid.
func caseWire(c *wireCase, build func(Settings) (wireFormat, error)) wireFormat {
	w, err := build(Settings{Provider: "openai", MaxTokensParam: c.MaxTokensParam, BlockEmptyAnswers: c.BlockEmptyAnswers})
	if err != nil {
		panic(err)
	}
	return w
}

// TestWireRecorded checks every translator against its recorded payloads:
// the request it builds equals the recorded one as JSON, and the recorded
// response reads as the expected canonical result.
func TestWireRecorded(t *testing.T) {
	for _, f := range wireFormats {
		files, err := filepath.Glob(filepath.Join("testdata", f.dir, "*.json"))
		if err != nil || len(files) < 4 {
			t.Fatalf("%s: want at least 4 recorded cases, got %d (%v)", f.dir, len(files), err)
		}
		for _, file := range files {
			name := f.dir + "/" + strings.TrimSuffix(filepath.Base(file), ".json")
			t.Run(name, func(t *testing.T) {
				c := loadCase(t, file)
				body, err := f.request(c)
				if err != nil {
					t.Fatalf("request: %v", err)
				}
				assertSameJSON(t, "request", body, c.Request)

				h := http.Header{}
				for k, v := range c.Headers {
					h.Set(k, v)
				}
				res, err := f.result(c, c.Response, h)
				if err != nil {
					t.Fatalf("result: %v", err)
				}
				got, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				assertSameJSON(t, "result", got, c.Result)
			})
		}
	}
}

// TestWireToolLoop checks that a turn's result, appended as the assistant
// message with the tool's result, builds the next turn's recorded request:
// the two recorded turns of each format are one consistent loop.
func TestWireToolLoop(t *testing.T) {
	for _, f := range wireFormats {
		t.Run(f.dir, func(t *testing.T) {
			turn1 := loadCase(t, filepath.Join("testdata", f.dir, "tool_turn1.json"))
			turn2 := loadCase(t, filepath.Join("testdata", f.dir, "tool_turn2.json"))
			res, err := f.result(turn1, turn1.Response, http.Header{})
			if err != nil {
				t.Fatal(err)
			}
			calls := res.ToolCalls()
			if len(calls) != 1 || !calls[0].ValidArguments() {
				t.Fatalf("turn 1: want one valid tool call, got %+v", calls)
			}
			next := turn1.Call
			next.Controls = turn2.Call.Controls
			next.Messages = append(append([]Message{}, next.Messages...), res.AssistantMessage(), Message{
				Role:        RoleTool,
				ToolResults: []ToolResult{{CallID: calls[0].ID, Name: calls[0].Name, Content: `{"success":true,"result":{"at":"table"}}`}},
			})
			body, err := f.request(&wireCase{Call: next, DefaultMaxTokens: turn2.DefaultMaxTokens, MaxTokensParam: turn2.MaxTokensParam})
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, "turn 2 request", body, turn2.Request)
		})
	}
}

func loadCase(t *testing.T, file string) *wireCase {
	t.Helper()
	var c wireCase
	decodeStrict(t, file, &c)
	return &c
}

func assertSameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: built JSON does not parse: %v\n%s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: recorded JSON does not parse: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s differs\ngot:  %s\nwant: %s", what, gi, wi)
	}
}
