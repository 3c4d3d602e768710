package model

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const testKey = "sk-test-0123456789"

// TestTransportRetries drives the retry path the brief names: 429 with
// Retry-After, then 500, then success; every request is checked for method,
// path, headers and body.
func TestTransportRetries(t *testing.T) {
	t.Setenv("TEST_MODEL_KEY", testKey)
	body := []byte(`{"model":"m","messages":[]}`)
	var (
		mu    sync.Mutex
		times []time.Time
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		got, _ := io.ReadAll(r.Body)
		switch {
		case r.Method != http.MethodPost, r.URL.Path != "/v1/chat/completions":
			t.Errorf("request %d: %s %s, want POST /v1/chat/completions", n, r.Method, r.URL.Path)
		case r.Header.Get("Authorization") != "Bearer "+testKey:
			t.Errorf("request %d: Authorization %q", n, r.Header.Get("Authorization"))
		case r.Header.Get("X-Title") != "mcp-gateway", r.Header.Get("Content-Type") != "application/json":
			t.Errorf("request %d: headers %v", n, r.Header)
		case string(got) != string(body):
			t.Errorf("request %d: body %s", n, got)
		}
		switch n {
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"slow down"}}`)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"message":"boom"}}`)
		default:
			w.Header().Set("x-request-id", "req_ok")
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer srv.Close()

	tr := &Transport{
		BaseURL: srv.URL + "/v1/", Path: "/chat/completions",
		Header:  http.Header{"X-Title": {"mcp-gateway"}},
		KeyEnv:  "TEST_MODEL_KEY",
		Timeout: 5 * time.Second,
		Backoff: func(int) time.Duration { return time.Millisecond },
	}
	resp, header, err := tr.Do(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp) != `{"ok":true}` || header.Get("x-request-id") != "req_ok" {
		t.Fatalf("got %s %v", resp, header)
	}
	if len(times) != 3 {
		t.Fatalf("want 3 requests, got %d", len(times))
	}
	if d := times[1].Sub(times[0]); d < 900*time.Millisecond {
		t.Errorf("Retry-After: 1 not honoured: retried after %v", d)
	}
	if d := times[2].Sub(times[1]); d > 500*time.Millisecond {
		t.Errorf("backoff not used after 500: waited %v", d)
	}
}

