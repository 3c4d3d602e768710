package governor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/guards"
)

// TestUpstreamErrorPassesTheResultGuards: the text of an error a server answered with is the
// server's words, read by the model like a result, so the tool_result guards see it; a key
// assembled by the server never reaches the caller, and a blocked one says the call may have run.
func TestUpstreamErrorPassesTheResultGuards(t *testing.T) {
	const key = "AKIAIOSFODNN7EXAMPLE"
	for _, tc := range []struct {
		action guards.Action
		kind   Kind
		want   string
	}{
		{guards.ActionRedact, KindUpstreamError, "[SECRET]"},
		{guards.ActionBlock, KindGuardBlocked, "may have run"},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			set, err := guards.Build(guards.StageToolResult, []guards.Spec{{ID: "secrets", Use: "secrets.scan", Action: tc.action}})
			if err != nil {
				t.Fatal(err)
			}
			srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
				return nil, &jsonrpc.Error{Code: -32602, Message: "unknown target " + key}
			}}
			cfg := &config.Server{Name: "arm", Contract: config.ContractPassthrough, CallTimeoutSec: 1}
			tools := catalog{"arm__go": {Public: "arm__go", Server: "arm", Upstream: "go", ServerConfig: cfg, Dispatcher: srv}}
			h := Chain(Dispatch(), Resolve(tools), GuardResult(set, &Guarding{}), CheckResult())
			out := h.Handle(context.Background(), &Call{ID: "c", Name: "arm__go", Args: json.RawMessage(`{}`), Start: time.Now()})
			seen := out.Reason + textOf(out.Result)
			if out.RPCError != nil {
				seen += out.RPCError.Message
			}
			if out.Kind != tc.kind || strings.Contains(seen, key) || !strings.Contains(out.Reason, tc.want) {
				t.Fatalf("outcome %+v (rpc %+v)", out, out.RPCError)
			}
		})
	}
}
