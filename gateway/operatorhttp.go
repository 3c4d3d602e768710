package gateway

import (
	"net"
	"net/http"
)

// OperatorHandler serves a gateway that no MCP client connects to — `mcp-gateway agent`, whose
// model calls the gateway in-process — to its operators and to Prometheus: /admin/ (approvals,
// status, unlock, audit; behind the admin token as in Handler), /metrics, /healthz and /readyz.
//
// /mcp is not served. The run is the one driver of the robot: its budgets, its halt on an
// unknown outcome and its transcript account for every physical call, and the process ends with
// the task, taking any client's session with it. An MCP client of the same cell uses
// `mcp-gateway serve`; /mcp answers 404 saying so.
func (g *Gateway) OperatorHandler(creds []Credential) http.Handler {
	mux := http.NewServeMux()
	g.operatorRoutes(mux, creds)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "this is `mcp-gateway agent`: it serves operators (/admin/, /metrics, /healthz, /readyz), "+
			"not MCP clients; connect MCP clients to `mcp-gateway serve`")
	})
	return bodyDeadline(g.bodyReadTimeout(), g.httpMetrics(), g.log, mux)
}

// NewOperatorServer is NewHTTPServer serving OperatorHandler: the same bounds on connections,
// headers and bodies.
func (g *Gateway) NewOperatorServer(ln net.Listener, creds []Credential) (srv *http.Server, limited net.Listener) {
	return g.newHTTPServer(ln, g.OperatorHandler(creds))
}
