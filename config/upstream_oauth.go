package config

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"
)

// UpstreamOAuth is how the gateway gets an access token of its own for a url (HTTP) server: the
// OAuth 2.0 client credentials grant (RFC 6749 §4.4) at the token endpoint of the server's
// authorization server. The token is sent as a bearer token on every request to the server's
// origin, cached until shortly before it expires and then replaced; a 401 from the server drops
// it and the request is sent once more with a new one. A token a client of the gateway
// presented is never passed on: the gateway authenticates to the server as itself.
//
// The client secret is never in the file: ClientSecretEnv names the environment variable that
// holds it, read whenever the server is (re)connected.
type UpstreamOAuth struct {
	// TokenURL is the token endpoint. https, or http only to a loopback host (localhost,
	// 127.0.0.0/8, ::1): the client secret travels in the request.
	TokenURL string `yaml:"token_url" json:"token_url" jsonschema:"required,description=Token endpoint of the authorization server such as https://login.example.com/oauth2/token; http only for a loopback host."`
	// ClientID is the gateway's client at that authorization server.
	ClientID string `yaml:"client_id" json:"client_id" jsonschema:"required,description=The gateway's client_id at the authorization server."`
	// ClientSecretEnv names the environment variable holding the client secret.
	ClientSecretEnv string `yaml:"client_secret_env" json:"client_secret_env" jsonschema:"required,description=Environment variable holding the client secret (never the secret itself)."`
	// Scopes are requested in the token request's scope parameter; none sends no scope.
	Scopes []string `yaml:"scopes" json:"scopes,omitempty" jsonschema:"description=Scopes requested for the token (default none: the authorization server's default)."`
	// Resource is the RFC 8707 resource parameter of the token request, the URI the token is
	// meant for; when the file does not set it, the server's url, as the MCP authorization
	// specification asks of a client.
	Resource string `yaml:"resource" json:"resource,omitempty" jsonschema:"description=RFC 8707 resource indicator sent in the token request (default the server's url)."`
	// Audience is sent as the audience parameter, which some authorization servers ask for
	// instead of resource; "" sends none.
	Audience string `yaml:"audience" json:"audience,omitempty" jsonschema:"description=audience parameter of the token request for authorization servers that want one (default none)."`
	// Timeout bounds one token request; a call that needs a token the endpoint did not give
	// within it fails, not sent.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty" jsonschema:"type=string,description=Longest a token request may take such as 10s; a call whose token does not come in time fails without being sent (default 10s; at most 1m)."`
}

// DefaultUpstreamOAuthTimeout and MaxUpstreamOAuthTimeout bound one token request.
const (
	DefaultUpstreamOAuthTimeout = 10 * time.Second
	MaxUpstreamOAuthTimeout     = time.Minute
)

// Equal reports whether o and p get the same tokens (both may be nil). A server whose oauth
// settings changed is reconnected by a reload.
func (o *UpstreamOAuth) Equal(p *UpstreamOAuth) bool {
	if o == nil || p == nil {
		return o == p
	}
	return o.TokenURL == p.TokenURL && o.ClientID == p.ClientID && o.ClientSecretEnv == p.ClientSecretEnv &&
		slices.Equal(o.Scopes, p.Scopes) && o.Resource == p.Resource && o.Audience == p.Audience && o.Timeout == p.Timeout
}

// TokenTimeout is Timeout, or its default when unset.
func (o *UpstreamOAuth) TokenTimeout() time.Duration {
	if o.Timeout > 0 {
		return time.Duration(o.Timeout)
	}
	return DefaultUpstreamOAuthTimeout
}

func init() {
	nouns[reflect.TypeFor[UpstreamOAuth]()] = "in a server's oauth"
}

