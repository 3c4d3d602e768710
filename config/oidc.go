package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// OIDC makes the gateway an OAuth 2.1 resource server (the MCP authorization spec): clients
// sign in with the organisation's identity provider, and /mcp and /admin take the JWT access
// tokens it issues beside the static tokens of auth.tokens. The gateway validates every token
// itself against the issuer's published keys (package identity) and serves the Protected
// Resource Metadata (RFC 9728) that tells MCP clients where to sign in.
type OIDC struct {
	// Issuer is the identity provider's issuer identifier, exactly as its tokens' iss claim
	// carries it; its discovery document is read from below it. https:// only, but for a
	// loopback host (tests, labs).
	Issuer string `yaml:"issuer" json:"issuer" jsonschema:"required,description=The identity provider's issuer URL\\, exactly as its tokens' iss claim says such as https://idp.example.com/realms/robots; https only (http for a loopback host)."`
	// Resource is the gateway's MCP endpoint as clients reach it, such as
	// https://gw.example.com/mcp: the resource of RFC 8707 and RFC 9728 that tokens must be
	// issued for, and the resource of the metadata document.
	Resource string `yaml:"resource" json:"resource" jsonschema:"required,description=The gateway's MCP endpoint as clients reach it such as https://gw.example.com/mcp (RFC 8707 / RFC 9728)."`
	// Audience is the value a token's aud claim must contain; default Resource.
	Audience string `yaml:"audience" json:"audience,omitempty" jsonschema:"description=Value a token's aud claim must contain (default: resource)."`
	// PrincipalClaim is the claim whose value becomes principal.id (default sub).
	PrincipalClaim string `yaml:"principal_claim" json:"principal_claim,omitempty" jsonschema:"description=Claim whose value becomes principal.id (default sub); a dotted path such as ext.user reaches into objects."`
	// RolesClaim is the claim holding principal.roles: a string or an array of strings; a
	// dotted path such as realm_access.roles reaches into objects. Default none: no roles.
	RolesClaim string `yaml:"roles_claim" json:"roles_claim,omitempty" jsonschema:"description=Claim holding principal.roles (a string or an array of strings) such as roles or realm_access.roles; default none. A role admin opens /admin."`
	// RequiredScopes must all be in a token's scope (space-separated) or scp (array) claim;
	// a token that lacks one gets 403 insufficient_scope. They are the metadata's
	// scopes_supported.
	RequiredScopes []string `yaml:"required_scopes" json:"required_scopes,omitempty" jsonschema:"description=Scopes every token must carry (scope or scp claim); a token lacking one gets 403 insufficient_scope."`
	// Algorithms are the signature algorithms accepted; default every asymmetric one
	// (DefaultOIDCAlgorithms). none and HMAC (HS256, HS384, HS512) are refused.
	Algorithms []string `yaml:"algorithms" json:"algorithms,omitempty" jsonschema:"description=JWS algorithms accepted (default RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 EdDSA); none and HS* are refused."`

	// Line is the line of the section in the file, for messages.
	Line int `yaml:"-" json:"-"`
}

// DefaultOIDCAlgorithms are the JWS algorithms accepted unless auth.oidc.algorithms says
// otherwise: every asymmetric one. They are also the only ones it may name.
var DefaultOIDCAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// DefaultPrincipalClaim is the claim whose value becomes principal.id unless
// auth.oidc.principal_claim says otherwise.
const DefaultPrincipalClaim = "sub"

