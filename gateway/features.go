package gateway

//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them for clients is what this file does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// Resources, resource templates and prompts of every upstream are served by the gateway's MCP
// server like its tools (SPEC.md §4): prompts and the names of resources are namespaced like
// tools (<server>__<name>, or bare), resource URIs are kept as the upstream gave them, so that
// links in results stay valid, and resolved to their upstream: by the exact URI listed, then
// by a listed template, then by asking each server that offers resources in config order.

// promptRef is where a public prompt name leads.
type promptRef struct{ server, name string }

// featureIndex is what the MCP server serves besides tools and where each thing leads.
type featureIndex struct {
	resources map[string]string    // URI → server
	templates map[string]string    // URI template → server
	prompts   map[string]promptRef // public name → upstream prompt
	// withheld are the items tool_definition guards keep out, with the refusal for each: by
	// URI, URI template and public prompt name.
	withheldResources map[string]string
	withheldTemplates map[string]string
	withheldPrompts   map[string]string
	// served are the definitions registered with the MCP server, to register only changes.
	servedResources map[string]string
	servedTemplates map[string]string
	servedPrompts   map[string]string
}

func newFeatureIndex() *featureIndex {
	return &featureIndex{
		resources: map[string]string{}, templates: map[string]string{}, prompts: map[string]promptRef{},
		withheldResources: map[string]string{}, withheldTemplates: map[string]string{}, withheldPrompts: map[string]string{},
	}
}

// features is the index in force; syncFeatures replaces it under syncMu.
type features struct {
	mu  sync.RWMutex
	idx *featureIndex
}

func (f *features) get() *featureIndex {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.idx
}

