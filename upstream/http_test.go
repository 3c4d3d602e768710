package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestHTTPUpstreamSendsHeadersFromEnvironment(t *testing.T) {
	checkGoroutines(t)
	t.Setenv("UPSTREAM_TEST_TOKEN", "Bearer secret-123")

	srv := mcp.NewServer(&mcp.Implementation{Name: "test-cloud", Version: "1"}, nil)
	addTestTools(srv)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	m, err := startManager(t, []config.Server{{
		Name:              "cloud",
		URL:               ts.URL,
		HeadersEnv:        map[string]string{"Authorization": "UPSTREAM_TEST_TOKEN"},
		StartupTimeoutSec: 5,
	}}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("cloud")
	if !hasTool(u, "echo") {
		t.Errorf("tools = %v, want echo among them", toolNames(u.Tools()))
	}
	res, err := u.Call(context.Background(), "echo", json.RawMessage(`{"over":"http"}`), nil)
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if got := resultText(t, res); !strings.Contains(got, `"over"`) {
		t.Errorf("echo returned %q", got)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("no request reached the server")
	}
	for i, v := range seen {
		if v != "Bearer secret-123" {
			t.Errorf("request %d carried Authorization %q", i, v)
		}
	}
}

func TestHTTPUpstreamMissingHeaderVariable(t *testing.T) {
	checkGoroutines(t)
	t.Setenv("UPSTREAM_TEST_UNSET", "")
	_, err := startManager(t, []config.Server{{
		Name:              "cloud",
		URL:               "http://127.0.0.1:1/mcp",
		HeadersEnv:        map[string]string{"Authorization": "UPSTREAM_TEST_UNSET"},
		StartupTimeoutSec: 0.5,
	}}, Options{})
	var se *StartError
	if !errors.As(err, &se) {
		t.Fatalf("Start = %v, want a StartError", err)
	}
	if reason := se.NotReady[0].Reason; !strings.Contains(reason, `server "cloud"`) || !strings.Contains(reason, "UPSTREAM_TEST_UNSET") {
		t.Errorf("reason %q does not name the server and the variable", reason)
	}
}

func TestHTTPUpstreamThatGoesAwayIsRestarted(t *testing.T) {
	checkGoroutines(t)
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-cloud", Version: "1"}, nil)
	addTestTools(srv)
	t.Cleanup(func() { // sessions the gateway could not close while the server was away
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	})
	serve := func(ln net.Listener) *httptest.Server {
		ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		_ = ts.Listener.Close()
		ts.Listener = ln
		ts.Start()
		return ts
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first := serve(ln)

	m := newManager(t, []config.Server{{Name: "cloud", URL: "http://" + addr + "/mcp", StartupTimeoutSec: 5, RestartBackoffMaxSec: 0.5}}, Options{})
	u := m.Get("cloud")
	u.pingInterval = 100 * time.Millisecond
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}

	first.CloseClientConnections()
	first.Close()
	eventually(t, 5*time.Second, "the lost server is noticed", func() bool { return u.State() != Ready })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := u.Call(ctx, "echo", nil, nil); !errors.Is(err, ErrUnavailable) {
		t.Errorf("call while the server is away = %v, want ErrUnavailable", err)
	}

	var second *httptest.Server
	eventually(t, 5*time.Second, "the address can be served again", func() bool {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			second = serve(ln)
		}
		return err == nil
	})
	t.Cleanup(second.Close)
	eventually(t, 10*time.Second, "the server is reconnected", func() bool { return u.State() == Ready })
	if u.Restarts() < 1 {
		t.Errorf("Restarts() = %d, want at least 1", u.Restarts())
	}
	if _, err := u.Call(context.Background(), "echo", json.RawMessage(`{}`), nil); err != nil {
		t.Errorf("echo after reconnecting: %v", err)
	}
}

// TestHTTPResultOverTheLimitFailsOnlyItsCall: over streamable HTTP, with JSON responses and with
// SSE, a result over max_result_bytes fails its call with an *OutputError that is not fatal,
// and the next call on the same session is served.
func TestHTTPResultOverTheLimitFailsOnlyItsCall(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		name := "sse"
		if jsonResponse {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			checkGoroutines(t)
			srv := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
			addTestTools(srv)
			srv.AddTool(objectTool("big"), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult(strings.Repeat("x", 200_000)), nil
			})
			ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
			t.Cleanup(ts.Close)
			m, err := startManager(t, []config.Server{{Name: "cloud", URL: ts.URL, StartupTimeoutSec: 5, MaxResultBytes: 100_000}}, Options{})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			u := m.Get("cloud")
			_, err = u.Call(context.Background(), "big", nil, nil)
			var ce *CallError
			var oe *OutputError
			if !errors.As(err, &ce) || ce.Crashed || !errors.As(err, &oe) || oe.Reason != OutputTooLarge || oe.Fatal || oe.Limit != 100_000 || oe.Size < 200_000 {
				t.Fatalf("big: %v (%+v)", err, oe)
			}
			if got := oe.Explain("cloud__big"); !strings.Contains(got, "over its max_result_bytes of 100000") {
				t.Errorf("Explain: %s", got)
			}
			res, err := u.Call(context.Background(), "echo", json.RawMessage(`{"after":"big"}`), nil)
			if err != nil || !strings.Contains(resultText(t, res), "after") {
				t.Fatalf("the call after: %v", err)
			}
			if n := u.OutputErrors()[OutputTooLarge]; n != 1 || u.Restarts() != 0 {
				t.Errorf("too_large counted %d, restarts %d", n, u.Restarts())
			}
		})
	}
}
