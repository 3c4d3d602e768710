package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Auth says who may use the gateway over HTTP (SPEC.md §13). With tokens or oidc configured,
// /mcp and /admin need a bearer token, and /admin needs the admin role. The static tokens
// themselves are never in the file: each entry names the environment variable holding its
// token, read at serve start. With oidc, the JWT access tokens of an identity provider are
// taken too (docs/operations.md, "Signing in with an identity provider").
type Auth struct {
	Tokens []Token `yaml:"tokens" json:"tokens,omitempty" jsonschema:"description=Bearer tokens and the principals they stand for; with any set\\, /mcp and /admin need one."`
	// OIDC, when set, makes /mcp and /admin take the identity provider's access tokens too.
	OIDC *OIDC `yaml:"oidc" json:"oidc,omitempty" jsonschema:"description=An OpenID Connect / OAuth 2.1 identity provider whose JWT access tokens /mcp and /admin take beside auth.tokens."`
}

// On reports whether /mcp needs a bearer token: auth.tokens or auth.oidc is configured.
func (a Auth) On() bool { return len(a.Tokens) > 0 || a.OIDC != nil }

// Token is one principal's bearer token.
type Token struct {
	// Principal is who uses the token: principal.id in policies, the principal of audit records.
	Principal string `yaml:"principal" json:"principal" jsonschema:"required,pattern=^[A-Za-z0-9][A-Za-z0-9_.@-]*$,description=Who uses this token: principal.id in policies and the principal of audit records."`
	// Roles are principal.roles in policies; RoleAdmin opens the /admin API, RoleViewer the
	// console read-only.
	Roles []string `yaml:"roles" json:"roles,omitempty" jsonschema:"description=Roles such as admin\\, operator\\, agent or planner: principal.roles in policies; admin opens the /admin API."`
	// TokenEnv names the environment variable holding the token (16 characters or more).
	TokenEnv string `yaml:"token_env" json:"token_env" jsonschema:"required,pattern=^[A-Za-z_][A-Za-z0-9_]*$,description=Environment variable holding the token (at least 16 characters)\\, read at serve start."`

	// Line is the line of this entry in the file, for messages.
	Line int `yaml:"-" json:"-"`
}

// RoleAdmin is the role the /admin API needs. RoleViewer signs in to the operator console
// read-only. Other roles mean something only to policies.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// Console holds the settings of the operator console at /console (docs/console.md).
type Console struct {
	// ViewerMayHalt lets a principal with role viewer, who may otherwise act on nothing, press
	// HALT: whoever sees danger must be able to stop it. nil means the default, true.
	ViewerMayHalt *bool `yaml:"viewer_may_halt" json:"viewer_may_halt,omitempty" jsonschema:"description=Whether a principal with role viewer may press HALT in the console (default true)."`
	// SessionTTL is how long a console sign-in lasts (default 8h, a shift).
	SessionTTL Duration `yaml:"session_ttl" json:"session_ttl,omitempty" jsonschema:"type=string,description=How long a console sign-in lasts before the person signs in again such as 8h (default 8h)."`
}

// DefaultConsoleSessionTTL is how long a console sign-in lasts unless console.session_ttl says
// otherwise.
const DefaultConsoleSessionTTL = 8 * time.Hour

// ViewerHalts reports console.viewer_may_halt, true unless set to false.
func (c Console) ViewerHalts() bool { return c.ViewerMayHalt == nil || *c.ViewerMayHalt }

// checkConsole checks the console section and applies its defaults.
func (d *decoder) checkConsole(c *Console) {
	src := d.src[c]
	switch {
	case src == nil || !src.has("session_ttl"):
		c.SessionTTL = Duration(DefaultConsoleSessionTTL)
	case src.valid("session_ttl") && (c.SessionTTL < Duration(time.Minute) || c.SessionTTL > Duration(7*24*time.Hour)):
		d.errorf(src.valueLine("session_ttl"), location{path: "console"}.field("session_ttl"),
			"must be between 1m and 168h (a week), got %s", time.Duration(c.SessionTTL))
	}
}