// syncFeatures brings the MCP server's resources, templates and prompts in step with the
// upstreams' (which notifies downstream sessions of changed lists). Called with syncMu held. It
// returns the fatal problems: two servers' prompts with the same bare name. The offers of server
// "force" are registered again even when unchanged.
func (g *Gateway) syncFeatures(cfg *config.Config, force string) []Problem {
	prev := g.features.get()
	next := newFeatureIndex()
	var problems []Problem
	wantResources := map[string]*mcp.Resource{}
	wantTemplates := map[string]*mcp.ResourceTemplate{}
	wantPrompts := map[string]*mcp.Prompt{}
	var withheld []Withheld
	// keep screens one definition with the tool_definition guards; false keeps it out.
	keep := func(kind, server, name, public, nameKey string, collect func(map[string]bool) []defText, refusals map[string]string, key string) bool {
		set := g.guards.ToolDefinition
		if set.Empty() {
			return true
		}
		s := screenTexts(context.Background(), set, server, public, nameKey, collect)
		if g.guardMetrics != nil {
			g.guardMetrics.Observe(guards.StageToolDefinition, s.res)
		}
		if !s.withheld {
			return true
		}
		msg := withheldMessage(kind, server, name, s)
		refusals[key] = msg + "."
		problems = append(problems, Problem{Server: server, Msg: msg})
		withheld = append(withheld, withheldEntry(kind, server, name, s))
		return false
	}
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		u := g.ups.Get(s.Name)
		if u == nil {
			continue
		}
		f := u.Features()
		for _, r := range f.Resources {
			if r == nil || r.URI == "" || !claim(next.resources, r.URI, s.Name, "resource", &problems) {
				continue
			}
			c := *r
			c.Name = PublicName(cfg.Gateway.ToolNames, s.Name, r.Name)
			c.Meta = upstream.CleanMeta(r.Meta)
			if !keep(KindResource, s.Name, r.URI, c.Name, "uri", func(map[string]bool) []defText {
				c.Title, c.Description = r.Title, r.Description
				return resourceTexts("uri", r.URI, r.Name, &c.Title, &c.Description, r.MIMEType)
			}, next.withheldResources, r.URI) {
				delete(next.resources, r.URI)
				continue
			}
			wantResources[r.URI] = &c
		}
		for _, t := range f.Templates {
			if t == nil || t.URITemplate == "" || !claim(next.templates, t.URITemplate, s.Name, "resource template", &problems) {
				continue
			}
			c := *t
			c.Name = PublicName(cfg.Gateway.ToolNames, s.Name, t.Name)
			c.Meta = upstream.CleanMeta(t.Meta)
			if !keep(KindResourceTemplate, s.Name, t.URITemplate, c.Name, "uriTemplate", func(map[string]bool) []defText {
				c.Title, c.Description = t.Title, t.Description
				return resourceTexts("uriTemplate", t.URITemplate, t.Name, &c.Title, &c.Description, t.MIMEType)
			}, next.withheldTemplates, t.URITemplate) {
				delete(next.templates, t.URITemplate)
				continue
			}
			wantTemplates[t.URITemplate] = &c
		}
		for _, p := range f.Prompts {
			if p == nil || p.Name == "" {
				continue
			}
			public := PublicName(cfg.Gateway.ToolNames, s.Name, p.Name)
			if other, dup := next.prompts[public]; dup {
				problems = append(problems, Problem{Server: s.Name, Tool: p.Name, Fatal: true, Msg: fmt.Sprintf(
					"prompt %q is offered by servers %q and %q; with tool_names: bare every name must be unique: rename one upstream prompt or use tool_names: prefixed",
					public, other.server, s.Name)})
				continue
			}
			var c mcp.Prompt
			if !keep(KindPrompt, s.Name, p.Name, public, "name", func(hide map[string]bool) []defText {
				c = *p
				return promptTexts(&c, hide)
			}, next.withheldPrompts, public) {
				continue
			}
			if c.Name == "" {
				c = *p // not screened
			}
			next.prompts[public] = promptRef{server: s.Name, name: p.Name}
			c.Name = public
			c.Meta = upstream.CleanMeta(p.Meta)
			wantPrompts[public] = &c
		}
	}

	promptServer := func(idx *featureIndex) func(string) string {
		return func(name string) string { return idx.prompts[name].server }
	}
	var refused []Problem
	next.servedResources, refused = offer(wantResources, byKey(next.resources), prev.servedResources, byKey(prev.resources), force, "resource",
		func(uri string, r *mcp.Resource) { g.server.AddResource(r, g.readFrom(next.resources[uri])) }, g.server.RemoveResources)
	problems = append(problems, refused...)
	next.servedTemplates, refused = offer(wantTemplates, byKey(next.templates), prev.servedTemplates, byKey(prev.templates), force, "resource template",
		func(tmpl string, t *mcp.ResourceTemplate) {
			g.server.AddResourceTemplate(t, g.readFrom(next.templates[tmpl]))
		}, g.server.RemoveResourceTemplates)
	problems = append(problems, refused...)
	next.servedPrompts, refused = offer(wantPrompts, promptServer(next), prev.servedPrompts, promptServer(prev), force, "prompt",
		func(name string, p *mcp.Prompt) { g.server.AddPrompt(p, g.getPrompt(next.prompts[name])) }, g.server.RemovePrompts)
	problems = append(problems, refused...)
	g.features.mu.Lock()
	g.features.idx = next
	g.features.mu.Unlock()
	g.withheld.setFeatures(withheld)
	return problems
}

// claim gives key (a URI or URI template) to server unless a server before it in config order
// has it; then the conflict is a problem and the first keeps it.
func claim(owners map[string]string, key, server, what string, problems *[]Problem) bool {
	if owner, dup := owners[key]; dup {
		*problems = append(*problems, Problem{Server: server, Msg: fmt.Sprintf(
			"%s %s of server %q is also offered by server %q; reads go to %q", what, key, server, owner, owner)})
		return false
	}
	owners[key] = server
	return true
}

