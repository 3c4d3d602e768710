package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	idp "github.com/mcp-gateway/mcp-gateway/identity"
)

// Who may use the gateway over HTTP (SPEC.md §13). Requests pass, outermost first:
//
//	/mcp:     Origin check → bearer token (when auth.tokens or auth.oidc are set) → the MCP SDK (body limit)
//	/admin/:  bearer token (auth.tokens, the admin token or auth.oidc) → requireAdmin (role admin)
//
// /healthz, /readyz, /metrics and, with auth.oidc, the Protected Resource Metadata at
// /.well-known/oauth-protected-resource stay open: probes, Prometheus and a client about to
// sign in carry no token, and none of them changes anything. A bearer token is first compared
// with the static tokens, as SHA-256 digests in constant time; one that matches none and has
// the shape of a JWT then goes to the identity provider's verifier (package identity). No token
// is ever logged, repeated in an answer or passed on to an upstream.

// minTokenLength is the shortest bearer token the gateway accepts from the environment.
const minTokenLength = 16

// anonymous is the principal of calls that carry no token: stdio, or HTTP without auth.tokens.
const anonymous = "anonymous"

// adminPrincipal is the principal of the admin token (Options.AdminToken).
const adminPrincipal = "admin"

// agentPrincipal is the principal of the built-in agent's calls (agent.Principal).
const agentPrincipal = "agent"

// oidcPrincipalLabel is the principal label of the calls of every principal an identity
// provider vouched for (auth.oidc): they are unbounded in number, so metrics do not count them
// one by one; the audit log names each.
const oidcPrincipalLabel = "(oidc)"

// oidcRetryAfter is what a client whose token could not be checked, because the identity
// provider's keys could not be fetched, is told to wait before it tries again.
const oidcRetryAfter = "10"

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

// challenge is what a refusal tells the client about signing in: where the gateway's
// Protected Resource Metadata is (resource_metadata), and why the identity provider's token it
// sent was refused.
type challenge struct {
	metadata string     // "" when the route has none to point to
	refused  *idp.Error // nil when no token went to the identity provider
}

type challengeKey struct{}

