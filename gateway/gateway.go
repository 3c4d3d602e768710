package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
	idp "github.com/mcp-gateway/mcp-gateway/identity"
	"github.com/mcp-gateway/mcp-gateway/limits"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// Version is the gateway's version, announced to MCP clients; set by the build.
var Version = "dev"

// Options configure a Gateway.
type Options struct {
	Logger *slog.Logger
	// RequireAll makes Start fail when any upstream is not ready within its startup timeout.
	RequireAll bool
	// Store is the state file: lockouts and the audit log. Without it the gateway lists tools
	// but refuses every call, since it could neither honour nor record a lockout.
	Store *store.Store
	// Registry receives the gateway's metrics; nil means none are collected.
	Registry *prometheus.Registry
	// AdminToken guards the /admin API; "" disables it.
	AdminToken string
	// Policies is the compiled rule set (CompilePolicies); nil applies policies.default alone.
	Policies *policies.Engine
	// Guards are the compiled guardrails (BuildGuards); nil means none.
	Guards *GuardSets
	// NoApprover, when set, says that no operator can answer an approval here (nothing serves
	// this gateway's admin API) and how to enable approvals: a call that needs one is refused
	// at once with it rather than left to expire.
	NoApprover string
	// Telemetry exports the spans of calls (telemetry.New); nil is telemetry off, and the chain
	// then has no tracing step at all.
	Telemetry *telemetry.Provider
	// TLS serves the HTTP listener over TLS (LoadTLS); nil is plain HTTP.
	TLS *ListenerTLS
	// ApprovalCallback is the approval channel approvals.use: callback names, for programs that
	// embed the gateway. It is called once per request, after the request is saved and before
	// the call waits, with a context that ends when the request expires. It announces the
	// request (hand it to a person and return) and must not answer it in-line: what it returns
	// decides nothing. An answer goes through DecideApproval (or the admin API, or `mcp-gateway
	// approvals`) from any goroutine, even the callback's, and only the first one claims the
	// request. The call is not released before the callback returns, so it should return soon:
	// one that errors, panics or has not returned when the request expires has failed, which is
	// logged, audited and counted (channel callback), and the request stays pending. New fails
	// when the config names the callback channel and this is nil.
	ApprovalCallback func(ctx context.Context, a store.Approval) error
}

// Gateway is one running gateway: its upstreams, its catalog, its call chain and its MCP server.
type Gateway struct {
	// cfg is the config the gateway started with. The settings of the process (gateway name,
	// listen, state_dir, logging, admin token, auth) come from it alone; everything a reload
	// changes is read from config().
	cfg  *config.Config
	opts Options
	log  *slog.Logger
	ups  *upstream.Manager

	catalog  atomic.Pointer[Catalog]
	counts   atomic.Pointer[map[string]ToolCounts] // what the last rebuild made of each server's tools
	schemas  *schemaCache
	lockouts *lockoutView // under the lockout_scope in force
	// limiter holds the limits in force (config limits). New and Reload set it, under
	// reloadMu, before they build the chain that holds it.
	limiter      *limits.Limiter
	limitMetrics *limits.Metrics
	approvals    *governor.Approvals
	notifier     *liveNotifier // the approval channel in force
	sessions     *sessions
	inFlight     *inFlight
	shutdown     shutdown    // refuses new calls and cancels late ones at shutdown (shutdown.go)
	callers      callerWatch // cancels the calls of an HTTP client that left (callerwatch.go)
	fast         fastPath    // tools/call from HTTP clients served without the SDK (fastcall.go)

	guards       *GuardSets // in force; read and replaced under syncMu
	guardMetrics *guards.Metrics
	metrics      chainMetrics
	opMetrics    *operatorMetrics           // halts and operator lockouts; nil without a registry
	live         atomic.Pointer[generation] // the config in force and its chain; Reload swaps both
	reloadMu     sync.Mutex                 // one reload at a time
	server       *mcp.Server
	builtin      builtins      // the tools registered with RegisterTool (builtin.go)
	features     features      // resources, templates and prompts served (features.go)
	conts        continuations // calls waiting for a client's input (suspend.go)
	withheld     withheldItems // what tool_definition guards keep out (screen.go)
	subs         subscriptions // downstream resource subscriptions
	console      http.Handler  // the operator console at /console, when mounted (console.go)
	oidc         *idp.Verifier // the identity provider's tokens (auth.oidc); nil without

	syncMu sync.Mutex                 // serialises catalog rebuilds and the server's tool list
	served map[string]json.RawMessage // public name → definition registered with server
	// servedNames are the keys of served, for readers that must not wait for syncMu.
	servedNames atomic.Pointer[map[string]bool]

	callPrefix string
	callSeq    atomic.Uint64

	recent *limits.Recent // the recent calls policies see as rate; kept across reloads
}

