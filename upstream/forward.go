package upstream

//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them for clients is what this file does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Origin is the downstream side of a request the gateway forwards to an upstream: where the
// requests (sampling, elicitation) and log messages the upstream sends while serving it go, and
// what the downstream request carried that the upstream must see.
type Origin struct {
	// Ctx is the downstream request's context: on streamable HTTP, what is sent with it travels
	// on that request's stream. It is used only while the request is in flight.
	Ctx context.Context
	// Session is the downstream session; nil when no downstream client can take requests (the
	// built-in agent).
	Session *mcp.ServerSession
	// Capabilities are what the downstream client declared for this request: the session's
	// *mcp.ClientCapabilities, or the value of the request's _meta key for them (MCP
	// 2026-07-28) as it arrived, decoded only when a server asks for something; nil if unknown.
	// They are sent to the upstream in the request's _meta, so that a 2026-07-28 upstream asks
	// only for what the client can do.
	Capabilities any
	// LogLevel is the least severe level of log messages the client wants; "" for none.
	LogLevel mcp.LoggingLevel
	// Ask, when set, takes the requests the server sends for this request instead of Session:
	// a client of MCP 2026-07-28 cannot be sent requests outside a result, so the gateway
	// hands them to it as input requests in one (gateway/suspend.go). It returns the client's
	// answer: an *mcp.CreateMessageWithToolsResult for sampling, an *mcp.ElicitResult for
	// elicitation.
	Ask func(ctx context.Context, req mcp.InputRequest) (mcp.InputResponse, error)
	// InputResponses and RequestState continue a multi-round-trip request (MCP 2026-07-28):
	// the answers to an upstream's input requests and the state it asked to get back.
	InputResponses mcp.InputResponseMap
	RequestState   string
	// Screen, when set, sees each request the server sends for this request (sampling,
	// elicitation) before it goes to the client, and returns the request to send (the gateway's
	// guards may have redacted it), or an error: then the server gets that error back and the
	// client never sees the request.
	Screen func(ctx context.Context, server, method string, req mcp.InputRequest) (mcp.InputRequest, error)
}

type originKey struct{}

// WithOrigin returns a context carrying o; the upstream requests made with it are attributed
// to o for as long as they are in flight.
func WithOrigin(ctx context.Context, o *Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginOf is the origin ctx carries, or nil.
func OriginOf(ctx context.Context) *Origin {
	o, _ := ctx.Value(originKey{}).(*Origin)
	return o
}

// meta is the _meta of a forwarded request: the downstream client's capabilities, so that a
// 2026-07-28 upstream asks only for what the client behind the gateway can do. Without a
// downstream client (the built-in agent) that is nothing.
func (o *Origin) meta() mcp.Meta {
	var caps any = noCapabilities
	if o != nil && o.Capabilities != nil {
		caps = o.Capabilities
	}
	m := mcp.Meta{mcp.MetaKeyClientCapabilities: caps}
	if o != nil && o.LogLevel != "" {
		m[MetaKeyLogLevel] = o.LogLevel
	}
	return m
}

// noCapabilities are the capabilities sent for a client that declared none, or none the
// gateway knows: one value for every such call, so that its encoding is kept (cachedJSON).
// Nothing may change it.
var noCapabilities = &mcp.ClientCapabilities{}

// capabilities decodes the client's capabilities; nil if unknown or not decodable.
func (o *Origin) capabilities() *mcp.ClientCapabilities {
	switch c := o.Capabilities.(type) {
	case nil:
		return nil
	case *mcp.ClientCapabilities:
		return c
	default:
		b, err := json.Marshal(c)
		if err != nil {
			return nil
		}
		var caps mcp.ClientCapabilities
		if json.Unmarshal(b, &caps) != nil {
			return nil
		}
		return &caps
	}
}

// MetaKeyLogLevel carries a request's log level (MCP 2026-07-28, where logging is deprecated
// but still served; the SDK's constant for it is marked deprecated).
const MetaKeyLogLevel = "io.modelcontextprotocol/logLevel"

// origins is the registry of an upstream's requests in flight and their origins: a request the
// server sends, or a message it logs, goes to the downstream session whose request it serves.
// The server does not say which of its requests in flight one belongs to, so it is attributed
// only when every request in flight comes from the same downstream session; otherwise it is
// refused, never guessed.
//
// The SDK completes a call as soon as its response is read, but hands notifications read just
// before it to their handler a moment later. Over stdio the gateway waits for them before the
// call returns (order.go); over HTTP it cannot, so there, for log messages, a request counts as
// in flight for linger after it ended.
type origins struct {
	mu     sync.Mutex
	next   uint64
	live   map[uint64]*entry
	linger time.Duration
}

type entry struct {
	o     *Origin
	ended time.Time // zero while in flight
}

// logLinger is how long after its end a request to an HTTP server still takes the log
// messages of its server.
const logLinger = time.Second

// add records a request in flight; the returned function records its end.
func (r *origins) add(o *Origin) func() {
	if o == nil {
		o = &Origin{} // in flight all the same: it makes attribution ambiguous
	}
	r.mu.Lock()
	if r.live == nil {
		r.live = make(map[uint64]*entry)
	}
	r.next++
	id := r.next
	r.live[id] = &entry{o: o}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.linger <= 0 {
			delete(r.live, id)
		} else if e := r.live[id]; e != nil {
			e.ended = time.Now()
		}
		r.mu.Unlock()
	}
}