// checkUpstreamOAuth checks servers[].oauth and applies its defaults. It runs for every server,
// after the checks of command and url.
func (d *decoder) checkUpstreamOAuth(s *Server, src *source, loc location) {
	if !src.given("oauth") {
		return
	}
	if src.has("command") {
		d.errorf(src.lineOf("oauth"), loc, "oauth is only for a url (HTTP) server; this server runs a command, which gets no token")
		return
	}
	o, osrc := s.OAuth, d.src[s.OAuth]
	if o == nil || osrc == nil {
		return // not a mapping, reported when decoding
	}
	if headers := d.src[&s.HeadersEnv]; headers != nil {
		for name, e := range headers.keys {
			if strings.EqualFold(name, "Authorization") {
				d.errorf(src.lineOf("oauth"), loc, "oauth and headers_env's %s (line %d) both set the Authorization header, where the gateway sends the token oauth gets: keep one of them",
					truncate(name), e.line)
			}
		}
	}
	loc = loc.field("oauth")

	switch {
	case !osrc.has("token_url"):
		d.errorf(osrc.line, loc, "token_url is missing; give the token endpoint of the server's authorization server, such as https://login.example.com/oauth2/token")
	case osrc.valid("token_url"):
		if msg := checkTokenURL(o.TokenURL); msg != "" {
			d.errorf(osrc.valueLine("token_url"), loc.field("token_url"), "%s", msg)
		}
	}

	switch {
	case !osrc.has("client_id"):
		d.errorf(osrc.line, loc, "client_id is missing; give the gateway's client_id at the authorization server")
	case osrc.valid("client_id") && strings.TrimSpace(o.ClientID) == "":
		d.errorf(osrc.valueLine("client_id"), loc.field("client_id"), "is empty; give the gateway's client_id at the authorization server")
	}

	switch {
	case !osrc.has("client_secret_env"):
		d.errorf(osrc.line, loc, "client_secret_env is missing; name the environment variable holding the client secret")
	case osrc.valid("client_secret_env") && !envNameRE.MatchString(o.ClientSecretEnv):
		// The value is not repeated: it may be the secret itself, written here by mistake.
		d.errorf(osrc.valueLine("client_secret_env"), loc.field("client_secret_env"),
			"must name the environment variable holding the client secret (letters, digits and _, not starting with a digit), never the secret itself")
	}

	scopes := d.src[&o.Scopes]
	seen := map[string]bool{}
	for i, sc := range o.Scopes {
		if !scopes.itemOK(i) {
			continue
		}
		switch {
		case !scopeRE(sc):
			d.errorf(scopes.itemLine(i, 0), loc.field("scopes").index(i, ""),
				"%q is not an OAuth scope: one word of printable ASCII characters without spaces, quotes or backslashes; list each scope as its own item", truncate(sc))
		case seen[sc]:
			d.errorf(scopes.itemLine(i, 0), loc.field("scopes").index(i, ""), "scope %q is listed twice", truncate(sc))
		}
		seen[sc] = true
	}

	switch {
	case !osrc.has("resource"):
		o.Resource = s.URL
	case osrc.valid("resource"):
		if msg := checkUpstreamResource(o.Resource); msg != "" {
			d.errorf(osrc.valueLine("resource"), loc.field("resource"), "%s", msg)
		}
	}
	if osrc.valid("audience") && strings.TrimSpace(o.Audience) == "" {
		d.errorf(osrc.valueLine("audience"), loc.field("audience"), "is empty; remove it to send no audience parameter")
	}

	switch {
	case !osrc.has("timeout"):
		o.Timeout = Duration(DefaultUpstreamOAuthTimeout)
	case osrc.valid("timeout") && (o.Timeout <= 0 || o.Timeout > Duration(MaxUpstreamOAuthTimeout)):
		d.errorf(osrc.valueLine("timeout"), loc.field("timeout"),
			"must be above 0s and at most %s, got %s; a call waits this long at most for a token", MaxUpstreamOAuthTimeout, time.Duration(o.Timeout))
	}
}

// checkTokenURL returns what is wrong with a token endpoint, or "". Like checkURL it never
// repeats the URL.
func checkTokenURL(raw string) string {
	u, problem := webURL(raw, "must start with https://",
		"must not carry credentials; the client secret is read from the variable client_secret_env names")
	switch {
	case problem != "":
		return problem
	case u.Fragment != "":
		return "must not have a fragment (RFC 6749 §3.2)"
	case u.Scheme == "http" && !LoopbackHost(u.Hostname()):
		return "must start with https://: the client secret and the token would cross the network in the clear (http:// is only for a loopback host such as 127.0.0.1)"
	}
	return ""
}

// checkUpstreamResource returns what is wrong with an RFC 8707 resource indicator, or "".
func checkUpstreamResource(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Sprintf("is not a valid URI: %v", unwrapURLError(err))
	case !u.IsAbs():
		return "must be an absolute URI such as https://mcp.example.com/mcp (RFC 8707); remove it to send the server's url"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a fragment (RFC 8707 §2)"
	}
	return ""
}
