package governor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// fakeServer is a Dispatcher whose behaviour each test sets.
type fakeServer struct {
	calls int
	do    func(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error)
}

func (f *fakeServer) Call(ctx context.Context, name string, args json.RawMessage, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	f.calls++
	return f.do(ctx, name, args)
}

type catalog map[string]*Tool

func (c catalog) Resolve(name string) (*Tool, bool) { t, ok := c[name]; return t, ok }

func newTestChain(srv *fakeServer, physical bool, contract string) Handler {
	cfg := &config.Server{Name: "arm", Physical: physical, Contract: contract, CallTimeoutSec: 0.05, TimeoutArgumentMarginSec: 0}
	tools := catalog{
		"arm__pick":   {Public: "arm__pick", Server: "arm", Upstream: "pick", Evaluated: true, ServerConfig: cfg, Dispatcher: srv},
		"arm__status": {Public: "arm__status", Server: "arm", Upstream: "status", ServerConfig: cfg, Dispatcher: srv},
		"arm__eval":   {Public: "arm__eval", Server: "arm", Upstream: "eval", Hidden: true, ServerConfig: cfg, Dispatcher: srv},
	}
	return Chain(Dispatch(), Resolve(tools), CheckResult())
}

func ok(obs string) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: text(fmt.Sprintf(`{"success":true,"observation":%q,"run_id":"run-1"}`, obs))}, nil
}

func TestChainOutcomes(t *testing.T) {
	hang := func(ctx context.Context, _ string, _ json.RawMessage) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tests := []struct {
		name      string
		tool      string
		physical  bool
		contract  string
		do        func(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error)
		wantKind  Kind
		wantLabel string
		wantCalls int
		reasonHas string
	}{
		{name: "success", tool: "arm__pick", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("picked") }, wantLabel: OutcomeOK, wantCalls: 1},
		{name: "unknown tool never dispatched", tool: "arm__fly", wantKind: KindUnknownTool, reasonHas: "Unknown tool: arm__fly"},
		{name: "hidden tool never dispatched", tool: "arm__eval", wantKind: KindHiddenTool, reasonHas: "arm__eval"},
		{name: "tool failure", tool: "arm__status", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(`{"success":false,"reason":"camera offline"}`)}, nil
		}, wantLabel: OutcomeToolFailure, wantCalls: 1, reasonHas: "camera offline"},
		{name: "malformed envelope", tool: "arm__status", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(`{"success":"yes"}`)}, nil
		}, wantKind: KindProtocolViolation, wantCalls: 1},
		{name: "evaluated without run id", tool: "arm__pick", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(`{"success":true,"observation":"x"}`)}, nil
		}, wantKind: KindMissingRunID, wantCalls: 1},
		{name: "passthrough forwards anything", tool: "arm__status", contract: config.ContractPassthrough, do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text("plain words")}, nil
		}, wantLabel: OutcomeOK, wantCalls: 1},
		{name: "timeout on physical server", tool: "arm__pick", physical: true, do: hang, wantKind: KindExecutionStatusUnknown, wantCalls: 1, reasonHas: "what the robot did is unknown"},
		{name: "timeout on other server", tool: "arm__status", do: hang, wantKind: KindExecutionStatusUnknown, wantCalls: 1, reasonHas: "deadline"},
		{name: "unavailable", tool: "arm__status", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("arm is restarting: %w", upstream.ErrUnavailable)
		}, wantKind: KindUpstreamUnavailable, wantCalls: 1, reasonHas: "was not sent"},
		{name: "queue full", tool: "arm__pick", physical: true, do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("queue: %w", upstream.ErrQueueFull)
		}, wantKind: KindUpstreamBusy, wantCalls: 1},
		{name: "crash on physical server", tool: "arm__pick", physical: true, do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, &upstream.CallError{Server: "arm", Tool: "pick", Crashed: true, Err: errors.New("EOF")}
		}, wantKind: KindExecutionStatusUnknown, wantCalls: 1, reasonHas: "stopped during the call"},
		{name: "undecodable answer on physical server", tool: "arm__pick", physical: true, do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, &upstream.CallError{Server: "arm", Tool: "pick", Crashed: true, Err: errors.New(`calling "tools/call": unknown content type "foo"`)}
		}, wantKind: KindExecutionStatusUnknown, wantCalls: 1, reasonHas: `answered it with nothing a result can be read from (calling "tools/call": unknown content type "foo")`},
		{name: "crash on other server", tool: "arm__status", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, &upstream.CallError{Server: "arm", Tool: "status", Crashed: true, Err: errors.New("EOF")}
		}, wantKind: KindUpstreamUnavailable, wantCalls: 1, reasonHas: "restarted"},
		{name: "protocol error from upstream", tool: "arm__status", do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, errors.New("invalid params")
		}, wantKind: KindUpstreamError, wantCalls: 1, reasonHas: "invalid params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &fakeServer{do: tt.do}
			h := newTestChain(srv, tt.physical, tt.contract)
			out := h.Handle(context.Background(), &Call{Name: tt.tool, Args: json.RawMessage(`{}`)})
			if out.Kind != tt.wantKind {
				t.Fatalf("kind = %q, want %q (reason %q)", out.Kind, tt.wantKind, out.Reason)
			}
			if tt.wantLabel != "" && out.Label() != tt.wantLabel {
				t.Fatalf("label = %q, want %q", out.Label(), tt.wantLabel)
			}
			if srv.calls != tt.wantCalls {
				t.Fatalf("upstream calls = %d, want %d", srv.calls, tt.wantCalls)
			}
			if tt.reasonHas != "" && !strings.Contains(out.Reason, tt.reasonHas) {
				t.Fatalf("reason %q does not mention %q", out.Reason, tt.reasonHas)
			}
			if out.Kind != "" {
				sc := out.Result.StructuredContent.(map[string]any)
				if !out.Result.IsError || sc["kind"] != string(out.Kind) || sc["success"] != false {
					t.Fatalf("failure result is not a failure envelope: %+v", out.Result)
				}
			}
		})
	}
}

func TestChainCallerCancel(t *testing.T) {
	started := make(chan struct{})
	srv := &fakeServer{do: func(ctx context.Context, _ string, _ json.RawMessage) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	h := newTestChain(srv, true, "")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	out := h.Handle(ctx, &Call{Name: "arm__pick", Args: json.RawMessage(`{}`)})
	if out.Kind != KindCancelled {
		t.Fatalf("kind = %q, want %q", out.Kind, KindCancelled)
	}
}

func TestChainOrder(t *testing.T) {
	var order []string
	step := func(name string) Step {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
				order = append(order, name)
				return next.Handle(ctx, c)
			})
		}
	}
	h := Chain(HandlerFunc(func(context.Context, *Call) *Outcome {
		order = append(order, "final")
		return &Outcome{}
	}), step("a"), step("b"))
	h.Handle(context.Background(), &Call{})
	if got := strings.Join(order, ","); got != "a,b,final" {
		t.Fatalf("order = %s", got)
	}
}