var (
	errNoRequestInFlight = errors.New("no request of a client of the gateway is in flight on this server, so there is nobody to ask")
	errNoSession         = errors.New("the request in flight on this server comes from the gateway's built-in agent, which cannot answer it")
)

// attribute returns the origin a request the server sends now belongs to: the most recent
// request in flight when all of them come from one downstream session. For a log message
// (forLog), requests that ended within the linger count too; the origin returned is then marked
// ended when its request is.
func (r *origins) attribute(forLog bool) (o *Origin, ended bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	var last uint64
	var found *entry
	sessions := map[*mcp.ServerSession]bool{}
	for id, e := range r.live {
		if !e.ended.IsZero() {
			if now.Sub(e.ended) > r.linger {
				delete(r.live, id)
				continue
			}
			if !forLog {
				continue
			}
		}
		sessions[e.o.Session] = true
		if id > last {
			last, found = id, e
		}
	}
	switch {
	case len(sessions) == 0:
		return nil, false, errNoRequestInFlight
	case len(sessions) > 1:
		return nil, false, fmt.Errorf("requests of %d different clients of the gateway are in flight on this server, and the server did not say which one this belongs to; the gateway does not guess", len(sessions))
	case found.o.Session == nil:
		return nil, false, errNoSession
	}
	return found.o, !found.ended.IsZero(), nil
}

// forwardError is the error an upstream gets back for a request the gateway could not pass on
// to a downstream client. Always an internal error with the reason: "method not found", what
// a client without the capability would answer itself, makes SDKs replace the message with
// their own, and the reason is what the person reading the server's log needs.
func (u *Upstream) forwardError(method string, err error) error {
	u.log.Warn("request from the server not passed on", "method", method, "reason", err.Error())
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("mcp-gateway could not pass %s from server %q on to a client: %v", method, u.cfg.Name, err)}
}

func notDeclared(what string) error {
	return fmt.Errorf("the client did not declare %s: give the agent's MCP client a handler for it, or use a tool that does not need it", what)
}

// AsksInResults reports whether the server's session speaks MCP 2026-07-28 or later, where a
// server asks the client for input only in results, never with requests of its own mid-call.
// False while the server is not ready: it may start on an older revision.
func (u *Upstream) AsksInResults() bool {
	s := u.ready.Load()
	if s == nil {
		return false
	}
	init := s.cs.InitializeResult()
	return init != nil && init.ProtocolVersion >= "2026-07-28"
}

func (u *Upstream) handleCreateMessage(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	const method = "sampling/createMessage"
	o, _, err := u.origins.attribute(false)
	if err != nil {
		return nil, u.forwardError(method, err)
	}
	if caps := o.capabilities(); caps != nil {
		if caps.Sampling == nil {
			return nil, u.forwardError(method, notDeclared("the sampling capability"))
		}
		if len(req.Params.Tools) > 0 && caps.Sampling.Tools == nil {
			return nil, u.forwardError(method, notDeclared("sampling with tools, and the request offers tools"))
		}
	}
	params := req.Params
	if o.Screen != nil {
		screened, err := o.Screen(ctx, u.cfg.Name, method, params)
		if err != nil {
			return nil, u.forwardError(method, err)
		}
		if p, ok := screened.(*mcp.CreateMessageWithToolsParams); ok {
			params = p
		}
	}
	return passOn(ctx, u, method, o, params, func() (*mcp.CreateMessageWithToolsResult, error) {
		return o.Session.CreateMessageWithTools(o.Ctx, params)
	})
}

