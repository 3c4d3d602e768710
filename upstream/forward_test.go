package upstream

//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them for clients is what this file does.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestOriginsAttribution(t *testing.T) {
	a, b := &mcp.ServerSession{}, &mcp.ServerSession{}
	tests := []struct {
		name    string
		live    []*Origin
		want    int // index into live of the origin expected, or -1
		wantErr string
	}{
		{name: "nothing in flight", wantErr: "no request of a client of the gateway is in flight", want: -1},
		{name: "one request", live: []*Origin{{Session: a}}, want: 0},
		{name: "one session, two requests: the latest", live: []*Origin{{Session: a}, {Session: a}}, want: 1},
		{name: "two sessions", live: []*Origin{{Session: a}, {Session: b}}, wantErr: "requests of 2 different clients", want: -1},
		{name: "the built-in agent", live: []*Origin{nil}, wantErr: "built-in agent", want: -1},
		{name: "agent and a session", live: []*Origin{nil, {Session: a}}, wantErr: "requests of 2 different clients", want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r origins
			for _, o := range tt.live {
				r.add(o)
			}
			got, _, err := r.attribute(false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("attribute() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("attribute() error = %v", err)
			}
			if got != tt.live[tt.want] {
				t.Errorf("attribute() = %p, want live[%d] = %p", got, tt.want, tt.live[tt.want])
			}
		})
	}
}

func TestOriginsRemove(t *testing.T) {
	a, b := &mcp.ServerSession{}, &mcp.ServerSession{}
	r := origins{linger: logLinger}
	doneA := r.add(&Origin{Session: a})
	doneB := r.add(&Origin{Session: b})
	if _, _, err := r.attribute(false); err == nil {
		t.Fatal("two sessions in flight were attributed")
	}
	doneA()
	o, _, err := r.attribute(false)
	if err != nil || o.Session != b {
		t.Fatalf("after the first request ended: attribute() = %v, %v; want session b", o, err)
	}
	// A log message read just before a's response may reach its handler after it: a's request
	// still counts for log messages, so with b in flight the message is ambiguous.
	if _, _, err := r.attribute(true); err == nil {
		t.Fatal("a log message was attributed while a request of a just ended and one of b is in flight")
	}
	doneB()
	if _, _, err := r.attribute(false); !errors.Is(err, errNoRequestInFlight) {
		t.Fatalf("with nothing in flight: error = %v, want errNoRequestInFlight", err)
	}
}

func TestOriginsLogLinger(t *testing.T) {
	a := &mcp.ServerSession{}
	r := origins{linger: logLinger}
	r.add(&Origin{Session: a})()
	o, ended, err := r.attribute(true)
	if err != nil || o.Session != a || !ended {
		t.Fatalf("log right after the request ended: %v %v %v; want session a, ended", o, ended, err)
	}
	if _, _, err := r.attribute(false); !errors.Is(err, errNoRequestInFlight) {
		t.Fatalf("a request right after the request ended: %v; want errNoRequestInFlight", err)
	}
	r.mu.Lock()
	for _, e := range r.live {
		e.ended = e.ended.Add(-2 * logLinger)
	}
	r.mu.Unlock()
	if _, _, err := r.attribute(true); !errors.Is(err, errNoRequestInFlight) {
		t.Fatalf("log long after the request ended: %v; want errNoRequestInFlight", err)
	}
	if len(r.live) != 0 {
		t.Errorf("%d ended requests kept past the linger", len(r.live))
	}
	// Without a linger (stdio, where the gateway waits for the notifications before the call
	// returns) an ended request is gone at once.
	var ordered origins
	ordered.add(&Origin{Session: a})()
	if _, _, err := ordered.attribute(true); !errors.Is(err, errNoRequestInFlight) {
		t.Errorf("log after a stdio request ended: %v; want errNoRequestInFlight", err)
	}
}

func TestForwardErrorCodes(t *testing.T) {
	u := newUpstream(config.Server{Name: "s"}, Options{Logger: slog.New(slog.DiscardHandler)})
	var rpcErr *jsonrpc.Error
	err := u.forwardError("sampling/createMessage", notDeclared("the sampling capability"))
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError ||
		rpcErr.Message != `mcp-gateway could not pass sampling/createMessage from server "s" on to a client: the client did not declare the sampling capability: give the agent's MCP client a handler for it, or use a tool that does not need it` {
		t.Errorf("not declared: %#v", err)
	}
	err = u.forwardError("elicitation/create", errNoRequestInFlight)
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError {
		t.Errorf("no request in flight: %#v", err)
	}
}

func TestOriginMeta(t *testing.T) {
	caps := func(m mcp.Meta) *mcp.ClientCapabilities {
		c, _ := m[mcp.MetaKeyClientCapabilities].(*mcp.ClientCapabilities)
		return c
	}
	var none *Origin
	if c := caps(none.meta()); c == nil || c.Sampling != nil || c.Elicitation != nil {
		t.Errorf("no origin: capabilities %+v, want empty ones (the agent answers nothing)", c)
	}
	declared := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
	o := &Origin{Capabilities: declared, LogLevel: "debug"}
	m := o.meta()
	if caps(m) != declared {
		t.Errorf("capabilities = %+v, want the client's", caps(m))
	}
	if m[MetaKeyLogLevel] != mcp.LoggingLevel("debug") {
		t.Errorf("log level = %v, want debug", m[MetaKeyLogLevel])
	}
	if OriginOf(context.Background()) != nil || OriginOf(WithOrigin(context.Background(), o)) != o {
		t.Error("WithOrigin/OriginOf do not round-trip")
	}
}

func TestCleanMeta(t *testing.T) {
	m := mcp.Meta{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "up"}, "app/x": 1}
	got := CleanMeta(m)
	if len(got) != 1 || got["app/x"] != 1 {
		t.Errorf("CleanMeta = %v, want only app/x", got)
	}
	if CleanMeta(mcp.Meta{"io.modelcontextprotocol/serverInfo": 1}) != nil {
		t.Error("CleanMeta of protocol keys only is not nil")
	}
}

// A call carries the capabilities of the client behind the gateway to a 2026-07-28 server, and
// none for a call without one (the built-in agent): not the gateway's own, which declare the
// sampling and elicitation it passes on.
func TestCallCarriesTheClientsCapabilities(t *testing.T) {
	m, err := startManager(t, []config.Server{stdioServer(t, "tools")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := m.Get("robot")
	if !u.AsksInResults() {
		t.Fatal("the test server does not speak 2026-07-28")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := func(ctx context.Context) map[string]any {
		t.Helper()
		res, err := u.Call(ctx, "caps", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var caps map[string]any
		if err := json.Unmarshal([]byte(resultText(t, res)), &caps); err != nil {
			t.Fatal(err)
		}
		return caps
	}
	if caps := seen(ctx); caps["sampling"] != nil || caps["elicitation"] != nil {
		t.Errorf("without a client: the server saw %v, want no sampling or elicitation", caps)
	}
	withSampling := WithOrigin(ctx, &Origin{Capabilities: map[string]any{"sampling": map[string]any{}}})
	if caps := seen(withSampling); caps["sampling"] == nil || caps["elicitation"] != nil {
		t.Errorf("for a client declaring sampling: the server saw %v", caps)
	}
}
