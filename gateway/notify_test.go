package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
		got.Store([]any{r.Header.Get("Authorization"), body["tool"], body["rule"]})
		http.Error(w, "chat service down", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	t.Setenv("APPROVAL_HOOK_TOKEN", "Bearer hook-secret")
	n, err := newNotifier(config.Approvals{Use: "webhook", Webhook: config.Webhook{URL: srv.URL, HeadersEnv: map[string]string{"Authorization": "APPROVAL_HOOK_TOKEN"}}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := governor.NewApprovals(st, st.Audit(), n, 10*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := &governor.Call{Name: "robot__open_drawer", Args: json.RawMessage(`{}`), Principal: "planner",
		Tool: &governor.Tool{Public: "robot__open_drawer", Server: "robot", Upstream: "open_drawer", ServerConfig: &config.Server{Name: "robot"}}}
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
	if v, _ := got.Load().([]any); len(v) != 3 || v[0] != "Bearer hook-secret" || v[1] != "robot__open_drawer" || v[2] != "drawer" {
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
	_, err := newNotifier(config.Approvals{Use: "webhook", Webhook: config.Webhook{URL: "http://127.0.0.1:1", HeadersEnv: map[string]string{"Authorization": "NOT_SET_ANYWHERE_42"}}}, nil)
	if err == nil {
		t.Fatal("a missing header variable must fail start-up")
	}
}
