package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// A client of MCP 2026-07-28 cannot be sent a request outside a result: a server asks it for
// input by returning input requests and a request state, and the client calls again with its
// answers. An upstream of an older revision sends sampling and elicitation requests in the
// middle of a call instead. For such a client the gateway bridges the two: the call keeps
// running upstream, the upstream's request goes to the client as an input request in an
// "input required" result whose request state names the suspended call, and the client's
// retry hands the answer back to the upstream and waits for the next request or the result.
// The call goes through the governed chain once; its audit record is written when it ends.

const (
	// continuationPrefix marks the request states the gateway issues.
	continuationPrefix = "mcp-gateway/"
	// gatherWindow collects requests the upstream sends together into one round.
	gatherWindow = 20 * time.Millisecond
)

// inputWait is how long a suspended call waits for the client to come back with answers; after
// it, the upstream's requests are refused and the call ends as the upstream decides. A variable
// for tests.
var inputWait = 2 * time.Minute

// suspended is a call whose upstream waits for a client's input.
type suspended struct {
	token     string
	tool      string // the public name called
	principal string
	asks      chan *ask
	done      chan struct{} // closed when out is set
	out       *governor.Outcome
	cancel    context.CancelFunc // cancels the upstream call

	gone chan struct{} // closed when the client did not come back in time

	mu      sync.Mutex
	open    map[string]*ask // asked of the client in the round it has not answered yet
	expired bool            // gone is closed: further asks fail
	timer   *time.Timer
	next    int
}

// ask is one upstream request waiting for the client's answer.
type ask struct {
	id    string
	req   mcp.InputRequest
	reply chan askReply // buffered: the answer never blocks
}

type askReply struct {
	resp mcp.InputResponse
	err  error
}

// Ask is the upstream.Origin hook: it hands req to the client in the next round and returns its
// answer.
func (p *suspended) Ask(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error) {
	p.mu.Lock()
	if p.expired {
		p.mu.Unlock()
		return nil, fmt.Errorf("the client did not come back with answers to the previous input requests within %s", inputWait)
	}
	p.next++
	a := &ask{id: "mcp-gateway-" + strconv.Itoa(p.next), req: req, reply: make(chan askReply, 1)}
	p.mu.Unlock()
	select {
	case p.asks <- a:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, errors.New("the call ended")
	case <-p.gone:
		return nil, fmt.Errorf("the client did not come back with answers to the previous input requests within %s", inputWait)
	}
	select {
	case r := <-a.reply:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// expire ends the wait for the client: its open input requests and any later ones fail.
func (p *suspended) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.expired {
		p.expired = true
		close(p.gone)
	}
	for _, a := range p.open {
		a.reply <- askReply{err: fmt.Errorf("the client did not come back with an answer within %s", inputWait)}
	}
	p.open = nil
}

// continuations are the suspended calls by request state.
type continuations struct {
	mu sync.Mutex
	m  map[string]*suspended
}

func (c *continuations) put(p *suspended) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*suspended{}
	}
	c.m[p.token] = p
}

// take removes and returns the call token names, so that one retry alone resumes it.
func (c *continuations) take(token string) *suspended {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.m[token]
	delete(c.m, token)
	return p
}

func (c *continuations) remove(p *suspended) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[p.token] == p {
		delete(c.m, p.token)
	}
}

// needsBridge reports whether a call needs the bridge: the client takes input only in results
// (MCP 2026-07-28 on) and the tool's server may send requests mid-call (an older revision, or
// not ready yet). Built-in tools and unknown names never ask for anything.
func (g *Gateway) needsBridge(req *mcp.CallToolRequest) bool {
	if req.ProtocolVersion() < "2026-07-28" {
		return false
	}
	t, ok := g.Resolve(req.Params.Name)
	if !ok {
		return false
	}
	u, ok := t.Dispatcher.(*upstream.Upstream)
	return ok && !u.AsksInResults()
}

// callSuspendable runs a governed call whose upstream requests go to the client as input
// requests in results.
func (g *Gateway) callSuspendable(ctx context.Context, c *governor.Call, o *upstream.Origin) (*mcp.CallToolResult, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	p := &suspended{
		token:     continuationPrefix + hex.EncodeToString(b[:]),
		tool:      c.Name,
		principal: c.Principal,
		asks:      make(chan *ask),
		done:      make(chan struct{}),
		gone:      make(chan struct{}),
	}
	o.Ask = p.Ask
	// The call outlives this request when it asks for input: it is cancelled by the client
	// going away before that, or by its own deadline.
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	go func() {
		defer cancel()
		p.out = g.Call(upstream.WithOrigin(callCtx, o), c)
		close(p.done)
	}()
	return g.round(ctx, p)
}

// round waits for the call's outcome or its next requests for input, for one client request.
func (g *Gateway) round(ctx context.Context, p *suspended) (*mcp.CallToolResult, error) {
	select {
	case <-p.done:
		return g.finish(p)
	case a := <-p.asks:
		asked := map[string]*ask{a.id: a}
		gather := time.NewTimer(gatherWindow)
	more:
		for {
			select {
			case b := <-p.asks:
				asked[b.id] = b
			case <-gather.C:
				break more
			}
		}
		reqs := mcp.InputRequestMap{}
		for id, a := range asked {
			reqs[id] = a.req
		}
		p.mu.Lock()
		p.open = asked
		p.timer = time.AfterFunc(inputWait, func() {
			g.conts.remove(p)
			p.expire()
		})
		p.mu.Unlock()
		g.conts.put(p)
		return &mcp.CallToolResult{InputRequests: reqs, RequestState: p.token}, nil
	case <-ctx.Done():
		// The client went away while nothing was asked of it: cancel the call as the gateway
		// cancels any call whose client goes away, and let it end as such.
		p.cancel()
		<-p.done
		return g.finish(p)
	}
}

func (g *Gateway) finish(p *suspended) (*mcp.CallToolResult, error) {
	if p.out.RPCError != nil {
		return nil, p.out.RPCError
	}
	return freshResult(p.out.Result), nil
}

// resume continues a suspended call with the client's answers.
func (g *Gateway) resume(ctx context.Context, req *mcp.CallToolRequest, principal string) (*mcp.CallToolResult, error) {
	token := req.Params.RequestState
	p := g.conts.take(token)
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"requestState %q names no call waiting for input at this gateway: the call ended, the answers came after %s, or the gateway restarted. Call the tool again.", token, inputWait)}
	}
	if p.principal != principal || p.tool != req.Params.Name {
		g.conts.put(p) // not the caller's: the call keeps waiting for its own
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"requestState %q belongs to another call (of %s by another caller); send it with the call that received it", token, p.tool)}
	}
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	open := p.open
	p.open = nil
	p.mu.Unlock()
	var missing []string
	for id, a := range open {
		resp, ok := req.Params.InputResponses[id]
		if !ok || resp == nil {
			missing = append(missing, id)
			a.reply <- askReply{err: fmt.Errorf("the client sent no answer to input request %s", id)}
			continue
		}
		a.reply <- askReply{resp: resp}
	}
	if len(missing) > 0 {
		g.log.Warn("client retried without answering every input request", "tool", p.tool, "missing", strings.Join(missing, ", "))
	}
	return g.round(ctx, p)
}
