package gateway

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// endedSessions records the sessions idleSessions ends.
type endedSessions struct {
	mu  sync.Mutex
	ids []string
}

func (e *endedSessions) end(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ids = append(e.ids, id)
}

func (e *endedSessions) list() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.ids, ",")
}

// TestIdleSessionsEndWithNoRequestInProgress: a session is known from its initialize's answer;
// one with a request in progress (a GET stream held open) is kept however long; one with none
// for the timeout is ended once; ids never issued are not tracked.
func TestIdleSessionsEndWithNoRequestInProgress(t *testing.T) {
	const timeout = 100 * time.Millisecond
	var ended endedSessions
	idle := newIdleSessions(timeout, ended.end)
	release := make(chan struct{})
	h := idle.track(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "":
			w.Header().Set("Mcp-Session-Id", r.URL.Query().Get("id"))
			w.WriteHeader(http.StatusOK)
		case r.Method == http.MethodGet:
			<-release // a stream, held until the test lets it go
		}
	}))
	serve := func(method, id, query string) {
		r := httptest.NewRequest(method, "/mcp"+query, nil)
		if id != "" {
			r.Header.Set("Mcp-Session-Id", id)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	serve("POST", "", "?id=idle")
	serve("POST", "", "?id=listening")
	streamDone := make(chan struct{})
	go func() { serve("GET", "listening", ""); close(streamDone) }()
	serve("POST", "never-issued", "")

	time.Sleep(3 * timeout)
	if got := ended.list(); got != "idle" {
		t.Fatalf("ended %q after the timeout, want the idle session alone", got)
	}
	close(release)
	<-streamDone
	time.Sleep(3 * timeout)
	if got := ended.list(); got != "idle,listening" {
		t.Fatalf("ended %q once the stream closed, want idle,listening", got)
	}
	idle.mu.Lock()
	left := len(idle.m)
	idle.mu.Unlock()
	if left != 0 {
		t.Errorf("%d sessions still tracked after every one ended", left)
	}
}

// TestSDKLogSumsUndeliveredNotifications: the SDK's warning per session a notification could
// not reach becomes one INFO line with their number; its lines of each session's life are
// DEBUG; everything else passes as it came.
func TestSDKLogSumsUndeliveredNotifications(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	out := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
	sdk := sdkLogger(out)
	for range 20 {
		sdk.Warn("calling notifications/tools/list_changed: rejected by transport: write to closed stream")
		sdk.Info("server session disconnected", "session_id", "S")
	}
	sdk.Warn("something else the SDK warns of")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logged(), "not delivered") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := logged()
	if n := strings.Count(got, "\n"); n != 2 {
		t.Errorf("%d lines, want the summary and the other warning:\n%s", n, got)
	}
	for _, want := range []string{"level=INFO", "notification=notifications/tools/list_changed", "undelivered=20", `reason="rejected by transport: write to closed stream"`, "something else the SDK warns of"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "server session disconnected") {
		t.Errorf("a session's life is logged at INFO:\n%s", got)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestIdleSessionTimerCountsFromTheLastRequest: the timer is not re-armed on every request,
// so the session must still live while requests keep coming, however long that lasts, and
// end a timeout after the last one ended; a request in progress when the timer fires keeps
// it, and its end starts the timeout again.
func TestIdleSessionTimerCountsFromTheLastRequest(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var ended endedSessions
	idle := newIdleSessions(timeout, ended.end)
	hold := make(chan struct{})
	h := idle.track(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" {
			w.Header().Set("Mcp-Session-Id", "s")
			w.WriteHeader(http.StatusOK)
		} else if r.URL.Query().Get("hold") != "" {
			<-hold
		}
	}))
	serve := func(query string) {
		r := httptest.NewRequest("POST", "/mcp"+query, nil)
		if query != "?init" {
			r.Header.Set("Mcp-Session-Id", "s")
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	serve("?init")
	for range 12 { // 12 × 100 ms: four timeouts of steady use
		time.Sleep(timeout / 3)
		serve("")
		if got := ended.list(); got != "" {
			t.Fatalf("a session in steady use was ended (%q)", got)
		}
	}
	last := time.Now()
	for ended.list() == "" && time.Since(last) < 10*timeout {
		time.Sleep(5 * time.Millisecond)
	}
	if idleFor := time.Since(last); ended.list() != "s" || idleFor < timeout || idleFor > 3*timeout {
		t.Fatalf("ended %q %v after its last request, want s after about %v", ended.list(), idleFor, timeout)
	}

	// Again, with a request in progress across the timer.
	ended = endedSessions{}
	serve("?init")
	done := make(chan struct{})
	go func() { serve("?hold=1"); close(done) }()
	time.Sleep(3 * timeout)
	if got := ended.list(); got != "" {
		t.Fatalf("a session with a request in progress was ended (%q)", got)
	}
	close(hold)
	<-done
	last = time.Now()
	for ended.list() == "" && time.Since(last) < 10*timeout {
		time.Sleep(5 * time.Millisecond)
	}
	if idleFor := time.Since(last); ended.list() != "s" || idleFor < timeout || idleFor > 3*timeout {
		t.Fatalf("ended %q %v after its request in progress ended, want s after about %v", ended.list(), idleFor, timeout)
	}
}
