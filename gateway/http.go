package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Handler serves the gateway over HTTP: streamable MCP at /mcp, liveness at /healthz,
// readiness at /readyz (ready when every upstream is up and has listed its tools), Prometheus
// metrics at /metrics and the operators' API under /admin/.
//
// creds are the bearer tokens of auth.tokens (LoadCredentials). With any, or with auth.oidc,
// /mcp needs a token (one of them, or the identity provider's) and its principal is the caller
// of every tool call of the request; without, /mcp is open and calls are anonymous. With
// auth.oidc the Protected Resource Metadata is served too (metadataRoutes). /admin/ takes
// them, the admin token and the identity provider's tokens, and needs the admin role.
// /mcp refuses pages of origins not in gateway.allowed_origins (and answers CORS for those in
// it, cors.go), messages that are not strict JSON-RPC (strict.go), bodies over
// gateway.max_body_bytes (413) and bodies that do not arrive within gateway.body_read_timeout
// (408). Every request's body is read under that timeout, and one a handler refuses without
// reading is not waited for.
func (g *Gateway) Handler(creds []Credential) http.Handler {
	mux := http.NewServeMux()
	mcpHandler := g.mcpHandler()
	if len(creds) > 0 || g.opts.TLS.ClientCertificates() || g.oidc != nil {
		mcpHandler = g.identify(creds, g.metadataURL(), requirePrincipal(g.mcpHint(), carryCertificate(carryPrincipal(mcpHandler))))
	}
	// A preflight carries no token: cors answers it before authentication, for allowed origins.
	mux.Handle("/mcp", checkOrigin(allowedOrigins(g.cfg.Gateway.AllowedOrigins), cors(mcpHandler)))
	g.metadataRoutes(mux)
	g.operatorRoutes(mux, creds)
	// A client certificate's principal first, which a bearer token then replaces (tls.go).
	return g.opts.TLS.identifyClient(bodyDeadline(g.bodyReadTimeout(), g.httpMetrics(), g.log, mux))
}

// operatorRoutes registers what operators and Prometheus use of every gateway, serving MCP or
// not: /metrics, /admin/ (behind the admin token or an auth.tokens token with the admin role),
// /healthz and /readyz.
func (g *Gateway) operatorRoutes(mux *http.ServeMux, creds []Credential) {
	if g.opts.Registry != nil {
		mux.Handle("GET /metrics", MetricsHandler(g.opts.Registry, g.log))
	}
	mux.Handle("/admin/", g.identify(withAdminToken(creds, g.opts.AdminToken), "", g.adminHandler()))
	if g.console != nil {
		mux.Handle("/console", g.console)
		mux.Handle("/console/", g.console)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ready, waiting := g.Ready()
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(g.readiness(ready, waiting))
	})
}

// mcpHandler serves /mcp in gateway.http_mode: the SDK's stateful streamable handler, its
// stateless one, or (auto, the default) both, each request going to the one its protocol
// revision needs (statelessRevision). Whichever serves it, a request passes the same bounds
// first: GET streams at most half the connections (sessionlimits.go), the body read whole under
// its size and time limits, and the strict door (strict.go). Handler adds the origin check,
// CORS and authentication around all of it.
func (g *Gateway) mcpHandler() http.Handler {
	mode := g.cfg.Gateway.HTTPMode
	var h http.Handler
	switch mode {
	case config.HTTPModeStateful:
		h = g.statefulHandler()
	case config.HTTPModeStateless:
		h = g.streamable(true)
	default:
		h = byRevision(g.statefulHandler(), g.streamable(true))
	}
	// A client that deletes its session or closes the stream of a request cancels its calls
	// there, whatever the revision (callerwatch.go).
	h = g.callers.watch(h)
	h = g.limitStreams(max(1, g.maxConnections()/2), h)
	// Read after the token is checked: a request without one is refused before its body is
	// read. A body read whole is screened (strict.go) before the SDK sees it; with telemetry on,
	// the id of a tools/call is noted for the call's span (callcontext.go).
	h = readBody(g.maxBodyBytes(), g.bodyReadTimeout(), g.door("http").strictBody(mode, g.noteRequestIDs(g.fastCalls(mode))), h)
	if mode != config.HTTPModeStateful && mode != config.HTTPModeStateless { // auto, or "" in a config built in code
		h = withRoute(h)
	}
	return h
}