// identify puts the principal of the request's bearer token in the request's context: the
// static credential it matches among creds or, when it matches none, has the shape of a JWT
// and auth.oidc is set, the principal the identity provider's token stands for. It refuses
// nothing; what unauthorized needs to say why (and metadata, the resource_metadata of this
// route's challenges, "" for none) goes in the context too.
func (g *Gateway) identify(creds []Credential, metadata string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := challenge{metadata: metadata}
		if token, ok := bearerToken(r); ok {
			if p := matchToken(creds, token); p != nil {
				r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
			} else if g.oidc != nil && strings.Count(token, ".") == 2 {
				if ip, err := g.oidc.Verify(r.Context(), token); err != nil {
					ch.refused = idp.ErrorOf(err)
				} else {
					p := &Principal{ID: ip.ID, Roles: ip.Roles}
					r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
				}
			}
		}
		if ch.metadata != "" || ch.refused != nil {
			r = r.WithContext(context.WithValue(r.Context(), challengeKey{}, &ch))
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
// says whether the token was missing or not valid, followed by hint. With auth.oidc the
// challenge names the Protected Resource Metadata (RFC 9728 resource_metadata), where an MCP
// client finds the identity provider to sign in with, and a refused token's error_description
// says what was wrong with it. A valid token of the identity provider that lacks a required
// scope gets 403 insufficient_scope; one that could not be checked, because the provider's
// keys could not be fetched, gets 503 with Retry-After: the token may well be good.
func unauthorized(w http.ResponseWriter, r *http.Request, hint string) {
	params := `realm="mcp-gateway"`
	ch, _ := r.Context().Value(challengeKey{}).(*challenge)
	if ch != nil && ch.metadata != "" {
		params += `, resource_metadata="` + ch.metadata + `"`
	}
	if ch != nil && ch.refused != nil {
		e := ch.refused
		switch e.Code {
		case idp.CodeUnavailable:
			w.Header().Set("Retry-After", oidcRetryAfter)
			writeError(w, http.StatusServiceUnavailable, e.Description)
		case idp.CodeInsufficientScope:
			w.Header().Set("WWW-Authenticate", `Bearer `+params+`, error="insufficient_scope", scope="`+e.Scope+`", error_description="`+e.Description+`"`)
			writeError(w, http.StatusForbidden, "the bearer token was refused: "+e.Description+"; ask the identity provider for a token with scope "+e.Scope)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer `+params+`, error="invalid_token", error_description="`+e.Description+`"`)
			writeError(w, http.StatusUnauthorized, "the bearer token was refused: "+e.Description+"; "+hint)
		}
		return
	}
	if _, ok := bearerToken(r); ok {
		w.Header().Set("WWW-Authenticate", `Bearer `+params+`, error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "the bearer token is not valid for this gateway; "+hint)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer `+params)
	writeError(w, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer <token>); "+hint)
}

// AuthOn reports whether /mcp needs a bearer token: auth.tokens gave creds, or auth.oidc is
// set. Without, the gateway must listen on loopback only (or be told --insecure-listen).
func AuthOn(cfg *config.Config, creds []Credential) bool {
	return len(creds) > 0 || cfg.Auth.OIDC != nil
}

// newVerifier is the verifier of auth.oidc, nil without it. A token may not name any of the
// static principals or the gateway's own (reservedPrincipals).
func newVerifier(cfg *config.Config, logger *slog.Logger) (*idp.Verifier, error) {
	if cfg.Auth.OIDC == nil {
		return nil, nil
	}
	return idp.New(*cfg.Auth.OIDC, idp.Options{Logger: logger, Reserved: tokenReserved(cfg)})
}

// tokenReserved are the principals an identity provider's token may not name: the reserved
// ones, and the names gateway.tls.client_roles gives roles to, which are the client CA's.
func tokenReserved(cfg *config.Config) []string {
	reserved := reservedPrincipals(cfg)
	if t := cfg.Gateway.TLS; t != nil {
		reserved = append(reserved, slices.Sorted(maps.Keys(t.ClientRoles))...)
	}
	return reserved
}

// reservedPrincipals are the principals that only the gateway's own credentials stand for:
// its own names (anonymous, admin, agent) and those of auth.tokens. An identity provider's
// token that names one is refused: someone called "admin" at the provider must not become the
// admin token's principal, whose claimed operator names the audit trusts.
func reservedPrincipals(cfg *config.Config) []string {
	out := []string{anonymous, adminPrincipal, agentPrincipal}
	for _, t := range cfg.Auth.Tokens {
		out = append(out, t.Principal)
	}
	return out
}

// startVerifier fetches the identity provider's keys, in the background: the gateway serves
// meanwhile, and static tokens work whatever the provider does. The verifier logs its failures
// and retries on its own until ctx ends or Close.
func (g *Gateway) startVerifier(ctx context.Context) {
	if g.oidc == nil {
		return
	}
	go func() {
		if err := g.oidc.Start(ctx); err == nil {
			g.log.Info("auth.oidc: taking the identity provider's access tokens", "issuer", g.oidc.Issuer(),
				"resource", g.cfg.Auth.OIDC.Resource, "metadata", idp.MetadataURL(g.cfg.Auth.OIDC.Resource))
		}
	}()
}

// metadataURL is the resource_metadata of /mcp's challenges, "" without auth.oidc.
func (g *Gateway) metadataURL() string {
	if g.oidc == nil {
		return ""
	}
	return idp.MetadataURL(g.cfg.Auth.OIDC.Resource)
}

// mcpHint is what a client refused on /mcp is told about where tokens come from, and about
// client certificates with mutual TLS.
func (g *Gateway) mcpHint() string {
	hint := mcpTokenHint
	if g.oidc != nil {
		hint = "sign in with the identity provider " + g.oidc.Issuer() + " (the metadata at " + g.metadataURL() +
			" names it) and send its access token, or use a token the operator issued in auth.tokens"
	}
	if g.opts.TLS.ClientCertificates() {
		hint += ", or connect with a client certificate signed by a CA of gateway.tls.client_ca_file; its subject CN is the principal"
	}
	return hint
}

// metadataRoutes serves the Protected Resource Metadata (RFC 9728) with auth.oidc: at the path
// the resource's URL gives (/.well-known/oauth-protected-resource/mcp for
// https://gw.example.com/mcp), at /.well-known/oauth-protected-resource/mcp for a proxy that
// serves the gateway under another path, and at the root path, where clients of the older
// revisions look. It needs no token and is readable by pages of any origin: it is public, and
// a browser-based client reads it before it has signed in.
func (g *Gateway) metadataRoutes(mux *http.ServeMux) {
	if g.oidc == nil {
		return
	}
	doc, err := json.MarshalIndent(idp.ProtectedResourceMetadata(*g.cfg.Auth.OIDC, g.cfg.Gateway.Name), "", "  ")
	if err != nil {
		return
	}
	doc = append(doc, '\n')
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "*")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(doc)
	})
	paths := []string{idp.WellKnownPath, idp.WellKnownPath + "/mcp", idp.MetadataPath(g.cfg.Auth.OIDC.Resource)}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		mux.Handle("GET "+p, serve)
		mux.Handle("OPTIONS "+p, serve)
	}
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
	return err == nil && config.LoopbackHost(host)
}
