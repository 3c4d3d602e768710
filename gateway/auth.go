package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Who may use the gateway over HTTP (SPEC.md §13). Requests pass, outermost first:
//
//	/mcp:     Origin check → bearer token (when auth.tokens are set) → the MCP SDK (body limit)
//	/admin/:  bearer token (auth.tokens or the admin token) → requireAdmin (role admin)
//
// /healthz, /readyz and /metrics stay open: probes and Prometheus carry no token, and none of
// them changes anything. Tokens are compared as SHA-256 digests in constant time and never
// logged or repeated in an answer.

// minTokenLength is the shortest bearer token the gateway accepts from the environment.
const minTokenLength = 16

// anonymous is the principal of calls that carry no token: stdio, or HTTP without auth.tokens.
const anonymous = "anonymous"

// adminPrincipal is the principal of the admin token (Options.AdminToken).
const adminPrincipal = "admin"

// What a refused caller is told about where tokens come from.
const (
	mcpTokenHint   = "the gateway's operator issues tokens in auth.tokens"
	adminTokenHint = "use a token with role admin from auth.tokens, or the admin token (the CLI reads it from admin.token in the state directory or MCP_GATEWAY_ADMIN_TOKEN)"
)

// Principal is who sent a request, as its bearer token says: principal.id and principal.roles
// in policies, the principal of audit records.
type Principal struct {
	ID    string
	Roles []string
}

// HasRole reports whether p holds role.
func (p *Principal) HasRole(role string) bool { return slices.Contains(p.Roles, role) }

// Credential is one bearer token and the principal it stands for. Only the token's SHA-256
// digest is kept.
type Credential struct {
	Principal Principal
	digest    [sha256.Size]byte
}

// NewCredential makes the credential of token for p.
func NewCredential(p Principal, token string) Credential {
	return Credential{Principal: p, digest: sha256.Sum256([]byte(token))}
}

// LoadCredentials reads the token of every auth.tokens entry from the environment variable its
// token_env names, with lookup (os.LookupEnv). A variable that is unset, shorter than 16
// characters or holding whitespace, and two entries with the same token, are each reported with
// the config line and the variable's name; a token's value never appears in the error.
func LoadCredentials(cfg *config.Config, lookup func(string) (string, bool)) ([]Credential, error) {
	var creds []Credential
	var problems []string
	first := map[[sha256.Size]byte]int{} // digest -> index of its first entry
	for i, t := range cfg.Auth.Tokens {
		where := fmt.Sprintf("%s:%d: auth.tokens[%d] (%s)", cfg.Path, t.Line, i, t.Principal)
		token, ok := lookup(t.TokenEnv)
		switch {
		case !ok || token == "":
			problems = append(problems, fmt.Sprintf("%s: token_env names %s, which is not set or empty; set it to %s's bearer token (%d characters or more)",
				where, t.TokenEnv, t.Principal, minTokenLength))
			continue
		case len(token) < minTokenLength:
			problems = append(problems, fmt.Sprintf("%s: %s holds fewer than %d characters; a shorter token is too easy to guess",
				where, t.TokenEnv, minTokenLength))
			continue
		case strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			problems = append(problems, fmt.Sprintf("%s: %s holds whitespace or control characters, which cannot travel in an Authorization header",
				where, t.TokenEnv))
			continue
		}
		c := NewCredential(Principal{ID: t.Principal, Roles: slices.Clone(t.Roles)}, token)
		if j, dup := first[c.digest]; dup {
			problems = append(problems, fmt.Sprintf("%s: %s holds the same token as %s of auth.tokens[%d] (%s); give each principal its own",
				where, t.TokenEnv, cfg.Auth.Tokens[j].TokenEnv, j, cfg.Auth.Tokens[j].Principal))
			continue
		}
		first[c.digest] = i
		creds = append(creds, c)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return creds, nil
}

// withAdminToken is creds and, unless adminToken is "", the admin token's credential: principal
// "admin" with role admin.
func withAdminToken(creds []Credential, adminToken string) []Credential {
	if adminToken == "" {
		return creds
	}
	return append(slices.Clip(creds), NewCredential(Principal{ID: adminPrincipal, Roles: []string{config.RoleAdmin}}, adminToken))
}

// match is the principal whose token the request carries, or nil. Every credential is compared,
// whatever matched before, so the time taken does not say which one matched or how far a guess
// got; comparing digests makes every comparison the same length.
func match(creds []Credential, r *http.Request) *Principal {
	token, ok := bearerToken(r)
	if !ok {
		return nil
	}
	return matchToken(creds, token)
}

// matchToken is match for a token however it came.
func matchToken(creds []Credential, token string) *Principal {
	got := sha256.Sum256([]byte(token))
	var found *Principal
	for i := range creds {
		if subtle.ConstantTimeCompare(got[:], creds[i].digest[:]) == 1 && found == nil {
			found = &creds[i].Principal
		}
	}
	return found
}

// bearerToken is the token of an "Authorization: Bearer <token>" header, parsed as the MCP
// SDK's auth middleware parses it.
func bearerToken(r *http.Request) (string, bool) {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "Bearer") {
		return "", false
	}
	return fields[1], true
}

