package upstream

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
			got, err := r.attribute()
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
	var r origins
	doneA := r.add(&Origin{Session: a})
	doneB := r.add(&Origin{Session: b})
	if _, err := r.attribute(); err == nil {
		t.Fatal("two sessions in flight were attributed")
	}
	doneA()
	o, err := r.attribute()
	if err != nil || o.Session != b {
		t.Fatalf("after the first request ended: attribute() = %v, %v; want session b", o, err)
	}
	doneB()
	if _, err := r.attribute(); !errors.Is(err, errNoRequestInFlight) {
		t.Fatalf("with nothing in flight: error = %v, want errNoRequestInFlight", err)
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
	if m[metaKeyLogLevel] != mcp.LoggingLevel("debug") {
		t.Errorf("log level = %v, want debug", m[metaKeyLogLevel])
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
