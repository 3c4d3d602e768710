package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

// initialize opens a session over raw HTTP and returns its status, id and body.
func initialize(t *testing.T, addr string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(initializeBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(body)
}

// TestSessionsAreBounded: a client that opens session after session is refused at
// gateway.max_sessions with a JSON-RPC error naming the setting, and sessions left idle are
// closed after gateway.session_idle_timeout, making room again without a restart.
func TestSessionsAreBounded(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}", max_sessions: 3, session_idle_timeout: 2s}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	startGateway(t, cfg, addr)
	for i := range 3 {
		if code, id, body := initialize(t, addr); code != http.StatusOK || id == "" {
			t.Fatalf("session %d: %d %q", i+1, code, body)
		}
	}
	code, _, body := initialize(t, addr)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "gateway.max_sessions (3)") || !strings.Contains(body, `"code":-32000`) {
		t.Fatalf("a fourth session: %d %s", code, body)
	}
	// Nobody uses the three: after the idle timeout they are closed and a new one is admitted.
	if !pollFor(10*time.Second, func() bool { code, _, _ := initialize(t, addr); return code == http.StatusOK }) {
		t.Fatal("idle sessions were not closed after gateway.session_idle_timeout")
	}
}

// TestStreamsLeaveRoomForCallsAndOperators: GET streams held open take at most half of
// gateway.max_connections; a further stream is refused, and a client's call and /metrics are
// still served.
func TestStreamsLeaveRoomForCallsAndOperators(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}", max_connections: 8, max_sessions: 20}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`)
	startGateway(t, cfg, addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() (int, string) {
		_, id, _ := initialize(t, addr)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req) // a connection of its own
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode, ""
	}
	for i := range 4 {
		if code, body := open(); code != http.StatusOK {
			t.Fatalf("stream %d: %d %s", i+1, code, body)
		}
	}
	code, body := open()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "half of gateway.max_connections") {
		t.Fatalf("a fifth stream: %d %s", code, body)
	}
	getBody(t, "http://"+addr+"/metrics", 200)
	cs := connectHTTP(t, addr, nil)
	if _, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
		t.Fatalf("a call while streams hold half the connections: %v", env)
	}
}