// New builds a gateway for cfg. Nothing starts until Start. It fails when the config's policies
// or approval channel cannot be set up.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, opts: opts, log: logger, served: make(map[string]json.RawMessage), schemas: newSchemaCache()}
	var b [4]byte
	_, _ = rand.Read(b[:])
	g.callPrefix = hex.EncodeToString(b[:]) + "-"
	g.catalog.Store(&Catalog{byName: map[string]*governor.Tool{}})
	g.features.idx = newFeatureIndex()
	var names []string
	for _, s := range cfg.Servers {
		names = append(names, s.Name)
	}
	g.inFlight = newInFlight(names)
	g.recent = limits.NewRecent(nil)
	g.guards = opts.Guards
	if g.guards == nil {
		g.guards = &GuardSets{}
	}
	if opts.Registry != nil {
		// Once: every chain a reload builds counts into the same collectors.
		g.guardMetrics = guards.NewMetrics(opts.Registry)
		g.metrics = chainMetrics{calls: governor.NewMetrics(opts.Registry), policies: governor.NewPolicyMetrics(opts.Registry)}
		g.limitMetrics = limits.NewMetrics(opts.Registry)
		if cfg.Auth.OIDC != nil {
			g.metrics.calls.BoundPrincipals(reservedPrincipals(cfg), oidcPrincipalLabel)
		}
	}
	var err error
	if g.oidc, err = newVerifier(cfg, logger); err != nil {
		return nil, err
	}
	g.sessions = newSessions(g.liveSessions)
	g.fast.g = g
	g.fast.on = cfg.Gateway.FastPathOn() && cfg.Gateway.HTTPMode != config.HTTPModeStateless
	engine := opts.Policies
	if engine == nil {
		var err error
		if engine, err = policies.Compile(nil, policies.Options{Default: cfg.Policies.Default}); err != nil {
			return nil, err
		}
	}
	if opts.Store != nil {
		notifier, err := newNotifier(cfg, logger, opts.ApprovalCallback)
		if err != nil {
			return nil, err
		}
		g.notifier = newLiveNotifier(notifier)
		g.approvals = governor.NewApprovals(opts.Store, opts.Store.Audit(), g.notifier, time.Duration(cfg.Approvals.Timeout), logger)
		if opts.Registry != nil {
			g.approvals.RegisterMetrics(opts.Registry)
		}
		if opts.NoApprover != "" {
			g.approvals.Unanswerable(opts.NoApprover)
		}
	}

	upOpts := upstream.Options{
		Logger:            logger,
		OnToolsChanged:    func(server string) { g.refreshFrom(server) },
		OnResourceUpdated: g.resourceUpdated,
		Version:           Version,
		FastPath:          cfg.Gateway.FastPathOn(),
		Telemetry:         g.opts.Telemetry,
	}
	var lockouts *governor.Lockouts
	if opts.Store != nil {
		lockouts = governor.NewLockouts(opts.Store, cfg.Gateway.LockoutScope)
		g.lockouts = newLockoutView(lockouts)
		upOpts.Admit = g.lockouts.admit(g.physical)
	}
	g.ups = upstream.NewManager(cfg.Servers, upOpts)
	g.limiter = limits.New(cfg.Limits, limits.Options{Metrics: g.limitMetrics})
	g.live.Store(&generation{cfg: cfg, chain: g.buildChain(cfg, engine, g.guards, lockouts), guards: g.guards})
	if opts.Registry != nil {
		registerGatewayMetrics(opts.Registry, g)
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: cfg.Gateway.Name, Title: "mcp-gateway", Version: Version},
		&mcp.ServerOptions{
			// Undelivered notifications are summed, not logged per session (sessionlimits.go).
			Logger: sdkLogger(logger),
			// Everything the upstreams may offer, whether or not one does yet: they come and go.
			Capabilities: &mcp.ServerCapabilities{
				Tools:       &mcp.ToolCapabilities{ListChanged: true},
				Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
				Prompts:     &mcp.PromptCapabilities{ListChanged: true},
				Completions: &mcp.CompletionCapabilities{},
				//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28 on, still served and carried.
				Logging: &mcp.LoggingCapabilities{},
			},
			CompletionHandler:  g.complete,
			SubscribeHandler:   g.subscribe,
			UnsubscribeHandler: g.unsubscribe,
		})
	g.server.AddReceivingMiddleware(g.fast.sessions, g.unlistedCalls, g.forwardRequests)
	return g, nil
}

