package gateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// watchedServer serves a tool, hold, that waits until its context ends and reports the cause,
// behind the SDK's stateful handler wrapped by a callerWatch.
func watchedServer(t *testing.T) (url string, started chan struct{}, causes chan error) {
	t.Helper()
	var w callerWatch
	started, causes = make(chan struct{}, 1), make(chan error, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "watched", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer w.enter(req, cancel)()
		started <- struct{}{}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(20 * time.Second):
			causes <- nil
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	ts := httptest.NewServer(w.watch(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
	t.Cleanup(ts.Close)
	return ts.URL, started, causes
}

func connectAt(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// The SDK neither cancels the calls of a deleted session (its DELETE waits for them) nor those
// of a POST whose stream closed; callerWatch does, with a cause that says which.
func TestCallerWatchCancelsTheCallsOfAClientThatLeft(t *testing.T) {
	t.Run("session deleted", func(t *testing.T) {
		url, started, causes := watchedServer(t)
		cs := connectAt(t, url, "2025-11-25")
		go func() { _, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "hold"}) }()
		<-started
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		deleted := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			deleted <- err
		}()
		if cause := <-causes; !errors.Is(cause, errSessionDeleted) {
			t.Errorf("the call of a deleted session ended with %v", cause)
		}
		select {
		case err := <-deleted:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the DELETE still waits for the session's call")
		}
	})

	t.Run("stream closed", func(t *testing.T) {
		url, started, causes := watchedServer(t)
		cs := connectAt(t, url, "2025-11-25")
		defer cs.Close()
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hold","arguments":{}}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set(postTokenHeader, "a token of the client's choosing")
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err == nil {
				resp.Body.Close()
			}
		}()
		<-started
		cancel() // the client drops the POST's stream
		if cause := <-causes; !errors.Is(cause, errStreamClosed) {
			t.Errorf("the call of a closed stream ended with %v", cause)
		}
	})
}

// TestCallerWatchEndsEveryCallOfTheSessionAndNoOther joins calls of two sessions, finishes
// some of them (the newest, the oldest and one between of each), and ends one session: each of
// its calls still in flight, and none of the other session's or of those finished, is
// cancelled with errSessionDeleted.
func TestCallerWatchEndsEveryCallOfTheSessionAndNoOther(t *testing.T) {
	var w callerWatch
	type call struct {
		ctx     context.Context
		left    func()
		session string
		done    bool
	}
	var calls []*call
	for i := range 20 {
		session := []string{"a", "b"}[i%2]
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		left := w.join(cancel, nil, session)
		calls = append(calls, &call{ctx: ctx, left: left, session: session})
	}
	for _, i := range []int{0, 1, 18, 19, 8, 9} {
		calls[i].left()
		calls[i].done = true
	}
	w.endSession("a")
	for i, c := range calls {
		deleted := errors.Is(context.Cause(c.ctx), errSessionDeleted)
		if want := c.session == "a" && !c.done; deleted != want {
			t.Errorf("call %d of session %s (finished %v): cancelled for its session's end %v, want %v", i, c.session, c.done, deleted, want)
		}
	}
	for _, c := range calls {
		if !c.done {
			c.left()
		}
	}
	if len(w.sessions) != 0 {
		t.Errorf("%d sessions still listed once every call left", len(w.sessions))
	}
}