// statefulHandler is the SDK's stateful handler, its sessions capped at gateway.max_sessions
// and ended when idle (sessionlimits.go), counted in mcp_gateway_http_sessions.
func (g *Gateway) statefulHandler() http.Handler {
	g.sessionMetrics()
	idle := newIdleSessions(g.sessionIdleTimeout(), g.endSession)
	g.fast.idle = idle
	return g.limitSessions(g.maxSessions(), idle.track(g.streamable(false)))
}

// streamable is one of the SDK's streamable HTTP handlers over the gateway's MCP server.
func (g *Gateway) streamable(stateless bool) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		Logger: g.log,
		// A client that goes away cancels its calls, which tells the upstream to stop.
		PropagateRequestCancellation: true,
		// checkOrigin guards against DNS rebinding by gateway.allowed_origins instead. The SDK's
		// own check refuses every Host but localhost on a loopback connection, which would
		// refuse a reverse proxy on this machine with no setting to allow it.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        g.cfg.Gateway.MaxBodyBytes,
		// Stateless: no Mcp-Session-Id; each request is served by a session of its own, so
		// server-to-client requests are carried only as input requests in results.
		Stateless: stateless,
		// No SessionTimeout: the SDK's counts POSTs only and would end the session of a client
		// that listens on its GET stream; idleSessions ends idle sessions instead.
	})
}

// Protocol revisions on one endpoint (gateway.http_mode: auto). MCP 2026-07-28 has no sessions:
// a client sends every request with its revision in the MCP-Protocol-Version header and in
// _meta, and may begin with server/discover; the SDK serves that only on its stateless
// handler, and refuses it on its stateful one. Revisions 2025-03-26 to 2025-11-25 begin with
// initialize and carry the Mcp-Session-Id it answers with; only the stateful handler keeps
// them. Their requests never look alike, so each goes where it is served:
//
//  1. a request with Mcp-Session-Id belongs to its session: stateful (an unknown id gets 404,
//     which tells the client to initialize again);
//  2. else one whose MCP-Protocol-Version header is 2026-07-28 or later: stateless;
//  3. else a POST of server/discover, or of a request whose _meta names its protocol version
//     (io.modelcontextprotocol/protocolVersion): stateless, which answers it as that revision
//     says, with the headers it needs when they are missing;
//  4. else stateful: initialize opens a session; anything else without one is refused as
//     before (strict.go).
//
// A client of 2026-07-28 that discovers first is offered every revision the SDK speaks, picks
// the newest it shares and stays stateless; an older client's initialize negotiates its own
// revision as it always did. server/discover goes stateless because the stateful handler
// would answer it with the older revisions alone, moving a client that speaks 2026-07-28 down
// to 2025-11-25.
const revision20260728 = "2026-07-28"

// statelessRevision reports whether the request, whose message (if a POST) the door read as m,
// is served by the stateless handler.
func statelessRevision(r *http.Request, m doorMessage) bool {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	if r.Header.Get("Mcp-Protocol-Version") >= revision20260728 {
		return true
	}
	return r.Method == http.MethodPost && !m.batch && (m.method == "server/discover" || metaVersion(m.params))
}

// route carries the door's choice of handler (statelessRevision, made while it reads the
// message) across readBody to byRevision, for a request whose headers alone do not decide.
type route struct{ stateless bool }

type routeKey struct{}

// withRoute gives a request whose handler its body decides (a POST with neither a session nor
// a 2026-07-28 header) a route for the door to fill.
func withRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") < revision20260728 {
			r = r.WithContext(context.WithValue(r.Context(), routeKey{}, &route{}))
		}
		next.ServeHTTP(w, r)
	})
}

