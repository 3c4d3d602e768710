package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestTransportInjectHeader checks that every attempt of a request carries the trace context of
// the request's context through the InjectHeader hook, replacing a configured header of the
// same name, and that without the hook no trace header is sent.
func TestTransportInjectHeader(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		n := len(got)
		mu.Unlock()
		if n%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "chat")
	defer span.End()
	sc := span.SpanContext()
	want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())

	tr := &Transport{
		BaseURL: srv.URL, Path: "/chat/completions", Backoff: func(int) time.Duration { return 0 },
		Header: http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		InjectHeader: func(ctx context.Context, h http.Header) {
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
		},
	}
	if _, _, err := tr.Do(ctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d attempts, want 2", len(got))
	}
	for i, h := range got {
		if v := h.Values("traceparent"); len(v) != 1 || v[0] != want {
			t.Errorf("attempt %d: traceparent %q, want %q", i+1, v, want)
		}
	}

	got = nil
	tr = &Transport{BaseURL: srv.URL, Backoff: tr.Backoff}
	if _, _, err := tr.Do(ctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for i, h := range got {
		if v := h.Get("traceparent"); v != "" {
			t.Errorf("attempt %d without the hook: traceparent %q", i+1, v)
		}
	}
}

// timeoutError is a net.Error that timed out, as a client's per-request timeout is.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestErrorType(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("model provider openai: POST u: %w", &StatusError{StatusCode: 429, Message: "slow down, sk-secret"}), "429"},
		{fmt.Errorf("POST u: %w", context.Canceled), "cancelled"},
		{fmt.Errorf("POST u: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("POST u: %w", timeoutError{}), "timeout"},
		{errors.New("openai chat response: unexpected end of JSON input"), "_OTHER"},
	}
	for _, c := range cases {
		if got := ErrorType(c.err); got != c.want {
			t.Errorf("ErrorType(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestSettingsRequestModel(t *testing.T) {
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{Provider: "anthropic"}, "claude-opus-5-5"},
		{Settings{Provider: "ollama", Model: "qwen3"}, "qwen3"},
		{Settings{Provider: "scripted"}, ""},
	} {
		if got := c.s.RequestModel(); got != c.want {
			t.Errorf("%+v: RequestModel() = %q, want %q", c.s, got, c.want)
		}
	}
}