// LoopbackHost reports whether host (a name or an IP, without port or brackets) is this
// machine only: localhost or a loopback address.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// checkOIDC checks auth.oidc, whose key is at line, and applies its defaults.
func (d *decoder) checkOIDC(o *OIDC, line int) {
	src := d.src[o]
	if src == nil {
		return // not a mapping, reported when decoding
	}
	o.Line = line
	loc := location{path: "auth.oidc"}

	switch {
	case !src.has("issuer"):
		d.errorf(line, loc, "issuer is missing; give the identity provider's issuer URL, exactly as its tokens' iss claim says (such as https://idp.example.com/realms/robots)")
	case src.valid("issuer"):
		if msg := checkIssuer(o.Issuer); msg != "" {
			d.errorf(src.valueLine("issuer"), loc.field("issuer"), "%s", msg)
		}
	}
	switch {
	case !src.has("resource"):
		d.errorf(line, loc, "resource is missing; give the gateway's MCP endpoint as clients reach it, such as https://gw.example.com/mcp: tokens must be issued for it (RFC 8707)")
	case src.valid("resource"):
		if msg := checkResource(o.Resource); msg != "" {
			d.errorf(src.valueLine("resource"), loc.field("resource"), "%s", msg)
		}
	}
	switch {
	case !src.given("audience"):
		o.Audience = o.Resource
	case src.valid("audience") && (o.Audience == "" || strings.TrimSpace(o.Audience) != o.Audience):
		d.errorf(src.valueLine("audience"), loc.field("audience"), "must be the value a token's aud claim carries for this gateway, with no surrounding spaces; remove it to use resource")
	}
	if !src.given("principal_claim") {
		o.PrincipalClaim = DefaultPrincipalClaim
	} else if src.valid("principal_claim") {
		if msg := checkClaimName(o.PrincipalClaim); msg != "" {
			d.errorf(src.valueLine("principal_claim"), loc.field("principal_claim"), "%s", msg)
		}
	}
	if src.valid("roles_claim") {
		if msg := checkClaimName(o.RolesClaim); msg != "" {
			d.errorf(src.valueLine("roles_claim"), loc.field("roles_claim"), "%s", msg)
		}
	}

	scopes := d.src[&o.RequiredScopes]
	seen := map[string]bool{}
	for i, s := range o.RequiredScopes {
		if !scopes.itemOK(i) {
			continue
		}
		switch {
		case !scopeRE(s):
			d.errorf(scopes.itemLine(i, src.line), loc.field("required_scopes").index(i, ""),
				"%q is not a scope: one word of printable characters, without spaces, quotes or backslashes", truncate(s))
		case seen[s]:
			d.errorf(scopes.itemLine(i, src.line), loc.field("required_scopes").index(i, ""), "scope %q is listed twice", s)
		}
		seen[s] = true
	}

	if !src.given("algorithms") {
		o.Algorithms = append([]string(nil), DefaultOIDCAlgorithms...)
		return
	}
	algs := d.src[&o.Algorithms]
	if src.valid("algorithms") && len(o.Algorithms) == 0 {
		d.errorf(src.valueLine("algorithms"), loc.field("algorithms"), "is empty, which accepts no token; remove it to accept every asymmetric algorithm")
	}
	seenAlg := map[string]bool{}
	for i, a := range o.Algorithms {
		if !algs.itemOK(i) {
			continue
		}
		line, at := algs.itemLine(i, src.line), loc.field("algorithms").index(i, "")
		switch {
		case strings.EqualFold(a, "none"):
			d.errorf(line, at, "none is never accepted: an unsigned token proves nothing")
		case strings.HasPrefix(strings.ToUpper(a), "HS"):
			d.errorf(line, at, "%s is an HMAC algorithm, refused: its key is a shared secret, and a gateway that took it could be handed tokens signed with the issuer's public key as that secret; use the provider's RS, PS, ES or EdDSA keys", truncate(a))
		case !slices.Contains(DefaultOIDCAlgorithms, a):
			d.errorf(line, at, "%q is not a JWS algorithm the gateway accepts; use some of %s", truncate(a), strings.Join(DefaultOIDCAlgorithms, ", "))
		case seenAlg[a]:
			d.errorf(line, at, "%s is listed twice", a)
		}
		seenAlg[a] = true
	}
}

// checkIssuer returns what is wrong with an issuer identifier, or "".
func checkIssuer(raw string) string {
	u, problem := webURL(raw, "must be an https:// URL, such as https://idp.example.com/realms/robots", "must not carry credentials")
	switch {
	case problem != "":
		return problem
	case u.Scheme == "http" && !LoopbackHost(u.Hostname()):
		return "must be https://: the gateway fetches the keys that vouch for every token from it, and over http:// anyone on the way could hand it their own; http:// is allowed only for a loopback host (127.0.0.1, localhost), for tests and labs"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "must not have a query or a fragment (OpenID Connect Discovery, RFC 8414)"
	}
	return ""
}

// checkResource returns what is wrong with the gateway's resource identifier, or "".
func checkResource(raw string) string {
	u, problem := webURL(raw, "must be the https:// URL of the gateway's MCP endpoint as clients reach it, such as https://gw.example.com/mcp", "must not carry credentials")
	switch {
	case problem != "":
		return problem
	case u.Scheme == "http" && !LoopbackHost(u.Hostname()):
		return "must be https://: clients send their tokens to it, and over http:// anyone on the way could read them; http:// is allowed only for a loopback host, for tests and labs"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "must not have a query or a fragment (RFC 8707)"
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil && port == "" {
		return "has an empty port"
	}
	return ""
}

// checkClaimName returns what is wrong with the name of a claim, or "".
func checkClaimName(name string) string {
	switch {
	case name == "":
		return "is empty; name a claim such as sub, or remove the key"
	case len(name) > 256:
		return "is longer than 256 characters"
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return fmt.Sprintf("%q is not a claim name or a dotted path such as realm_access.roles", truncate(name))
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return fmt.Sprintf("%q holds a space or a control character, which no claim name has", truncate(name))
		}
	}
	return ""
}

// scopeRE reports whether s is a scope-token of RFC 6749: one or more of %x21 / %x23-5B /
// %x5D-7E.
func scopeRE(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
