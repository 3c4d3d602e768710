package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Handler serves the gateway over HTTP: streamable MCP at /mcp, liveness at /healthz,
// readiness at /readyz (ready when every upstream is up and has listed its tools), Prometheus
// metrics at /metrics and the operators' API under /admin/.
//
// creds are the bearer tokens of auth.tokens (LoadCredentials). With any, /mcp needs one of
// them and its principal is the caller of every tool call of the request; without, /mcp is open
// and calls are anonymous. /admin/ takes them and the admin token, and needs the admin role.
// /mcp refuses pages of origins not in gateway.allowed_origins (and answers CORS for those in
// it, cors.go), messages that are not strict JSON-RPC (strict.go), bodies over
// gateway.max_body_bytes (413) and bodies that do not arrive within gateway.body_read_timeout
// (408). Every request's body is read under that timeout, and one a handler refuses without
// reading is not waited for.
func (g *Gateway) Handler(creds []Credential) http.Handler {
	mux := http.NewServeMux()
	var mcpHandler http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
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
		Stateless: g.cfg.Gateway.HTTPMode == config.HTTPModeStateless,
		// A session that sends nothing for this long is closed (sessionlimits.go).
		SessionTimeout: g.sessionIdleTimeout(),
	})
	if g.cfg.Gateway.HTTPMode != config.HTTPModeStateless {
		mcpHandler = g.limitSessions(g.maxSessions(), mcpHandler)
	}
	mcpHandler = g.limitStreams(max(1, g.maxConnections()/2), mcpHandler)
	timeout := g.bodyReadTimeout()
	// Read after the token is checked: a request without one is refused before its body is
	// read. A body read whole is screened (strict.go) before the SDK sees it.
	stateful := g.cfg.Gateway.HTTPMode != config.HTTPModeStateless
	mcpHandler = readBody(g.maxBodyBytes(), timeout, g.door("http").strictBody(stateful), mcpHandler)
	if len(creds) > 0 {
		mcpHandler = identify(creds, requirePrincipal(mcpTokenHint, carryPrincipal(mcpHandler)))
	}
	// A preflight carries no token: cors answers it before authentication, for allowed origins.
	mux.Handle("/mcp", checkOrigin(allowedOrigins(g.cfg.Gateway.AllowedOrigins), cors(mcpHandler)))
	g.operatorRoutes(mux, creds)
	return bodyDeadline(timeout, g.httpMetrics(), g.log, mux)
}

// operatorRoutes registers what operators and Prometheus use of every gateway, serving MCP or
// not: /metrics, /admin/ (behind the admin token or an auth.tokens token with the admin role),
// /healthz and /readyz.
func (g *Gateway) operatorRoutes(mux *http.ServeMux, creds []Credential) {
	if g.opts.Registry != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(g.opts.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelError)}))
	}
	mux.Handle("/admin/", identify(withAdminToken(creds, g.opts.AdminToken), g.adminHandler()))
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
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": ready, "waiting": waiting})
	})
}

// NewHTTPServer is the gateway's HTTP server, bounded as limits.go describes, and the listener
// it must serve on: ln under the cap of gateway.max_connections, lowered to fit the process's
// open-file limit. Run it with srv.Serve(limited).
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
	srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         cl.connState,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	return srv, cl
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