// passOn hands an upstream's request to the client of origin o: through o.Ask, as an input
// request in a result, for a client of MCP 2026-07-28; else with direct, as a request on the
// session. A client's answer of the wrong kind is refused.
func passOn[R mcp.InputResponse](ctx context.Context, u *Upstream, method string, o *Origin, req mcp.InputRequest, direct func() (R, error)) (R, error) {
	var res R
	if o.Ask != nil {
		answer, err := o.Ask(ctx, req)
		if err != nil {
			return res, u.forwardError(method, err)
		}
		var ok bool
		if res, ok = answer.(R); !ok {
			return res, u.forwardError(method, fmt.Errorf("the client answered with %T, not the %T %s asks for", answer, res, method))
		}
		return res, nil
	}
	res, err := direct()
	if err != nil {
		return res, u.forwardError(method, err)
	}
	return res, nil
}

func (u *Upstream) handleElicit(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	const method = "elicitation/create"
	o, _, err := u.origins.attribute(false)
	if err != nil {
		return nil, u.forwardError(method, err)
	}
	if caps := o.capabilities(); caps != nil {
		if caps.Elicitation == nil {
			return nil, u.forwardError(method, notDeclared("the elicitation capability"))
		}
		if req.Params.Mode == "url" && caps.Elicitation.URL == nil {
			return nil, u.forwardError(method, notDeclared("URL elicitation, and the request is one"))
		}
	}
	params := req.Params
	if o.Screen != nil {
		screened, err := o.Screen(ctx, u.cfg.Name, method, params)
		if err != nil {
			return nil, u.forwardError(method, err)
		}
		if p, ok := screened.(*mcp.ElicitParams); ok {
			params = p
		}
	}
	if id := params.ElicitationID; id != "" {
		u.elicitations.put(id, o.Session)
	}
	return passOn(ctx, u, method, o, params, func() (*mcp.ElicitResult, error) {
		return o.Session.Elicit(o.Ctx, params)
	})
}

// handleElicitationComplete passes notifications/elicitation/complete to the session the URL
// elicitation went to.
func (u *Upstream) handleElicitationComplete(ctx context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
	ss := u.elicitations.take(req.Params.ElicitationID)
	if ss == nil {
		u.log.Warn("elicitation completion for an unknown elicitation dropped", "elicitation_id", req.Params.ElicitationID)
		return
	}
	if err := ss.NotifyElicitationComplete(context.WithoutCancel(ctx), req.Params); err != nil {
		u.log.Warn("passing elicitation completion on failed", "error", err.Error())
	}
}

// handleLog passes a log message to the session whose request the server is serving; one that
// cannot be attributed goes to the gateway's own log.
func (u *Upstream) handleLog(_ context.Context, req *mcp.LoggingMessageRequest) {
	p := req.Params
	o, ended, err := u.origins.attribute(true)
	if err == nil {
		// The request's level (MCP 2026-07-28), or else the session's own logging/setLevel,
		// filters what the client receives.
		err = o.Session.Log(context.WithoutCancel(o.Ctx), p)
		if err != nil && ended {
			// The request's stream (streamable HTTP) closed with its response: the session's.
			err = o.Session.Log(context.Background(), p)
		}
		if err == nil {
			return
		}
	}
	u.log.Info("upstream log message", "level", string(p.Level), "logger", p.Logger, "data", p.Data, "not_forwarded", err.Error())
}

// elicitationSessions remembers which downstream session a URL elicitation went to, for its
// completion notification. Bounded: the oldest are forgotten first.
type elicitationSessions struct {
	mu    sync.Mutex
	byID  map[string]*mcp.ServerSession
	order []string
}

const maxElicitations = 256

func (e *elicitationSessions) put(id string, ss *mcp.ServerSession) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byID == nil {
		e.byID = make(map[string]*mcp.ServerSession)
	}
	if _, ok := e.byID[id]; !ok {
		e.order = append(e.order, id)
	}
	e.byID[id] = ss
	for len(e.order) > maxElicitations {
		delete(e.byID, e.order[0])
		e.order = e.order[1:]
	}
}

func (e *elicitationSessions) take(id string) *mcp.ServerSession {
	e.mu.Lock()
	defer e.mu.Unlock()
	ss := e.byID[id]
	delete(e.byID, id)
	return ss
}

// Features is what a server offers besides tools, as last listed.
type Features struct {
	Resources []*mcp.Resource
	Templates []*mcp.ResourceTemplate
	Prompts   []*mcp.Prompt
	// Capabilities are the server's, from its initialize (or discover) result.
	Capabilities *mcp.ServerCapabilities
}

// Features returns what the server offers besides tools; the zero value before it started.
func (u *Upstream) Features() Features {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.features
}