// noteRoute records the door's choice for byRevision, when the request carries a route.
func noteRoute(r *http.Request, stateless bool) {
	if rt, ok := r.Context().Value(routeKey{}).(*route); ok {
		rt.stateless = stateless
	}
}

// byRevision serves a request with the stateless handler when the door chose it or, for a
// request that carries no route, its headers say so; else with the stateful one.
func byRevision(stateful, stateless http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var to bool
		if rt, ok := r.Context().Value(routeKey{}).(*route); ok {
			to = rt.stateless
		} else {
			to = statelessRevision(r, doorMessage{})
		}
		if to {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// NewHTTPServer is the gateway's HTTP server, bounded as limits.go describes, and the listener
// it must serve on: ln under the cap of gateway.max_connections, lowered to fit the process's
// open-file limit, and over TLS with Options.TLS. Run it with srv.Serve(limited).
func (g *Gateway) NewHTTPServer(ln net.Listener, creds []Credential) (srv *http.Server, limited net.Listener) {
	return g.newHTTPServer(ln, g.Handler(creds))
}

// newHTTPServer serves h on ln under the bounds of limits.go.
func (g *Gateway) newHTTPServer(ln net.Listener, h http.Handler) (srv *http.Server, limited net.Listener) {
	most := g.cfg.Gateway.MaxConnections
	if most <= 0 {
		most = config.DefaultMaxConnections
	}
	if fileLimit := openFileLimit(); connectionCap(most, fileLimit) < most {
		most = connectionCap(most, fileLimit)
		g.log.Warn("gateway.max_connections is more than the open-file limit leaves room for; serving fewer connections at once "+
			"so that the upstreams and the state file keep theirs: raise the limit (LimitNOFILE=, ulimit -n) or lower gateway.max_connections",
			"max_connections", g.cfg.Gateway.MaxConnections, "open_file_limit", fileLimit, "serving_at_most", most)
	}
	cl := newConnLimiter(ln, most, g.httpMetrics(), g.log)
	limited = cl
	if t := g.opts.TLS; t != nil {
		// The cap counts TCP connections, handshake or not; a refusal is answered over TLS.
		cl.tls = t.Config()
		limited = tls.NewListener(cl, t.Config())
	}
	srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         cl.connState,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	return srv, limited
}

// bodyReadTimeout is gateway.body_read_timeout, or its default for a config built in code.
func (g *Gateway) bodyReadTimeout() time.Duration {
	if d := time.Duration(g.cfg.Gateway.BodyReadTimeout); d > 0 {
		return d
	}
	return config.DefaultBodyReadTimeout
}

// maxBodyBytes is gateway.max_body_bytes, or its default for a config built in code.
func (g *Gateway) maxBodyBytes() int64 {
	if n := g.cfg.Gateway.MaxBodyBytes; n > 0 {
		return n
	}
	return config.DefaultMaxBodyBytes
}

// httpMetrics are the collectors of the HTTP bounds in the gateway's registry.
func (g *Gateway) httpMetrics() *httpMetrics {
	if g.opts.Registry == nil {
		return httpMetricsFor(nil)
	}
	return httpMetricsFor(g.opts.Registry)
}

// door is the screen of client messages of one transport, counting into the gateway's registry.
func (g *Gateway) door(transport string) *door {
	if g.opts.Registry == nil {
		return newDoor(transport, nil, g.log)
	}
	return newDoor(transport, g.opts.Registry, g.log)
}

// ServeStdio serves one MCP session over the process's stdin and stdout until the client
// disconnects or ctx ends. Every line is screened as an HTTP body is (strict.go); a line
// refused is answered with its JSON-RPC error on stdout and goes no further.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.server.Run(ctx, newStrictStdio(os.Stdin, os.Stdout, g.maxBodyBytes(), g.door("stdio")))
}
