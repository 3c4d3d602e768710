package model

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// decodeStream feeds a recorded stream to a fresh decoder of w and returns the chunks Event gave
// and the Result.
func decodeStream(t *testing.T, w wireFormat, events []sseEvent, h http.Header) ([]string, *Result, error) {
	t.Helper()
	dec := w.stream()
	if dec == nil {
		t.Fatal("the wire has no stream decoder")
	}
	var chunks []string
	for _, ev := range events {
		chunk, err := dec.Event(ev.name, ev.data)
		if err != nil {
			return chunks, nil, err
		}
		if chunk != "" {
			chunks = append(chunks, chunk)
		}
	}
	res, err := dec.Result(h)
	return chunks, res, err
}

// TestChatStreamRecorded reads each recorded Chat Completions stream in testdata/openai/stream:
// the streamed request asks for the stream and its usage, the stream reads as the recorded
// result, and that result is what the same answer sent whole gives (its chunks aside). A
// refusal, however it is signalled, has neither blocks nor chunks, and its usage counts.
func TestChatStreamRecorded(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "openai", "stream", "*.json"))
	if err != nil || len(files) < 6 {
		t.Fatalf("want at least 6 recorded streams, got %d (%v)", len(files), err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			c := loadCase(t, file)
			w := caseWire(c, newChatWire)
			body, err := w.request(&c.Call, true)
			if err != nil {
				t.Fatal(err)
			}
			assertSameJSON(t, "request", body, c.Request)

			h := http.Header{}
			for k, v := range c.Headers {
				h.Set(k, v)
			}
			delivered, streamed, err := decodeStream(t, w, readSSE(t, strings.TrimSuffix(file, ".json")+".sse"), h)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			got, _ := json.Marshal(streamed)
			assertSameJSON(t, "streamed result", got, c.Result)
			if strings.Join(delivered, "") != strings.Join(streamed.Chunks, "") && !streamed.Refusal {
				t.Errorf("chunks delivered %q, result's chunks %q", delivered, streamed.Chunks)
			}
			if streamed.Refusal && (len(streamed.Blocks) != 0 || streamed.Chunks != nil) {
				t.Errorf("a refusal kept output: %+v", streamed)
			}
			if !streamed.Refusal && strings.Join(streamed.Chunks, "") != streamed.Text() {
				t.Errorf("chunks %q do not make the text %q", streamed.Chunks, streamed.Text())
			}

			whole, err := w.result(c.Response, h)
			if err != nil {
				t.Fatalf("whole response: %v", err)
			}
			same := *streamed
			same.Chunks = nil
			a, _ := json.Marshal(&same)
			b, _ := json.Marshal(whole)
			assertSameJSON(t, "streamed result against the answer sent whole", a, b)
		})
	}
}

// TestChatStreamFailures checks that a stream that cannot be read whole is an error, never a
// partial answer: cut off before its finish reason, an error chunk, a chunk that is not JSON.
func TestChatStreamFailures(t *testing.T) {
	cases := []struct {
		name   string
		events []string
		want   string
	}{
		{"cut off", []string{`{"id":"x","choices":[{"index":0,"delta":{"content":"I will"},"finish_reason":null}]}`}, "ended before the answer finished"},
		{"error chunk", []string{`{"id":"x","choices":[{"index":0,"delta":{"content":"I"}}]}`, `{"error":{"message":"upstream overloaded"}}`}, "upstream overloaded"},
		{"not json", []string{`{"id":`}, "not JSON"},
		{"unknown finish", []string{`{"id":"x","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"paused"}]}`, "[DONE]"}, `unknown finish_reason "paused"`},
	}
	w, err := newChatWire(Settings{Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var events []sseEvent
			for _, e := range tc.events {
				events = append(events, sseEvent{data: []byte(e)})
			}
			_, res, err := decodeStream(t, w, events, http.Header{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %+v, %v; want an error containing %q", res, err, tc.want)
			}
		})
	}
}

// TestChatStreamDecodersAreFresh checks that each answer gets its own decoder: a second stream
// read after a first does not carry the first's text.
func TestChatStreamDecodersAreFresh(t *testing.T) {
	w, err := newChatWire(Settings{Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	events := readSSE(t, filepath.Join("testdata", "openai", "stream", "text.sse"))
	for i := 0; i < 2; i++ {
		_, res, err := decodeStream(t, w, events, http.Header{})
		if err != nil || res.Text() != "The cup is in the drawer." || len(res.Chunks) != 3 {
			t.Fatalf("stream %d: %+v, %v", i+1, res, err)
		}
	}
}
