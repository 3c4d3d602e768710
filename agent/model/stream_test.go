package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type event struct{ name, data string }

func readAll(t *testing.T, stream string) ([]event, error) {
	t.Helper()
	var got []event
	err := readEvents(strings.NewReader(stream), func(name string, data []byte) error {
		got = append(got, event{name, string(data)})
		return nil
	})
	return got, err
}

// TestReadEvents checks the server-sent event format: names, data lines joined with "\n",
// comments, ignored fields, CRLF line ends, a byte order mark, an event without data, and a
// last event without its blank line.
func TestReadEvents(t *testing.T) {
	stream := "\xef\xbb\xbf: a comment\n" +
		"event: message_start\ndata: {\"a\":1}\n\n" +
		"data: line one\ndata:line two\ndata\n\n" +
		"id: 7\nretry: 100\n\n" +
		"event: ping\r\ndata: {}\r\n\r\n" +
		"event: lonely\n\n" +
		"data: [DONE]"
	got, err := readAll(t, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := []event{{"message_start", `{"a":1}`}, {"", "line one\nline two\n"}, {"ping", "{}"}, {"", "[DONE]"}}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	_, err = readAll(t, "data: "+strings.Repeat("x", maxEventLine+1)+"\n\n")
	if err == nil || !strings.Contains(err.Error(), "a line is longer than 1048576 bytes") {
		t.Errorf("a line too long: %v", err)
	}
	stop := errors.New("stop")
	err = readEvents(strings.NewReader("data: a\n\ndata: b\n\n"), func(string, []byte) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("the callback's error: %v", err)
	}
}

// streamServer answers fails requests with 503, then streams events, flushing after each;
// before the event at index pause it waits for resume (or 300ms).
type streamServer struct {
	*httptest.Server
	requests atomic.Int32
	accept   atomic.Value
}

func newStreamServer(t *testing.T, fails int, events []event, pause int, resume <-chan struct{}, after func(w http.ResponseWriter)) *streamServer {
	s := &streamServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		s.accept.Store(r.Header.Get("Accept"))
		io.Copy(io.Discard, r.Body)
		if int(n) <= fails {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("x-litellm-response-cost", "0.004")
		for i, e := range events {
			if i == pause {
				select {
				case <-resume:
				case <-time.After(300 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			if e.name != "" {
				fmt.Fprintf(w, "event: %s\n", e.name)
			}
			fmt.Fprintf(w, "data: %s\n\n", e.data)
			w.(http.Flusher).Flush()
		}
		if after != nil {
			after(w)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// TestDoStreamRetriesTheRequestOnly checks that the request is retried as Do retries it until
// the stream starts, and that a stream that breaks is not retried.
func TestDoStreamRetriesTheRequestOnly(t *testing.T) {
	events := []event{{"delta", "a"}, {"delta", "b"}}
	srv := newStreamServer(t, 2, events, -1, nil, nil)
	tr := &Transport{BaseURL: srv.URL, MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }}
	var got []event
	header, err := tr.DoStream(context.Background(), []byte(`{}`), func(name string, data []byte) error {
		got = append(got, event{name, string(data)})
		return nil
	})
	if err != nil || !slices.Equal(got, events) || srv.requests.Load() != 3 || header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("got %v, %v after %d requests", got, err, srv.requests.Load())
	}
	if a := srv.accept.Load(); a != "text/event-stream" {
		t.Errorf("Accept %v", a)
	}

	broken := newStreamServer(t, 0, events[:1], -1, nil, func(http.ResponseWriter) { panic(http.ErrAbortHandler) })
	tr = &Transport{BaseURL: broken.URL, MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }}
	got = nil
	_, err = tr.DoStream(context.Background(), []byte(`{}`), func(name string, data []byte) error {
		got = append(got, event{name, string(data)})
		return nil
	})
	if err == nil || broken.requests.Load() != 1 || !slices.Equal(got, events[:1]) {
		t.Fatalf("a broken stream: %v after %d requests, events %v; want an error after one request", err, broken.requests.Load(), got)
	}
}

// TestDoStreamTimeoutAndCancel checks that the per-request timeout covers the whole stream, and
// that cancelling the context stops a stream at once.
func TestDoStreamTimeoutAndCancel(t *testing.T) {
	never := make(chan struct{})
	defer close(never)
	srv := newStreamServer(t, 0, []event{{"delta", "a"}, {"delta", "b"}}, 1, never, nil)
	tr := &Transport{BaseURL: srv.URL, MaxAttempts: 1, Timeout: 200 * time.Millisecond}
	start := time.Now()
	n := 0
	_, err := tr.DoStream(context.Background(), []byte(`{}`), func(string, []byte) error { n++; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "request timeout of 200ms") || n != 1 {
		t.Fatalf("got %v with %d events, want the timeout after one", err, n)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 900*time.Millisecond {
		t.Errorf("timed out after %s, want 200ms", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	tr = &Transport{BaseURL: srv.URL, MaxAttempts: 3}
	start = time.Now()
	_, err = tr.DoStream(ctx, []byte(`{}`), func(string, []byte) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) || time.Since(start) > 900*time.Millisecond {
		t.Fatalf("got %v after %s, want context.Canceled at once", err, time.Since(start))
	}
}

// fakeWire is a wire format whose stream decoder reads "delta" events as text and an "end"
// event as the finish reason; "refusal" declines.
type fakeWire struct{}

func (fakeWire) request(c *Call, stream bool) ([]byte, error) {
	return json.Marshal(map[string]any{"model": c.Controls.Model, "stream": stream})
}
func (fakeWire) result([]byte, http.Header) (*Result, error) { return nil, errors.New("not streamed") }
func (fakeWire) stream() streamDecoder                       { return &fakeDecoder{} }
func (fakeWire) header() http.Header                         { return nil }

type fakeDecoder struct {
	text   strings.Builder
	finish string
}

func (d *fakeDecoder) Event(name string, data []byte) (string, error) {
	switch name {
	case "delta":
		d.text.Write(data)
		return string(data), nil
	case "end":
		d.finish = string(data)
	case "error":
		return "", errors.New("provider error: " + string(data))
	}
	return "", nil
}

func (d *fakeDecoder) Result(http.Header) (*Result, error) {
	if d.finish == "" {
		return nil, errors.New("the stream ended before the answer")
	}
	res := &Result{FinishReason: FinishReason(d.finish), Usage: Usage{InputTokens: 9, OutputTokens: 3}}
	if d.text.Len() > 0 {
		res.Blocks = []Block{{Kind: BlockText, Text: d.text.String()}}
	}
	if d.finish == string(FinishRefusal) {
		res.Refusal, res.RefusalReason, res.Blocks = true, "declined", nil
	}
	return res, nil
}

func streamModel(url string, hold bool) *httpModel {
	return &httpModel{provider: "fake", model: "m", wire: fakeWire{}, stream: true, holdStream: hold,
		pricer: newPricer(Settings{}, CostFromProvider), transport: &Transport{BaseURL: url, MaxAttempts: 1, Timeout: 5 * time.Second}}
}

// TestGenerateStream checks a streamed answer: chunks reach the callback while the answer is
// still streaming, or with hold_stream only once it has finished; a declined answer's chunks
// never reach it under hold_stream; Result.Chunks holds the text as streamed; the cost header
// and the invocation id apply as for any answer.
func TestGenerateStream(t *testing.T) {
	answer := []event{{"delta", "The cup "}, {"delta", "is "}, {"delta", "away."}, {"end", "stop"}}
	refusal := []event{{"delta", "Sure, "}, {"end", "refusal"}}
	cases := []struct {
		name      string
		events    []event
		hold      bool
		live      bool // the first chunk arrives before the stream has ended
		delivered []string
		chunks    []string
		refusal   bool
	}{
		{"live", answer, false, true, []string{"The cup ", "is ", "away."}, []string{"The cup ", "is ", "away."}, false},
		{"held", answer, true, false, []string{"The cup ", "is ", "away."}, []string{"The cup ", "is ", "away."}, false},
		{"declined, held", refusal, true, false, nil, nil, true},
		{"declined, live", refusal, false, true, []string{"Sure, "}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resume := make(chan struct{})
			var once sync.Once
			var ended atomic.Bool
			srv := newStreamServer(t, 0, tc.events, 1, resume, func(http.ResponseWriter) { ended.Store(true) })
			m := streamModel(srv.URL, tc.hold)
			var mu sync.Mutex
			var delivered []string
			liveFirst := false
			ctx := WithChunks(WithInvocationID(context.Background(), "inv-9"), func(c string) {
				mu.Lock()
				if len(delivered) == 0 {
					liveFirst = !ended.Load()
				}
				delivered = append(delivered, c)
				mu.Unlock()
				once.Do(func() { close(resume) })
			})
			res, err := m.Generate(ctx, validCall())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(delivered, tc.delivered) || !slices.Equal(res.Chunks, tc.chunks) || res.Refusal != tc.refusal {
				t.Errorf("delivered %q, chunks %q, refusal %v; want %q, %q, %v", delivered, res.Chunks, res.Refusal, tc.delivered, tc.chunks, tc.refusal)
			}
			if len(delivered) > 0 && liveFirst != tc.live {
				t.Errorf("first chunk delivered while streaming: %v, want %v", liveFirst, tc.live)
			}
			if res.Usage.CostUSD != 0.004 || res.Usage.CostSource != CostFromHeader || res.Evidence.InvocationID != "inv-9" || res.Usage.InputTokens != 9 {
				t.Errorf("usage %+v, evidence %+v", res.Usage, res.Evidence)
			}
		})
	}

	t.Run("decoder error", func(t *testing.T) {
		srv := newStreamServer(t, 0, []event{{"delta", "a"}, {"error", "overloaded"}}, -1, nil, nil)
		var delivered []string
		ctx := WithChunks(context.Background(), func(c string) { delivered = append(delivered, c) })
		_, err := streamModel(srv.URL, true).Generate(ctx, validCall())
		if err == nil || !strings.Contains(err.Error(), "model provider fake") || !strings.Contains(err.Error(), "provider error: overloaded") || len(delivered) != 0 {
			t.Fatalf("got %v, delivered %q", err, delivered)
		}
	})
	t.Run("stream ends early", func(t *testing.T) {
		srv := newStreamServer(t, 0, []event{{"delta", "a"}}, -1, nil, nil)
		if _, err := streamModel(srv.URL, false).Generate(context.Background(), validCall()); err == nil || !strings.Contains(err.Error(), "ended before the answer") {
			t.Fatalf("got %v", err)
		}
	})
}
