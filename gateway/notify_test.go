package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// A webhook that refuses the notification drops nothing: the request stays pending and an
// operator can still approve it.
func TestWebhookRefusedKeepsTheRequest(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got.Store([]any{r.Header.Get("Authorization"), body["tool"], body["rule"], mustJSON(body["args"]), body["session"], body["server"], body["expires"] != nil})
		http.Error(w, "chat service down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	t.Setenv("APPROVAL_HOOK_TOKEN", "Bearer hook-secret")
	n, err := newNotifier(&config.Config{Approvals: config.Approvals{Use: "webhook", Webhook: config.Webhook{URL: srv.URL, HeadersEnv: map[string]string{"Authorization": "APPROVAL_HOOK_TOKEN"}}}}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := governor.NewApprovals(st, st.Audit(), n, 10*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := &governor.Call{Name: "robot__open_drawer", Args: json.RawMessage(`{"pin":"4711","speed":0.2}`), Principal: "planner", Session: "s-9",
		Redact: governor.NewRedactor([]string{"pin"}),
		Tool:   &governor.Tool{Public: "robot__open_drawer", Server: "robot", Upstream: "open_drawer", ServerConfig: &config.Server{Name: "robot"}}}
	done := make(chan governor.Kind)
	go func() { k, _ := a.Request(context.Background(), c, "drawer", "needs a person"); done <- k }()
	var pending []store.Approval
	for deadline := time.Now().Add(5 * time.Second); len(pending) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pending, _ = a.Pending()
	}
	if len(pending) != 1 {
		t.Fatal("the request was dropped when the webhook failed")
	}
	for deadline := time.Now().Add(5 * time.Second); got.Load() == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if v, _ := got.Load().([]any); len(v) != 7 || v[0] != "Bearer hook-secret" || v[1] != "robot__open_drawer" || v[2] != "drawer" ||
		v[3] != `{"pin":"[REDACTED]","speed":0.2}` || v[4] != "s-9" || v[5] != "robot" || v[6] != true {
		t.Fatalf("webhook received %v", got.Load())
	}
	if _, err := a.Decide(context.Background(), pending[0].ID, true, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	if k := <-done; k != "" {
		t.Fatalf("approved call: %s", k)
	}
}

func TestWebhookNeedsItsHeaderVariables(t *testing.T) {
	_, err := newNotifier(&config.Config{Approvals: config.Approvals{Use: "webhook", Webhook: config.Webhook{URL: "http://127.0.0.1:1", HeadersEnv: map[string]string{"Authorization": "NOT_SET_ANYWHERE_42"}}}}, nil, nil)
	if err == nil {
		t.Fatal("a missing header variable must fail start-up")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func testApproval() store.Approval {
	now := time.Now().UTC()
	return store.Approval{ID: "apr-0123", Server: "robot", Tool: "robot__wait", Principal: "agent", Session: "agent-77",
		Rule: "long-wait", Reason: "a person decides on holding the cell", Args: json.RawMessage(`{"timeout_sec":90,"pin":"[REDACTED]"}`),
		Digest: "d", Created: now, Expires: now.Add(5 * time.Minute), State: store.ApprovalPending}
}

// A webhook that does not answer within approvals.webhook.timeout has failed, and the error
// says so without the URL, whose path is often the webhook's secret.
func TestWebhookTimeoutFailsWithoutTheURL(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	n, err := newNotifier(&config.Config{Approvals: config.Approvals{Use: "webhook", Webhook: config.Webhook{URL: srv.URL + "/hooks/T0-zz-secret-path", Timeout: config.Duration(100 * time.Millisecond)}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = n.Notify(context.Background(), testApproval())
	var ne *governor.NotifyError
	if !errors.As(err, &ne) || ne.Channel != "webhook" || !strings.Contains(err.Error(), "did not answer within 100ms (approvals.webhook.timeout)") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "zz-secret-path") {
		t.Errorf("the error holds the webhook's URL: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the POST took %s, past its timeout", took)
	}
}

// The console line carries everything a person needs to decide, whatever the log level.
func TestConsoleLineCarriesTheRequest(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	n, err := newNotifier(&config.Config{Approvals: config.Approvals{Use: "console"}}, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := testApproval()
	if err := n.Notify(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	for _, want := range []string{"APPROVAL NEEDED", "agent (session agent-77)", "robot__wait", "server robot",
		`{\"timeout_sec\":90,\"pin\":\"[REDACTED]\"}`, "rule long-wait: a person decides on holding the cell",
		"mcp-gateway approvals approve apr-0123", a.Expires.Format(time.RFC3339), "approval=apr-0123"} {
		if !strings.Contains(line, want) {
			t.Errorf("console line lacks %s:\n%s", want, line)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestConsoleWriteFailureIsReported(t *testing.T) {
	n, err := newNotifier(&config.Config{Approvals: config.Approvals{Use: "console"}}, slog.New(slog.NewTextHandler(failingWriter{}, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = n.Notify(context.Background(), testApproval())
	var ne *governor.NotifyError
	if !errors.As(err, &ne) || ne.Channel != "console" || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("err = %v", err)
	}
}