func byKey(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// offer registers with the MCP server each item of want (by key: URI, URI template or public
// name) whose definition or server changed since the definitions in prev were served, or whose
// server is force, and removes the items no longer wanted. It returns the definitions now
// served and the items the SDK refused.
func offer[T any](want map[string]T, server func(string) string, prev map[string]string, prevServer func(string) string,
	force, what string, add func(key string, v T), remove func(keys ...string)) (map[string]string, []Problem) {
	served := make(map[string]string, len(want))
	var problems []Problem
	for key, v := range want {
		b, _ := json.Marshal(v)
		def := string(b)
		served[key] = def
		if prev[key] == def && prevServer(key) == server(key) && (force == "" || server(key) != force) {
			continue
		}
		if err := sdkAdd(func() { add(key, v) }); err != nil {
			problems = append(problems, Problem{Server: server(key), Msg: fmt.Sprintf("%s %s left out: %v", what, key, err)})
			delete(served, key)
		}
	}
	var gone []string
	for key := range prev {
		if _, ok := served[key]; !ok {
			gone = append(gone, key)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
	}
	return served, problems
}

// origin is the downstream side of a request, for the upstream it is forwarded to. The log
// level is the request's own (MCP 2026-07-28) or the one the session set.
func (g *Gateway) origin(ctx context.Context, req mcp.Request) *upstream.Origin {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return g.originFor(ctx, ss, metaOf(req))
}

// originFor is the origin of a request of session ss (nil: none) whose _meta is meta.
func (g *Gateway) originFor(ctx context.Context, ss *mcp.ServerSession, meta map[string]any) *upstream.Origin {
	o := &upstream.Origin{Ctx: ctx, Session: ss}
	g.screenOrigin(o)
	// The capabilities as the request's _meta carries them (MCP 2026-07-28), undecoded: most
	// requests never need them decoded, only passed on; or else the session's.
	if caps, ok := meta[mcp.MetaKeyClientCapabilities]; ok && caps != nil {
		o.Capabilities = caps
	}
	if o.Capabilities == nil && o.Session != nil {
		if init := o.Session.InitializeParams(); init != nil && init.Capabilities != nil {
			o.Capabilities = init.Capabilities
		}
	}
	if level, ok := meta[upstream.MetaKeyLogLevel].(string); ok {
		o.LogLevel = mcp.LoggingLevel(level)
	}
	if o.LogLevel == "" && o.Session != nil {
		o.LogLevel, _ = g.sessions.get(o.Session.ID()).logLevel.Load().(mcp.LoggingLevel)
	}
	return o
}

// metaOf is a request's _meta; nil when it has none (or no params: the SDK's params types
// read their _meta through a pointer that may be nil).
func metaOf(req mcp.Request) (m map[string]any) {
	defer func() {
		if recover() != nil {
			m = nil
		}
	}()
	if p := req.GetParams(); p != nil {
		return p.GetMeta()
	}
	return nil
}

// upstreamError is what the client gets for a forwarded request that failed: the upstream's
// own JSON-RPC error as it sent it (code, message and data), or the gateway's explanation.
func upstreamError(err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code != 0 {
		return rpcErr
	}
	return err
}

// upstreamNamed returns the upstream named name, or an error saying it is gone.
func (g *Gateway) upstreamNamed(name string) (*upstream.Upstream, error) {
	u := g.ups.Get(name)
	if u == nil {
		return nil, fmt.Errorf("server %q is no longer configured (a reload removed it); list again for what the gateway offers now", name)
	}
	return u, nil
}

// readFrom reads resources from server.
func (g *Gateway) readFrom(server string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		if probe, ok := ctx.Value(readProbeKey{}).(*readProbe); ok {
			probe.handled = true
		}
		return g.readResource(ctx, server, req)
	}
}

func (g *Gateway) readResource(ctx context.Context, server string, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	u, err := g.upstreamNamed(server)
	if err != nil {
		return nil, err
	}
	o := g.origin(ctx, req)
	o.InputResponses, o.RequestState = req.Params.InputResponses, req.Params.RequestState
	res, err := u.ReadResource(upstream.WithOrigin(ctx, o), req.Params.URI)
	if err != nil {
		return nil, upstreamError(err)
	}
	g.labelUntrusted(u, req.Session)
	out := &mcp.ReadResourceResult{
		Meta:          upstream.CleanMeta(res.Meta),
		Cacheable:     res.Cacheable,
		Contents:      res.Contents,
		InputRequests: res.InputRequests,
		RequestState:  res.RequestState,
	}
	if err := g.screenResource(ctx, req.Session, server, req.Params.URI, out); err != nil {
		return nil, err
	}
	if out.InputRequests, err = g.screenInputRequests(ctx, req.Session, server, out.InputRequests); err != nil {
		return nil, err
	}
	return out, nil
}

// labelUntrusted labels the session untrusted when what it just received came from an
// untrusted server, as a call to one of its tools does: policies see it (session.labels).
func (g *Gateway) labelUntrusted(u *upstream.Upstream, ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	for _, s := range g.config().Servers { // the config in force: untrusted may change on reload
		if s.Name == u.Name() && s.Untrusted {
			g.sessions.label(ss.ID(), "untrusted")
		}
	}
}

// readProbe tells the resources/read middleware whether one of the gateway's read handlers
// served the request: if none did, the URI matched nothing listed.
type readProbe struct{ handled bool }
type readProbeKey struct{}

// getPrompt gets a prompt from its server.
func (g *Gateway) getPrompt(ref promptRef) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		u, err := g.upstreamNamed(ref.server)
		if err != nil {
			return nil, err
		}
		o := g.origin(ctx, req)
		o.InputResponses, o.RequestState = req.Params.InputResponses, req.Params.RequestState
		res, err := u.GetPrompt(upstream.WithOrigin(ctx, o), ref.name, req.Params.Arguments)
		if err != nil {
			return nil, upstreamError(err)
		}
		g.labelUntrusted(u, req.Session)
		out := &mcp.GetPromptResult{
			Meta:          upstream.CleanMeta(res.Meta),
			Description:   res.Description,
			Messages:      res.Messages,
			InputRequests: res.InputRequests,
			RequestState:  res.RequestState,
		}
		if err := g.screenPrompt(ctx, req.Session, ref.server, req.Params.Name, out); err != nil {
			return nil, err
		}
		if out.InputRequests, err = g.screenInputRequests(ctx, req.Session, ref.server, out.InputRequests); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// complete routes completion/complete by its reference: a prompt by its public name, a
// resource template (or resource) by its URI.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	if p == nil || p.Ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete needs a ref"}
	}
	idx := g.features.get()
	params := *p
	ref := *p.Ref
	params.Ref = &ref
	var server string
	switch ref.Type {
	case "ref/prompt":
		pr, ok := idx.prompts[ref.Name]
		if msg := idx.withheldPrompts[ref.Name]; msg != "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
		}
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no prompt named %q is offered by the gateway; prompts/list gives the names", ref.Name)}
		}
		server, ref.Name = pr.server, pr.name
	case "ref/resource":
		if msg := idx.withheldTemplates[ref.URI]; msg != "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
		}
		var ok bool
		if server, ok = idx.templates[ref.URI]; !ok {
			if server, ok = idx.resources[ref.URI]; !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no resource template %q is offered by the gateway; resources/templates/list gives them", ref.URI)}
			}
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown completion ref type %q; use ref/prompt or ref/resource", ref.Type)}
	}
	u, err := g.upstreamNamed(server)
	if err != nil {
		return nil, err
	}
	res, err := u.Complete(upstream.WithOrigin(ctx, g.origin(ctx, req)), &params)
	if err != nil {
		return nil, upstreamError(err)
	}
	g.labelUntrusted(u, req.Session)
	out := &mcp.CompleteResult{Meta: upstream.CleanMeta(res.Meta), Completion: res.Completion}
	refName := p.Ref.Name
	if p.Ref.Type == "ref/resource" {
		refName = p.Ref.URI
	}
	if err := g.screenCompletion(ctx, req.Session, server, refName, out); err != nil {
		return nil, err
	}
	return out, nil
}

