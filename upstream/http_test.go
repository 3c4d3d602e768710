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
