package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CORS for /mcp (issue 13): a page of an origin in gateway.allowed_origins may call the gateway
// from a browser. checkOrigin, outside, has already refused every other origin with 403 and
// no Access-Control-* header, so the browser keeps their pages out; what reaches cors comes
// from an allowed origin or from no page at all.
const (
	corsMethods = "POST, GET, DELETE, OPTIONS"
	// What a streamable HTTP client sends: the body's type, its token, its session and protocol
	// revision, where a resumed stream picks up, and (MCP 2026-07-28) the request's method and
	// name. A 2026-07-28 client also sends a tool's arguments marked in its schema as
	// Mcp-Param-<name> headers: those a preflight asks for are allowed too (corsParamHeaders).
	corsHeaders = "Content-Type, Accept, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
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
			h.Set("Access-Control-Allow-Headers", corsHeaders+corsParamHeaders(r.Header.Values("Access-Control-Request-Headers")))
			h.Set("Access-Control-Max-Age", strconv.Itoa(int(corsMaxAge.Seconds())))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", corsExposed)
		next.ServeHTTP(w, r)
	})
}

// corsParamHeaders is ", " and each Mcp-Param-<name> header a preflight asks for, or "".
func corsParamHeaders(requested []string) string {
	var b strings.Builder
	for _, list := range requested {
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			if len(name) > len("mcp-param-") && strings.EqualFold(name[:len("mcp-param-")], "mcp-param-") && isToken(name) {
				b.WriteString(", ")
				b.WriteString(name)
			}
		}
	}
	return b.String()
}

// isToken reports whether s is an HTTP token (RFC 9110), as a header name must be.
func isToken(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