// owner is the server a resource URI belongs to: the one that listed it, or whose template
// matches it. "" when none.
func (g *Gateway) owner(uri string) string {
	idx := g.features.get()
	if s, ok := idx.resources[uri]; ok {
		return s
	}
	for tmpl, s := range idx.templates {
		if templateMatches(tmpl, uri) {
			return s
		}
	}
	return ""
}

// resourceServers are the servers that offer resources, in config order.
func (g *Gateway) resourceServers() []*upstream.Upstream {
	var out []*upstream.Upstream
	for _, s := range g.config().Servers {
		u := g.ups.Get(s.Name)
		if u == nil {
			continue
		}
		if c := u.Features().Capabilities; c != nil && c.Resources != nil {
			out = append(out, u)
		}
	}
	return out
}

// subscriptions are the downstream sessions subscribed to each URI, so that the gateway's
// subscription upstream ends with the last of them: by its unsubscribe, or by its session
// having gone (noticed at the next subscribe or unsubscribe of any session; the SDK forgets a
// gone session's subscriptions without telling). Sessions without an id (stdio, stateless) end
// theirs by unsubscribing only.
type subscriptions struct {
	mu  sync.Mutex
	uri map[string]map[string]bool // URI → session ids
}

// change records that session subscribed (on) or unsubscribed, drops sessions that are gone,
// and returns the URIs nobody is subscribed to any more.
func (s *subscriptions) change(uri, session string, on bool, live map[string]bool) (ended []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uri == nil {
		s.uri = map[string]map[string]bool{}
	}
	if on {
		if s.uri[uri] == nil {
			s.uri[uri] = map[string]bool{}
		}
		s.uri[uri][session] = true
	} else if set := s.uri[uri]; set != nil {
		delete(set, session)
	}
	for u, set := range s.uri {
		for id := range set {
			if id != "" && !live[id] {
				delete(set, id)
			}
		}
		if len(set) == 0 {
			delete(s.uri, u)
			ended = append(ended, u)
		}
	}
	return ended
}