// DefaultMaxBodyBytes bounds the body of one request to /mcp unless gateway.max_body_bytes says
// otherwise.
const DefaultMaxBodyBytes = 4 << 20

// minBodyBytes is the smallest gateway.max_body_bytes: an MCP initialize request alone takes
// several hundred bytes.
const minBodyBytes = 1024

// DefaultAllowedOrigins are the browser origins allowed on /mcp when gateway.allowed_origins is
// absent: pages served from this machine, on any port.
var DefaultAllowedOrigins = []string{
	"http://localhost:*", "https://localhost:*",
	"http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://[::1]:*", "https://[::1]:*",
}

var (
	principalRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]*$`)
	roleRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	schemeRE    = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)
)

// checkAuth checks the auth section and the gateway's other HTTP access settings
// (allowed_origins, max_body_bytes), and applies their defaults.
func (d *decoder) checkAuth(cfg *Config) {
	d.checkTokens(&cfg.Auth)
	if a := d.src[&cfg.Auth]; a != nil && a.has("oidc") {
		switch {
		case cfg.Auth.OIDC != nil:
			d.checkOIDC(cfg.Auth.OIDC, a.lineOf("oidc"))
		case a.valid("oidc"):
			d.errorf(a.lineOf("oidc"), location{path: "auth.oidc"}, "has no settings; give issuer and resource, or remove it")
		}
	}
	d.checkConsole(&cfg.Console)
	g := &cfg.Gateway
	src := d.src[g]
	if src == nil {
		src = &source{}
	}
	loc := location{path: "gateway"}
	if !src.given("allowed_origins") {
		g.AllowedOrigins = append([]string(nil), DefaultAllowedOrigins...)
	} else {
		origins := d.src[&g.AllowedOrigins]
		for i, o := range g.AllowedOrigins {
			if !origins.itemOK(i) {
				continue
			}
			if _, err := ParseOrigin(o); err != nil {
				d.errorf(origins.itemLine(i, 0), loc.field("allowed_origins").index(i, ""), "%v", err)
			}
		}
	}
	switch {
	case !src.has("max_body_bytes"):
		g.MaxBodyBytes = DefaultMaxBodyBytes
	case src.valid("max_body_bytes") && g.MaxBodyBytes < minBodyBytes:
		d.errorf(src.valueLine("max_body_bytes"), loc.field("max_body_bytes"),
			"must be at least %d bytes, got %d; an MCP initialize request alone takes several hundred", minBodyBytes, g.MaxBodyBytes)
	}
}

func (d *decoder) checkTokens(a *Auth) {
	principals := map[string]int{} // principal -> index of its first entry
	vars := map[string]int{}       // token_env -> index of its first entry
	for i := range a.Tokens {
		t := &a.Tokens[i]
		src := d.src[t]
		if src == nil {
			continue // not a mapping, reported when decoding
		}
		t.Line = src.line
		loc := location{path: "auth.tokens"}.index(i, truncate(t.Principal))

		switch {
		case !src.has("principal"):
			d.errorf(src.line, loc, "principal is missing; name who uses this token (principal.id in policies, the principal of audit records)")
		case !src.valid("principal"):
		case !principalRE.MatchString(t.Principal):
			d.errorf(src.valueLine("principal"), loc, "principal %q is not valid: use letters, digits, _ . @ and -, starting with a letter or digit", truncate(t.Principal))
		default:
			if first, dup := principals[t.Principal]; dup {
				d.errorf(src.valueLine("principal"), loc, "duplicate principal %q; auth.tokens[%d] at line %d has it too",
					t.Principal, first, a.Tokens[first].Line)
			} else {
				principals[t.Principal] = i
			}
		}

		roles := d.src[&t.Roles]
		seen := map[string]bool{}
		for j, r := range t.Roles {
			if !roles.itemOK(j) {
				continue
			}
			switch {
			case !roleRE.MatchString(r):
				d.errorf(roles.itemLine(j, 0), loc.field("roles").index(j, ""), "%q is not a role name: use one word of letters, digits, _ . and - (such as %s, operator, agent)", truncate(r), RoleAdmin)
			case seen[r]:
				d.errorf(roles.itemLine(j, 0), loc.field("roles").index(j, ""), "role %q is listed twice", r)
			}
			seen[r] = true
		}

		switch {
		case !src.has("token_env"):
			d.errorf(src.line, loc, "token_env is missing; name the environment variable holding this principal's token")
		case !src.valid("token_env"):
		case !envNameRE.MatchString(t.TokenEnv):
			// The value is not repeated: it may be the token itself, written here by mistake.
			d.errorf(src.valueLine("token_env"), loc.field("token_env"), "must name the environment variable holding the token (letters, digits and _, not starting with a digit), never the token itself")
		default:
			if first, dup := vars[t.TokenEnv]; dup {
				d.errorf(src.valueLine("token_env"), loc.field("token_env"), "%s is read by auth.tokens[%d] at line %d too; give each principal its own token",
					t.TokenEnv, first, a.Tokens[first].Line)
			} else {
				vars[t.TokenEnv] = i
			}
		}
	}
}

// Origin is a browser origin, scheme://host[:port], as the Origin header carries it and
// gateway.allowed_origins lists it. Scheme and host are lower case; the scheme's default port
// is left out. In allowed_origins, port "*" stands for any port, or none.
type Origin struct {
	Scheme, Host, Port string
}

// ParseOrigin reads an origin such as http://localhost:6274 or, in allowed_origins,
// http://localhost:*. An origin has no path, query or user: a browser never sends one.
func ParseOrigin(s string) (Origin, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || !schemeRE.MatchString(strings.ToLower(scheme)) {
		return Origin{}, fmt.Errorf("%q is not an origin: write scheme://host[:port], such as http://localhost:6274", truncate(s))
	}
	if strings.ContainsAny(rest, "/?#@ ") {
		return Origin{}, fmt.Errorf("%q is not an origin: an origin is scheme://host[:port], with no path, query or user", truncate(s))
	}
	o := Origin{Scheme: strings.ToLower(scheme)}
	hostport := rest
	if strings.HasPrefix(rest, "[") { // an IPv6 address
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return Origin{}, fmt.Errorf("%q is not an origin: the IPv6 address has no closing ]", truncate(s))
		}
		o.Host, hostport = rest[:end+1], rest[end+1:]
		if hostport != "" && hostport[0] != ':' {
			return Origin{}, fmt.Errorf("%q is not an origin: expected :port after the IPv6 address", truncate(s))
		}
		o.Port = strings.TrimPrefix(hostport, ":")
	} else {
		o.Host, o.Port, _ = strings.Cut(hostport, ":")
	}
	o.Host = strings.ToLower(o.Host)
	if o.Host == "" || o.Host == "[]" {
		return Origin{}, fmt.Errorf("%q is not an origin: it has no host", truncate(s))
	}
	if o.Port != "" && o.Port != "*" {
		if p, err := strconv.Atoi(o.Port); err != nil || p < 1 || p > 65535 {
			return Origin{}, fmt.Errorf("%q is not an origin: the port must be a number from 1 to 65535, or * for any port", truncate(s))
		}
	}
	if (o.Scheme == "http" && o.Port == "80") || (o.Scheme == "https" && o.Port == "443") {
		o.Port = ""
	}
	return o, nil
}

// Allows reports whether the allowed origin p admits origin o, an origin a request carried.
func (p Origin) Allows(o Origin) bool {
	return p.Scheme == o.Scheme && p.Host == o.Host && (p.Port == "*" || p.Port == o.Port)
}
