package gateway

import (
	"context"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/governor"
)

// The client's trace context (issue 18). A tools/call may carry W3C trace context in its
// params._meta (MCP SEP-414: traceparent, tracestate, baggage) and, over HTTP, in the request's
// traceparent, tracestate and baggage headers. The context the gateway hands the chain carries
// it as the remote parent of the call's span (governor.Trace), whichever way the call came: the
// SDK's handler (handleCall, over HTTP or stdio) or the fast path (fastcall.go). With telemetry
// off none of this runs.

// The transports of governor.Call.Transport for calls from clients.
const (
	transportHTTP  = "http"
	transportStdio = "stdio"
)

// requestIDHeader carries the JSON-RPC id of a tools/call from the door (noteRequestIDs) to
// handleCall, through the SDK, which hands a handler the request's header but not the id. It
// is set, and any a client sent removed, only with telemetry on: the id is for the call's span.
const requestIDHeader = "Mcp-Gateway-Request-Id"

// callContext returns ctx with the remote span context and baggage a tools/call carries: its
// params._meta first, then the HTTP request's headers h (nil: none, as over stdio). The _meta
// context wins when both hold one. Absent, malformed or non-string trace context is ignored,
// never an error: the call goes on as the root of a new trace. With telemetry off ctx is
// returned as it is.
func (g *Gateway) callContext(ctx context.Context, meta map[string]any, h http.Header) context.Context {
	p := g.opts.Telemetry
	if p == nil {
		return ctx
	}
	return p.FromHeader(p.FromMeta(ctx, meta), h)
}

// traceSDKCall sets what the span of call c, served by handleCall for req, records of how it
// came, and returns ctx with the client's trace context (callContext). Over HTTP the SDK hands
// the handler the request's header; over stdio it hands none. The JSON-RPC id is known over
// HTTP, where the door noted it (noteRequestIDs); the SDK keeps it to itself over stdio, where
// the span has none.
func (g *Gateway) traceSDKCall(ctx context.Context, req *mcp.CallToolRequest, c *governor.Call) context.Context {
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	c.Transport = transportStdio
	if h != nil {
		c.Transport = transportHTTP
	}
	if g.opts.Telemetry == nil {
		return ctx
	}
	c.RequestID = h.Get(requestIDHeader)
	var meta map[string]any
	if req.Params != nil {
		meta = req.Params.Meta
	}
	return g.callContext(ctx, meta, h)
}

// noteRequestIDs wraps the door's serve hook (fastCalls, nil for none) so that, with telemetry
// on, the JSON-RPC id of a tools/call the fast path leaves to the SDK reaches handleCall
// (requestIDHeader). A batch's requests get none: one header cannot tell them apart.
func (g *Gateway) noteRequestIDs(serve func(http.ResponseWriter, *http.Request, doorMessage) bool) func(http.ResponseWriter, *http.Request, doorMessage) bool {
	if g.opts.Telemetry == nil {
		return serve
	}
	return func(w http.ResponseWriter, r *http.Request, m doorMessage) bool {
		r.Header.Del(requestIDHeader)
		if serve != nil && serve(w, r, m) {
			return true
		}
		if !m.batch && m.method == "tools/call" && m.id.IsValid() {
			r.Header.Set(requestIDHeader, idText(m.id))
		}
		return false
	}
}

// idText is a JSON-RPC id as the span's jsonrpc.request.id: a number as its decimal text, a
// string as it is.
func idText(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return v
	}
	return ""
}