func sessionID(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	return ss.ID()
}

// subscriptionServer is the server a subscription to uri goes to, "" if none.
func (g *Gateway) subscriptionServer(uri string) string {
	if server := g.owner(uri); server != "" {
		return server
	}
	if rs := g.resourceServers(); len(rs) == 1 {
		return rs[0].Name()
	}
	return ""
}

func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	server := g.subscriptionServer(uri)
	if server == "" {
		return &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Data: json.RawMessage(fmt.Sprintf(`{"uri":%q}`, uri)), Message: fmt.Sprintf(
			"no server of the gateway offers %s; resources/list and resources/templates/list show what can be subscribed to", uri)}
	}
	u, err := g.upstreamNamed(server)
	if err != nil {
		return err
	}
	if err := u.Subscribe(upstream.WithOrigin(ctx, g.origin(ctx, req)), uri); err != nil {
		return upstreamError(err)
	}
	g.endSubscriptions(ctx, g.subs.change(uri, sessionID(req.Session), true, g.liveSessions()))
	return nil
}

func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	g.endSubscriptions(ctx, g.subs.change(req.Params.URI, sessionID(req.Session), false, g.liveSessions()))
	return nil
}

// endSubscriptions ends the gateway's subscriptions upstream to uris. A failure is logged: the
// client's unsubscribe has taken effect at the gateway either way.
func (g *Gateway) endSubscriptions(ctx context.Context, uris []string) {
	for _, uri := range uris {
		server := g.subscriptionServer(uri)
		u := g.ups.Get(server)
		if u == nil {
			continue // gone with its subscriptions
		}
		if err := u.Unsubscribe(ctx, uri); err != nil {
			g.log.Warn("ending a resource subscription upstream failed", "server", server, "uri", uri, "error", err.Error())
		}
	}
}