// liveSessions is the ids of the downstream sessions still connected.
func (g *Gateway) liveSessions() map[string]bool {
	live := map[string]bool{}
	for ss := range g.server.Sessions() {
		live[ss.ID()] = true
	}
	return live
}

// chainMetrics are the chain's collectors, registered once by New and shared by every chain.
// Both are nil without a registry.
type chainMetrics struct {
	calls    *governor.Metrics
	policies *governor.PolicyMetrics
}

// buildChain composes the governed call chain of SPEC.md §6 for cfg, at start and at every
// reload. Outermost first: metrics and audit see every call and its final outcome; the lockout
// is committed right around dispatch, before the failure travels back out.
func (g *Gateway) buildChain(cfg *config.Config, engine *policies.Engine, sets *GuardSets, lockouts *governor.Lockouts) governor.Handler {
	st := g.opts.Store
	if st == nil {
		return governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
			return governor.Refuse(governor.KindUpstreamUnavailable,
				"this gateway instance runs without its state file and does not serve tool calls; use `mcp-gateway serve`")
		})
	}
	var steps []governor.Step
	if g.opts.Telemetry != nil {
		// Outermost: the metrics' exemplars, the audit record and the log line read its span.
		steps = append(steps, governor.Trace(g.opts.Telemetry))
	}
	if g.metrics.calls != nil {
		steps = append(steps, g.metrics.calls.Observe())
	}
	// What the audit keeps and every reason pass the tool_call guards too: nothing they remove
	// is written anywhere (withhold.go).
	redact := governor.NewAuditRedactor(cfg.Audit).WithGuards(sets.ToolCall)
	guarding := &governor.Guarding{
		Approvals: g.approvals,
		Metrics:   g.guardMetrics,
		Label:     func(c *governor.Call, label string) { g.sessions.label(c.Session, label) },
	}
	steps = append(steps,
		governor.Audit(st, redact, g.log),
		governor.Log(g.log),
		governor.ScrubReasons(redact),
		governor.Resolve(g),
		governor.CheckStore(st.Available),
		governor.CheckLockout(lockouts),
		// Right after the lockout: a call over a limit costs almost nothing and reaches
		// neither validation, guards, policies nor its server.
		governor.Limit(g.limiter),
		g.inFlight.admitStep(),
		governor.Validate(redact),
		governor.GuardCall(sets.ToolCall, guarding),
		governor.Policy(engine, g.policyInput, g.approvals, g.metrics.policies, g.log),
		// Again after the policy step: an approval can wait minutes, and the disk may have
		// failed meanwhile.
		governor.CheckStore(st.Available),
		g.inFlight.step(),
		governor.GuardResult(sets.ToolResult, guarding),
		governor.CheckResult(),
		governor.LockOnUnknown(st, st.Audit(), g.log),
	)
	return governor.Chain(governor.Dispatch(), steps...)
}