// listFeatures lists the resources, resource templates and prompts the server declares. A
// server that fails to list them still serves its tools; the failure is logged.
func (u *Upstream) listFeatures(ctx context.Context, cs *mcp.ClientSession) Features {
	f := Features{}
	if init := cs.InitializeResult(); init != nil {
		f.Capabilities = init.Capabilities
	}
	caps := f.Capabilities
	if caps == nil {
		return f
	}
	if caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				u.log.Warn("listing resources failed; they are not offered", "error", err.Error())
				break
			}
			f.Resources = append(f.Resources, r)
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				u.log.Warn("listing resource templates failed; they are not offered", "error", err.Error())
				break
			}
			f.Templates = append(f.Templates, t)
		}
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				u.log.Warn("listing prompts failed; they are not offered", "error", err.Error())
				break
			}
			f.Prompts = append(f.Prompts, p)
		}
	}
	return f
}

// forward sends one request that is not a tool call to the server, attributed to ctx's origin
// while it is in flight. A transport failure takes the session out of service like a failed
// call does.
func forward[R any](ctx context.Context, u *Upstream, method string, request func(*mcp.ClientSession) (R, error)) (R, error) {
	if o := OriginOf(ctx); o != nil {
		// Without an origin it is the gateway's own request (logging/setLevel, a renewed
		// subscription): nothing the server sends for it goes to a client.
		defer u.origins.add(o)()
	}
	var res R
	s, err := u.send(ctx, "request", func(s *session) (err error) {
		res, err = request(s.cs)
		return err
	})
	switch {
	case err == nil:
		return res, nil
	case s == nil:
		return res, fmt.Errorf("%s: %w", method, err) // not sent
	case transportFailed(err) && ctx.Err() == nil:
		u.connectionFailed(s, err)
	}
	return res, fmt.Errorf("server %q: %s: %w", u.cfg.Name, method, err)
}

// ReadResource reads a resource from the server; the origin's multi-round-trip fields are
// passed on.
func (u *Upstream) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	o := OriginOf(ctx)
	p := &mcp.ReadResourceParams{URI: uri, Meta: o.meta()}
	if o != nil {
		p.InputResponses, p.RequestState = o.InputResponses, o.RequestState
	}
	return forward(ctx, u, "resources/read", func(cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return cs.ReadResource(ctx, p)
	})
}

// GetPrompt gets the server's prompt name.
func (u *Upstream) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	o := OriginOf(ctx)
	p := &mcp.GetPromptParams{Name: name, Arguments: args, Meta: o.meta()}
	if o != nil {
		p.InputResponses, p.RequestState = o.InputResponses, o.RequestState
	}
	return forward(ctx, u, "prompts/get", func(cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, p)
	})
}

// Complete asks the server for completions; params refer to the server's own names.
func (u *Upstream) Complete(ctx context.Context, params *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	p := *params
	p.Meta = OriginOf(ctx).meta()
	return forward(ctx, u, "completion/complete", func(cs *mcp.ClientSession) (*mcp.CompleteResult, error) {
		return cs.Complete(ctx, &p)
	})
}

// Subscribe subscribes the gateway to updates of uri; the subscription is renewed after every
// restart of the server until Unsubscribe.
func (u *Upstream) Subscribe(ctx context.Context, uri string) error {
	u.subsMu.Lock()
	if u.subs == nil {
		u.subs = map[string]bool{}
	}
	u.subs[uri] = true
	u.subsMu.Unlock()
	_, err := forward(ctx, u, "resources/subscribe", func(cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
	return err
}

// Unsubscribe ends the gateway's subscription to uri.
func (u *Upstream) Unsubscribe(ctx context.Context, uri string) error {
	u.subsMu.Lock()
	delete(u.subs, uri)
	u.subsMu.Unlock()
	_, err := forward(ctx, u, "resources/unsubscribe", func(cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
	return err
}

// resubscribe renews the subscriptions on a new session.
func (u *Upstream) resubscribe(ctx context.Context, cs *mcp.ClientSession) {
	u.subsMu.Lock()
	uris := maps.Clone(u.subs)
	u.subsMu.Unlock()
	for uri := range uris {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			u.log.Warn("renewing a resource subscription failed", "uri", uri, "error", err.Error())
		}
	}
}

// SetLoggingLevel passes logging/setLevel on to a server that declares logging.
func (u *Upstream) SetLoggingLevel(ctx context.Context, level mcp.LoggingLevel) error {
	if f := u.Features(); f.Capabilities == nil || f.Capabilities.Logging == nil {
		return nil
	}
	_, err := forward(ctx, u, "logging/setLevel", func(cs *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level})
	})
	return err
}

// CleanMeta is an upstream result's _meta without the protocol's own keys (the upstream's
// server info above all): the gateway answers as itself. nil when nothing is left.
func CleanMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}