// resourceUpdated passes an upstream's notifications/resources/updated to the downstream
// sessions subscribed to the URI.
func (g *Gateway) resourceUpdated(server string, p *mcp.ResourceUpdatedNotificationParams) {
	if err := g.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: p.URI}); err != nil {
		g.log.Warn("passing a resource update on failed", "server", server, "uri", p.URI, "error", err.Error())
	}
}

// forwardRequests is the receiving middleware for what the SDK does not route by itself:
// logging/setLevel is passed on to every upstream that logs (the session's own level filters
// what reaches it), and resources/read of a URI nothing listed matches is put to the servers
// that offer resources.
func (g *Gateway) forwardRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "logging/setLevel":
			if r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && r.Params != nil {
				if r.Session != nil {
					g.sessions.get(r.Session.ID()).logLevel.Store(r.Params.Level)
				}
				for _, u := range g.ups.All() {
					if err := u.SetLoggingLevel(ctx, r.Params.Level); err != nil {
						g.log.Warn("passing logging/setLevel on failed", "server", u.Name(), "error", err.Error())
					}
				}
			}
		case "prompts/get":
			if r, ok := req.(*mcp.GetPromptRequest); ok && r.Params != nil {
				if msg := g.features.get().withheldPrompts[r.Params.Name]; msg != "" {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
				}
			}
		case "resources/read":
			r, ok := req.(*mcp.ReadResourceRequest)
			if !ok || r.Params == nil {
				break
			}
			if msg := g.withheldRead(r.Params.URI); msg != "" {
				return nil, &jsonrpc.Error{Code: mcp.CodeResourceNotFound, Data: json.RawMessage(fmt.Sprintf(`{"uri":%q}`, r.Params.URI)), Message: msg}
			}
			probe := &readProbe{}
			res, err := next(context.WithValue(ctx, readProbeKey{}, probe), method, req)
			if probe.handled || err == nil {
				return res, err
			}
			return g.readUnlisted(ctx, r, err)
		}
		return next(ctx, method, req)
	}
}

// withheldRead is the refusal for reading uri when tool_definition guards withheld the resource
// listed under it, or the template it matches and no served resource or template matches it;
// "" when the read may go ahead.
func (g *Gateway) withheldRead(uri string) string {
	idx := g.features.get()
	if _, listed := idx.resources[uri]; listed {
		return ""
	}
	if msg := idx.withheldResources[uri]; msg != "" {
		return msg
	}
	for tmpl, msg := range idx.withheldTemplates {
		if !templateMatches(tmpl, uri) {
			continue
		}
		for served := range idx.templates {
			if templateMatches(served, uri) {
				return ""
			}
		}
		return msg
	}
	return ""
}

// readUnlisted reads a URI that no listed resource or template matches: from the only server
// that offers resources, or from the first of several that does not answer "not found".
func (g *Gateway) readUnlisted(ctx context.Context, req *mcp.ReadResourceRequest, notFound error) (mcp.Result, error) {
	servers := g.resourceServers()
	var asked []string
	for _, u := range servers {
		res, err := g.readResource(ctx, u.Name(), req)
		if err == nil {
			return res, nil
		}
		var rpcErr *jsonrpc.Error
		if len(servers) == 1 || !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeResourceNotFound {
			return nil, err
		}
		asked = append(asked, u.Name())
	}
	if len(asked) > 0 {
		g.log.Debug("resource not found on any server", "uri", req.Params.URI, "asked", strings.Join(asked, ", "))
	}
	return nil, notFound
}

// templates caches compiled URI templates.
var templates sync.Map // template string → *uritemplate.Template, or nil if it does not compile

func templateMatches(tmpl, uri string) bool {
	v, ok := templates.Load(tmpl)
	if !ok {
		t, err := uritemplate.New(tmpl)
		if err != nil {
			t = nil
		}
		v, _ = templates.LoadOrStore(tmpl, t)
	}
	t, _ := v.(*uritemplate.Template)
	return t != nil && t.Regexp().MatchString(uri)
}