// Start starts every upstream concurrently and builds the catalog. It fails when two servers
// expose the same tool under bare naming, and, with RequireAll, when an upstream did not start.
// Otherwise servers that did not start are logged and retried in the background.
func (g *Gateway) Start(ctx context.Context) error {
	g.startVerifier(ctx)
	if st := g.opts.Store; st != nil {
		if problems := lockoutConflicts(st.Lockouts(), g.cfg, ""); len(problems) > 0 {
			return fmt.Errorf("no server was started: %s", strings.Join(problems, "\n"))
		}
		g.extendHalt(g.cfg)
	}
	if g.opts.RequireAll {
		// A command that does not exist will not appear while the startup timeout runs out:
		// fail now, naming it, instead of retrying it.
		var missing []string
		for _, s := range g.cfg.Servers {
			if err := upstream.CheckCommand(s); err != nil {
				missing = append(missing, fmt.Sprintf("%s:%d: %v", g.cfg.Path, s.CommandLine, err))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("--require-all: no server was started, because %s", strings.Join(missing, "; "))
		}
	}
	if err := g.ups.Start(ctx); err != nil {
		if g.opts.RequireAll {
			return err
		}
		g.log.Warn("not every upstream is ready; serving the others and retrying in the background", "error", err)
	}
	if fatal := g.refresh(); len(fatal) > 0 {
		msgs := make([]string, len(fatal))
		for i, p := range fatal {
			msgs[i] = p.Msg
		}
		return errors.New(strings.Join(msgs, "\n"))
	}
	return nil
}

// Close stops every upstream and waits for their processes.
func (g *Gateway) Close() error {
	if g.oidc != nil {
		g.oidc.Close()
	}
	return g.ups.Close()
}

// Upstreams is the gateway's upstream manager, for status reports.
func (g *Gateway) Upstreams() *upstream.Manager { return g.ups }

// Catalog is the current catalog.
func (g *Gateway) Catalog() *Catalog { return g.catalog.Load() }

// Resolve implements governor.Resolver on the current catalog.
func (g *Gateway) Resolve(name string) (*governor.Tool, bool) { return g.catalog.Load().Resolve(name) }

// MCPServer is the MCP server agents connect to.
func (g *Gateway) MCPServer() *mcp.Server { return g.server }

// Ready reports whether every upstream is up and listed and the state file takes writes, and if
// not, what is waiting and why.
func (g *Gateway) Ready() (bool, []string) {
	var waiting []string
	if st := g.opts.Store; st != nil {
		if err := st.Available(); err != nil {
			waiting = append(waiting, "state file: "+err.Error()+"; every call is refused (audit_unavailable) until it takes writes")
		}
	}
	for _, u := range g.ups.All() {
		if u.State() != upstream.Ready || u.Tools() == nil {
			why := u.LastError()
			if why == "" {
				why = u.State().String()
			}
			waiting = append(waiting, u.Name()+": "+why)
		}
	}
	return len(waiting) == 0, waiting
}

// Call runs one call through the governed chain. The MCP server uses it for every tools/call;
// the built-in agent calls it in-process.
func (g *Gateway) Call(ctx context.Context, c *governor.Call) *governor.Outcome {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	return g.call(ctx, cancel, c)
}

// call is Call of a context that cancel ends, the call's own; its maker ends it when the call
// has returned. A call's context is made once, where the call arrives (the fast path,
// handleCall, Call), and cancel is handed to each that may end the call early:
// notifications/cancelled, the caller leaving (callerWatch), the gateway stopping (shutdown).
// Each registers it while the call runs and forgets it when the call returns, instead of
// deriving a context of its own.
func (g *Gateway) call(ctx context.Context, cancel context.CancelCauseFunc, c *governor.Call) *governor.Outcome {
	if c.ID == "" {
		c.ID = g.callPrefix + strconv.FormatUint(g.callSeq.Add(1), 10)
	}
	if c.Start.IsZero() {
		c.Start = time.Now()
	}
	finish, admitted := g.shutdown.enter(cancel)
	if !admitted {
		return g.refuseDraining(ctx, c)
	}
	defer finish()
	g.sessions.begin(c)
	if len(c.Args) == 0 || string(c.Args) == "null" {
		c.Args = json.RawMessage("{}")
	}
	out := g.live.Load().chain.Handle(ctx, c)
	if c.Tool != nil && c.Tool.ServerConfig.Untrusted && c.Dispatched {
		// Whatever an untrusted server returned is now in the session's context.
		g.sessions.label(c.Session, "untrusted")
	}
	return out
}

// handleCall serves tools/call for every name, listed or not.
func (g *Gateway) handleCall(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if res, ok := g.fast.claim(req); ok {
		return res, nil // a call the fast path ran, whose result asks for input (fastcall.go)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer g.callers.enter(req, cancel)()
	principal, roles := callerOf(req)
	if strings.HasPrefix(req.Params.RequestState, continuationPrefix) {
		return g.resume(ctx, req, principal) // the answers to a suspended call's input requests
	}
	c := newCall(req.Params.Name, req.Params.Arguments, principal, roles)
	ctx = g.traceSDKCall(ctx, req, c)
	if req.Session != nil {
		c.Session = req.Session.ID()
		if token := req.Params.GetProgressToken(); token != nil {
			session := req.Session
			c.Progress = func(p *mcp.ProgressNotificationParams) {
				_ = session.NotifyProgress(ctx, progressOf(token, p))
			}
		}
	}
	// Requests and log messages the upstream sends while serving the call come back to this
	// session; a multi-round-trip continuation is passed on.
	o := g.origin(ctx, req)
	o.InputResponses, o.RequestState = req.Params.InputResponses, req.Params.RequestState
	if g.needsBridge(req) {
		return g.callSuspendable(ctx, c, o)
	}
	return g.runCall(ctx, cancel, req.Session, c, o)
}

// newCall is the governed call of a tools/call from a client: tool name, its arguments as they
// arrived and the caller.
func newCall(name string, args json.RawMessage, principal string, roles []string) *governor.Call {
	return &governor.Call{Name: name, Args: args, Principal: principal, Roles: roles, Start: time.Now()}
}

// progressOf is the progress notification for a client that asked with token.
func progressOf(token any, p *mcp.ProgressNotificationParams) *mcp.ProgressNotificationParams {
	return &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p.Progress, Total: p.Total, Message: p.Message}
}

// runCall runs c, from session ss (nil without one) with origin o, through the chain, in the
// call's own context, which cancel ends (call); it is the answer to send: the result, or the
// JSON-RPC error a passthrough server gave.
func (g *Gateway) runCall(ctx context.Context, cancel context.CancelCauseFunc, ss *mcp.ServerSession, c *governor.Call, o *upstream.Origin) (*mcp.CallToolResult, error) {
	ctx = upstream.WithOrigin(ctx, o)
	out := g.call(ctx, cancel, c)
	if out.RPCError != nil {
		return nil, out.RPCError
	}
	return freshResult(g.screenedCallResult(ctx, ss, c.Name, out.Result)), nil
}

// freshResult is the result sent downstream, a new object: an upstream's _meta keys of the
// protocol (its server info above all) are not passed on, the gateway answers as itself.
func freshResult(r *mcp.CallToolResult) *mcp.CallToolResult {
	if r == nil {
		return nil
	}
	return &mcp.CallToolResult{
		Meta:              upstream.CleanMeta(r.Meta),
		Content:           r.Content,
		StructuredContent: r.StructuredContent,
		IsError:           r.IsError,
		InputRequests:     r.InputRequests,
		RequestState:      r.RequestState,
	}
}

// unlistedCalls sends tools/call for names the MCP server does not list (unknown or hidden
// tools) to the chain too, so that they are refused with a failure envelope, not a protocol
// error.
func (g *Gateway) unlistedCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" {
			if r, ok := req.(*mcp.CallToolRequest); ok {
				if g.unlisted(r.Params.Name) {
					return g.handleCall(ctx, r)
				}
			}
		}
		return next(ctx, method, req)
	}
}