type principalKey struct{}

// PrincipalFromContext is the principal authenticated on the HTTP request whose context ctx
// is, or nil.
func PrincipalFromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// identify puts the principal of the request's bearer token, if it matches one of creds, in
// the request's context; it refuses nothing.
func identify(creds []Credential, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := match(creds, r); p != nil {
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
		}
		next.ServeHTTP(w, r)
	})
}

// requirePrincipal refuses, with 401, a request that identify found no principal for.
func requirePrincipal(hint string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if PrincipalFromContext(r.Context()) == nil {
			unauthorized(w, r, hint)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized answers 401 with a WWW-Authenticate challenge (RFC 6750) and a JSON error that
// says whether the token was missing or not valid, followed by hint.
func unauthorized(w http.ResponseWriter, r *http.Request, hint string) {
	if _, ok := bearerToken(r); ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "the bearer token is not valid for this gateway; "+hint)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway"`)
	writeError(w, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer <token>); "+hint)
}

// carryPrincipal hands the request's principal to the MCP SDK. The SDK runs tool handlers on
// the session's context, not the HTTP request's, so a context value would not reach handleCall;
// what does is the SDK's auth.TokenInfo, which it copies into each request's Extra. Only
// auth.RequireBearerToken can attach one, so it runs here with a verifier that returns what
// identify already established. The SDK also ties a session to TokenInfo.UserID: a session
// started with one principal's token cannot be used with another's (403).
func carryPrincipal(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p := PrincipalFromContext(ctx)
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.ID, Scopes: p.Roles}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}

// callerOf is the principal of a tools/call and its roles: the one authenticated on the HTTP
// request that carried it, or anonymous.
func callerOf(req *mcp.CallToolRequest) (string, []string) {
	if req.Extra == nil {
		return anonymous, nil
	}
	return callerOfToken(req.Extra.TokenInfo)
}

// callerOfToken is the principal and roles of the token an HTTP request was authenticated
// with (nil: none), or anonymous.
func callerOfToken(ti *auth.TokenInfo) (string, []string) {
	if ti != nil && ti.UserID != "" {
		return ti.UserID, slices.Clone(ti.Scopes)
	}
	return anonymous, nil
}

// checkOrigin refuses, with 403, a request whose Origin header is not one of allowed: a page
// in a browser must not reach the robot through a gateway that trusts where it listens (DNS
// rebinding). A request without Origin does not come from a browser page and passes.
func checkOrigin(allowed []config.Origin, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		if o, err := config.ParseOrigin(origin); err == nil && o.Port != "*" {
			for _, a := range allowed {
				if a.Allows(o) {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		if len(origin) > 100 {
			origin = origin[:100] + "…"
		}
		writeError(w, http.StatusForbidden, fmt.Sprintf("requests from pages of origin %q are not allowed; "+
			"an operator can add it to gateway.allowed_origins", origin))
	})
}

// allowedOrigins parses gateway.allowed_origins, which loading has checked.
func allowedOrigins(list []string) []config.Origin {
	var out []config.Origin
	for _, s := range list {
		if o, err := config.ParseOrigin(s); err == nil {
			out = append(out, o)
		}
	}
	return out
}

// LoopbackListen reports whether addr (host:port) accepts connections from this machine only:
// localhost or a loopback IP. An empty host means every interface.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
