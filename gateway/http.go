package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

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
// /mcp refuses pages of origins not in gateway.allowed_origins, and bodies over
// gateway.max_body_bytes (413).
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
	})
	if len(creds) > 0 {
		mcpHandler = identify(creds, requirePrincipal(mcpTokenHint, carryPrincipal(mcpHandler)))
	}
	mux.Handle("/mcp", checkOrigin(allowedOrigins(g.cfg.Gateway.AllowedOrigins), mcpHandler))
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
	return mux
}

// ServeStdio serves one MCP session over the process's stdin and stdout until the client
// disconnects or ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.server.Run(ctx, &mcp.StdioTransport{})
}