// unlisted reports whether the MCP server does not list name (an unknown, hidden or quarantined
// tool), so that unlistedCalls serves it.
func (g *Gateway) unlisted(name string) bool {
	t, found := g.Resolve(name)
	return !found || t.Hidden || t.Quarantine != ""
}

// refresh rebuilds the catalog from the upstreams' current tool lists and brings the MCP
// server's tool list in step, which notifies downstream sessions. It returns the fatal problems
// (bare-name collisions); the colliding tool is left out until they are fixed.
func (g *Gateway) refresh() []Problem { return g.refreshFrom("") }

// refreshFrom is refresh after server (re)listed what it offers: its tools, resources and
// prompts are registered again even if unchanged, so that downstream sessions get the
// list_changed the server sent, as they would from the server directly.
func (g *Gateway) refreshFrom(server string) []Problem {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	cfg := g.config()
	var sources []Source
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		u := g.ups.Get(s.Name)
		if u == nil {
			continue // added by a reload that has not reached the upstreams yet
		}
		sources = append(sources, Source{Server: s, Tools: u.Tools(), Dispatcher: u})
	}
	builtin, shadowed := g.builtinSource(cfg)
	if builtin != nil {
		sources = append(sources, *builtin)
	}
	cat, problems := BuildCatalog(cfg, sources, g.schemas.compile)
	if shadowed != nil {
		problems = append(problems, *shadowed)
	}
	g.schemas.retain()
	blocked := map[string]bool{}
	problems = append(problems, g.screenDefinitions(cat, blocked)...)
	problems = append(problems, g.applyPins(cat)...)
	var fatal []Problem
	for _, p := range problems {
		g.log.Error("catalog problem", "server", p.Server, "tool", p.Tool, "reason", p.Msg)
		if p.Fatal {
			fatal = append(fatal, p)
		}
	}
	g.catalog.Store(cat)
	refused := g.syncServer(cat, server)
	counts := countTools(cfg.Gateway.ToolNames, cat, sources, blocked, refused)
	g.counts.Store(&counts)
	for _, p := range g.syncFeatures(cfg, server) {
		g.log.Error("catalog problem", "server", p.Server, "prompt", p.Tool, "reason", p.Msg)
		if p.Fatal {
			fatal = append(fatal, p)
		}
	}
	return fatal
}

