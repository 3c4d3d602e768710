package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// upstreamWait stands for the gateway's wait for its upstream: the handler blocks here until
// another goroutine answers, a millisecond later.
//
//go:noinline
func upstreamWait(answer <-chan struct{}) { <-answer }

// TestAnalyzeTraceFindsTheServingGoroutinesWait traces a real net/http server whose handler
// waits a millisecond for another goroutine on every request, and checks that the analysis
// finds the connection's goroutine, counts its calls by that wait and times it.
func TestAnalyzeTraceFindsTheServingGoroutinesWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		answer := make(chan struct{})
		go func() {
			time.Sleep(time.Millisecond)
			close(answer)
		}()
		upstreamWait(answer)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
	defer srv.Close()
	client := srv.Client()
	get := func() {
		resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get() // the connection is open before the trace starts
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	const calls = 25
	for range calls {
		get()
	}
	trace.Stop()

	cp, err := analyzeTrace(&buf, "benchpeers.upstreamWait")
	if err != nil {
		t.Fatal(err)
	}
	if cp.Calls != calls {
		t.Errorf("%d calls counted, want %d", cp.Calls, calls)
	}
	var wait, write *pathRow
	for i, r := range cp.Rows {
		switch {
		case r.What == "waiting in e2e/benchpeers.upstreamWait":
			wait = &cp.Rows[i]
		case strings.HasPrefix(r.What, "system call in net/http.") && write == nil:
			write = &cp.Rows[i]
		}
	}
	var out strings.Builder
	printCriticalPath(&out, "test server", cp, 12)
	if wait == nil || wait.PerCall != 1 || wait.Median < 1000 {
		t.Errorf("the wait for the upstream: %+v, want once per call and at least 1000 µs\n%s", wait, out.String())
	}
	if write == nil {
		t.Errorf("no system call of net/http (the answer's write) on the path\n%s", out.String())
	}
	if cp.PerCall < 1000 {
		t.Errorf("%.0f µs per call, less than the wait alone\n%s", cp.PerCall, out.String())
	}
}

func TestAnalyzeTraceRefusesATraceWithoutAServer(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	trace.Stop()
	if _, err := analyzeTrace(&buf, "benchpeers.upstreamWait"); err == nil || !strings.Contains(err.Error(), "no goroutine serving") {
		t.Errorf("err = %v, want no goroutine serving an HTTP connection", err)
	}
}