// TestTransportErrors checks the failures: each error names the status and
// the provider's message, never the key, and stops where it should.
func TestTransportErrors(t *testing.T) {
	t.Setenv("TEST_MODEL_KEY", testKey)
	cases := []struct {
		name     string
		status   int
		body     string
		attempts int
		want     []string
	}{
		{"bad request not retried", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: empty"}}`, 1, []string{"HTTP 400 Bad Request", "messages: empty"}},
		{"echoed key redacted", 401, `{"error":{"message":"Incorrect API key provided: ` + testKey + `"}}`, 1, []string{"HTTP 401", "[REDACTED]"}},
		{"5xx retried until exhausted", 503, `{"error":"overloaded"}`, 3, []string{"HTTP 503", "overloaded", "after 3 attempts"}},
		{"408 retried", 408, `timeout`, 3, []string{"HTTP 408", "timeout"}},
		{"409 retried", 409, `{"message":"conflict"}`, 3, []string{"HTTP 409", "conflict"}},
		{"425 retried", 425, ``, 3, []string{"HTTP 425"}},
		{"404 not retried", 404, `<html>not found</html>`, 1, []string{"HTTP 404", "not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n++
				if r.Header.Get("x-api-key") != testKey || r.Header.Get("Authorization") != "" || r.URL.Path != "/messages" {
					t.Errorf("want the key in x-api-key only, on /messages; got %s %v", r.URL.Path, r.Header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			tr := &Transport{BaseURL: srv.URL, Path: "/messages", KeyEnv: "TEST_MODEL_KEY", KeyHeader: "x-api-key",
				Backoff: func(int) time.Duration { return time.Millisecond }}
			_, _, err := tr.Do(context.Background(), []byte(`{}`))
			if err == nil {
				t.Fatal("want an error")
			}
			if n != tc.attempts {
				t.Errorf("made %d requests, want %d", n, tc.attempts)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tc.status {
				t.Errorf("want a *StatusError with %d in the chain, got %v", tc.status, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
}

// TestTransportConnectionErrorsRetried checks that a connection that fails
// is retried, and that the final error names the endpoint.
func TestTransportConnectionErrorsRetried(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 1 {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	tr := &Transport{BaseURL: srv.URL, Backoff: func(int) time.Duration { return time.Millisecond }}
	if _, _, err := tr.Do(context.Background(), []byte(`{}`)); err != nil || n != 2 {
		t.Fatalf("got %v after %d requests, want success after 2", err, n)
	}

	srv.Close()
	_, _, err := tr.Do(context.Background(), []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "POST "+srv.URL) || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("want an error naming the endpoint and the attempts, got %v", err)
	}
}

// TestTransportTimeoutAndCancel checks the per-request timeout (retried)
// and that cancelling the context stops a wait at once.
func TestTransportTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer close(release)

	ctx, cancel := context.WithCancel(context.Background())
	tr := &Transport{BaseURL: srv.URL, Timeout: 50 * time.Millisecond, Backoff: func(int) time.Duration { return time.Millisecond }}
	go func() {
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	_, _, err := tr.Do(ctx, []byte(`{}`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancel did not stop the 30s Retry-After wait: took %v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 2 {
		t.Fatalf("want the timed-out request retried once, got %d requests", n)
	}
}

func TestTransportRetryAfterTooLong(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tr := &Transport{BaseURL: srv.URL}
	_, _, err := tr.Do(context.Background(), []byte(`{}`))
	if err == nil || n != 1 || !strings.Contains(err.Error(), "retry after 1h0m0s") {
		t.Fatalf("want one request and an error giving the wait, got %v after %d", err, n)
	}
}

func TestTransportMissingKey(t *testing.T) {
	t.Setenv("TEST_MODEL_KEY", "")
	tr := &Transport{BaseURL: "http://127.0.0.1:1", KeyEnv: "TEST_MODEL_KEY"}
	_, _, err := tr.Do(context.Background(), []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "TEST_MODEL_KEY is not set") {
		t.Fatalf("got %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	cases := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"", 0, false},
		{"2", 2 * time.Second, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
	}
	for _, tc := range cases {
		got, ok := retryAfter(tc.value, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

func TestExponentialBackoff(t *testing.T) {
	for attempt, base := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 20: 30 * time.Second} {
		for range 20 {
			d := ExponentialBackoff(attempt)
			if d < base/2 || d > base {
				t.Fatalf("ExponentialBackoff(%d) = %v, want in [%v, %v]", attempt, d, base/2, base)
			}
		}
	}
}

// TestTransportOnRetry checks that the retry hook fires once, before the
// wait, with the failed attempt and its status, on a 429 then a 200.
func TestTransportOnRetry(t *testing.T) {
	var (
		mu    sync.Mutex
		n     int
		calls []int
		errs  []error
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"slow down"}}`)
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	tr := &Transport{
		BaseURL: srv.URL, Path: "/x",
		OnRetry: func(attempt int, err error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, attempt)
			errs = append(errs, err)
		},
	}
	got, _, err := tr.Do(context.Background(), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"ok":true}` {
		t.Errorf("body %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 2 || len(calls) != 1 || calls[0] != 1 {
		t.Fatalf("%d requests, OnRetry calls %v; want 2 requests and one call for attempt 1", n, calls)
	}
	var status *StatusError
	if !errors.As(errs[0], &status) || status.StatusCode != http.StatusTooManyRequests {
		t.Errorf("OnRetry error %v, want the 429", errs[0])
	}
}