// syncServer registers added and changed tools with the MCP server and removes gone ones; the
// tools of server "force" are registered again even when unchanged.
func (g *Gateway) syncServer(cat *Catalog, force string) (refused map[string]bool) {
	refused = map[string]bool{}
	keep := make(map[string]bool, len(cat.listed))
	for _, t := range cat.listed {
		keep[t.Public] = true
		def, err := json.Marshal(t.Definition)
		if err != nil {
			continue
		}
		if prev, ok := g.served[t.Public]; ok && string(prev) == string(def) && (force == "" || t.Server != force) {
			continue
		}
		if err := sdkAdd(func() { g.server.AddTool(t.Definition, g.handleCall) }); err != nil {
			g.log.Error("tool left out of the catalog", "server", t.Server, "tool", t.Upstream, "reason", err.Error())
			keep[t.Public] = false
			refused[t.Public] = true
			continue
		}
		g.served[t.Public] = def
	}
	var gone []string
	for name := range g.served {
		if !keep[name] {
			gone = append(gone, name)
			delete(g.served, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	names := make(map[string]bool, len(g.served))
	for name := range g.served {
		names[name] = true
	}
	g.servedNames.Store(&names)
	return refused
}

// sdkAdd runs add, a registration with the MCP server (a tool, resource, template or prompt),
// turning the SDK's panics on definitions it rejects into errors so that an upstream's
// definition can never crash the gateway.
func sdkAdd(add func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the MCP SDK rejects its definition: %v", r)
		}
	}()
	add()
	return nil
}
