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

// decodeMessagesStream feeds events to a fresh Messages stream decoder (decodeStream) and
// returns its result, the chunks its events returned, and the first error.
func decodeMessagesStream(t *testing.T, events []sseEvent, header http.Header) (*Result, []string, error) {
	t.Helper()
	chunks, res, err := decodeStream(t, &messagesWire{}, events, header)
	return res, chunks, err
}

// TestAnthropicStreamMatchesUnstreamed checks that each recorded stream
// (testdata/anthropic/stream/*.sse) reads as the same Result as the same answer
// unstreamed (*.json), its text deltas returned as chunks and kept in Result.Chunks (after
// a fallback block, only the answer's: the last of the chunks returned).
func TestAnthropicStreamMatchesUnstreamed(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "anthropic", "stream", "*.json"))
	if len(files) < 3 {
		t.Fatalf("want the recorded streams, got %d", len(files))
	}
	header := http.Header{"Request-Id": {"req_stream"}}
	for _, file := range files {
		name := strings.TrimSuffix(file, ".json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			body, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want, err := AnthropicResult(body, header)
			if err != nil {
				t.Fatal(err)
			}
			got, chunks, err := decodeMessagesStream(t, readSSE(t, name+".sse"), header)
			if err != nil {
				t.Fatal(err)
			}
			if len(chunks) == 0 {
				t.Fatal("no text delta came back as a chunk")
			}
			if want.Refusal {
				if got.Chunks != nil {
					t.Errorf("a refusal keeps its chunks %q", got.Chunks)
				}
			} else if n := len(chunks) - len(got.Chunks); n < 0 || !reflect.DeepEqual(got.Chunks, chunks[n:]) || strings.Join(got.Chunks, "") != got.Text() {
				t.Errorf("Result.Chunks %q, want the last of the deltas %q making the text %q", got.Chunks, chunks, got.Text())
			}
			got.Chunks = nil
			// A streamed block has no JSON as received; an unstreamed one keeps it, which
			// Result's JSON leaves out.
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			assertSameJSON(t, "streamed result", g, w)
		})
	}
}

// TestAnthropicStreamRefusal checks that text streamed before a refusal is returned as
// chunks while it arrives (hold_stream withholds them) but the Result is a refusal with
// no blocks and no chunks, its category and tokens kept.
func TestAnthropicStreamRefusal(t *testing.T) {
	res, chunks, err := decodeMessagesStream(t, readSSE(t, filepath.Join("testdata", "anthropic", "stream", "refusal.sse")), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(chunks, "") != "Forcing the drawer open could" {
		t.Errorf("chunks %q", chunks)
	}
	if !res.Refusal || res.FinishReason != FinishRefusal || res.RefusalCategory != "general_harms" ||
		res.RefusalReason != "This request was declined because it could lead to harm." {
		t.Errorf("want a general_harms refusal, got %+v", res)
	}
	if len(res.Blocks) != 0 || res.Chunks != nil || res.Text() != "" {
		t.Errorf("a refusal passes on output: blocks %+v chunks %q", res.Blocks, res.Chunks)
	}
	if res.Usage.InputTokens != 610 || res.Usage.OutputTokens != 7 {
		t.Errorf("usage %+v, want 610 in and 7 out still counted", res.Usage)
	}
}

// TestAnthropicStreamErrors checks that an error event, a stream cut short and events out
// of order are errors, never a partial answer.
func TestAnthropicStreamErrors(t *testing.T) {
	dir := filepath.Join("testdata", "anthropic", "stream")
	_, chunks, err := decodeMessagesStream(t, readSSE(t, filepath.Join(dir, "overloaded.sse")), http.Header{})
	var status *StatusError
	if !errors.As(err, &status) || status.StatusCode != 529 || !status.Retryable() || !strings.Contains(err.Error(), "overloaded_error") || !strings.Contains(err.Error(), "Overloaded") {
		t.Errorf("overloaded: got %v, want a retryable 529 naming overloaded_error", err)
	}
	if len(chunks) != 1 {
		t.Errorf("chunks before the error: %q", chunks)
	}

	full := readSSE(t, filepath.Join(dir, "tool_use.sse"))
	if _, _, err := decodeMessagesStream(t, full[:len(full)-1], http.Header{}); err == nil || !strings.Contains(err.Error(), "before message_stop") {
		t.Errorf("a stream without message_stop: got %v", err)
	}
	if _, _, err := decodeMessagesStream(t, nil, http.Header{}); err == nil || !strings.Contains(err.Error(), "before message_start") {
		t.Errorf("an empty stream: got %v", err)
	}
	cases := map[string][]sseEvent{
		"delta before its block": {full[0], {"content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`)}},
		"block out of order":     {full[0], {"content_block_start", []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)}},
		"delta after its stop": {full[0],
			{"content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)},
			{"content_block_stop", []byte(`{"type":"content_block_stop","index":0}`)},
			{"content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`)}},
		"not json": {{"message_start", []byte(`{`)}},
	}
	for name, events := range cases {
		if _, _, err := decodeMessagesStream(t, events, http.Header{}); err == nil || !strings.Contains(err.Error(), "anthropic stream") {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// TestAnthropicStreamFallbackAnswerOnly checks that the output a model streamed before it
// declined (testdata/anthropic/stream/fallback_declined_part.sse: thinking, text and a
// tool call, then a fallback block, then the fallback's text and tool call) is returned as
// chunks while it arrives but is not the answer: the Result's text, chunks, reasoning and
// tool calls are the fallback's, and the declined blocks are kept opaque, to replay.
func TestAnthropicStreamFallbackAnswerOnly(t *testing.T) {
	res, chunks, err := decodeMessagesStream(t, readSSE(t, filepath.Join("testdata", "anthropic", "stream", "fallback_declined_part.sse")), http.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(chunks, "") != "DECLINEDPART Fallback says hi." {
		t.Errorf("chunks returned %q, want every text delta as it arrived", chunks)
	}
	if res.Text() != "Fallback says hi." || strings.Join(res.Chunks, "") != "Fallback says hi." || res.Reasoning() != "" {
		t.Errorf("text %q chunks %q reasoning %q, want only the fallback's answer", res.Text(), res.Chunks, res.Reasoning())
	}
	calls := res.ToolCalls()
	if len(calls) != 1 || calls[0].ID != "toolu_01ANSW" || string(calls[0].Arguments) != `{"target":"table"}` {
		t.Errorf("tool calls %+v, want only the fallback's", calls)
	}
	if len(res.Blocks) != 6 || res.Blocks[1].Kind != BlockOpaque || res.Blocks[1].Data != `{"type":"text","text":"DECLINEDPART "}` ||
		res.Blocks[2].Data != `{"type":"tool_use","id":"toolu_01DECL","name":"robot__navigate_to","input":{"target":"kitchen"}}` {
		t.Errorf("blocks %+v, want the declined ones opaque, written from the events", res.Blocks)
	}
	for i, b := range res.Blocks {
		if b.Raw != nil {
			t.Errorf("block %d has JSON as received from a stream: %s", i, b.Raw)
		}
	}
	if res.Evidence.Model != "claude-opus-4-8" {
		t.Errorf("answered by %q", res.Evidence.Model)
	}
}
