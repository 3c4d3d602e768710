package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// panicDispatcher panics on a call whose arguments say so, and answers any other.
type panicDispatcher struct{}

func (panicDispatcher) Call(_ context.Context, _ string, args json.RawMessage, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	if strings.Contains(string(args), "panic") {
		panic("the upstream's answer crashed a decoder")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"success":true,"observation":"fine"}`}}}, nil
}

// TestFastPathPanicLeavesNothingRegistered: a call served by the fast path whose chain
// panics (net/http recovers the handler) leaves nothing registered: its session's callerWatch
// list and its fast session's calls are emptied, and the session can use the id again.
func TestFastPathPanicLeavesNothingRegistered(t *testing.T) {
	g, _ := drainGateway(t, false, panicDispatcher{})
	g.syncMu.Lock()
	g.syncServer(g.catalog.Load(), "")
	g.syncMu.Unlock()
	srv := httptest.NewUnstartedServer(g.Handler(nil))
	srv.Config.ErrorLog = nil
	srv.Start()
	t.Cleanup(srv.Close)
	hc := &http.Client{}
	s := openRaw(t, hc, srv.URL+"/mcp")
	served := g.fast.served.Load()
	// The handler panics: net/http recovers it and drops the connection, so the client's
	// request fails; a cancelled context makes post return nil instead of failing the test.
	req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"robot__wait","arguments":{"x":"panic"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", fastVersion)
	req.Header.Set("Mcp-Session-Id", s.id)
	if resp, err := hc.Do(req); err == nil { // net/http drops the connection of a handler that panicked
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if g.fast.served.Load() == served {
		t.Skip("not served by the fast path")
	}
	// The same id again, now a call that answers.
	resp := s.post(t, context.Background(), `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"robot__wait","arguments":{"x":"fine"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `\"success\":true`) {
		t.Errorf("the id of a call that panicked, used again: %s", body)
	}
	registriesEmpty(t, g)
}
