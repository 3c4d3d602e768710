package gateway

import (
	"net/http"
	"strconv"
	"time"
)

// CORS for /mcp (issue 13): a page of an origin in gateway.allowed_origins may call the gateway
// from a browser. checkOrigin, outside, has already refused every other origin with 403 and
// no Access-Control-* header, so the browser keeps their pages out; what reaches cors comes
// from an allowed origin or from no page at all.
const (
	corsMethods = "POST, GET, DELETE, OPTIONS"
	// What a streamable HTTP client sends: the body's type, its token, its session and protocol
	// revision, and where a resumed stream picks up.
	corsHeaders = "Content-Type, Accept, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
	// What a page must read from an answer to go on with its session.
	corsExposed = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
	corsMaxAge  = 10 * time.Minute
)

// cors answers a preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin
// with 204 and what the page may send, and marks every other answer to such a page as readable
// by it. A request without Origin is passed on untouched.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", strconv.Itoa(int(corsMaxAge.Seconds())))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposed)
		next.ServeHTTP(w, r)
	})
}
