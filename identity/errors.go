package identity

import (
	"errors"
	"strings"
)

// Code says what was wrong with a token.
type Code string

// What Verify refuses a token for.
const (
	// CodeMalformed: not a compact JWS, or a header or payload that is not JSON.
	CodeMalformed Code = "malformed"
	// CodeTooLarge: more than MaxTokenBytes.
	CodeTooLarge Code = "too_large"
	// CodeAlgorithm: signed with an algorithm not accepted (none, HMAC, or one not in
	// auth.oidc.algorithms).
	CodeAlgorithm Code = "algorithm_not_allowed"
	// CodeType: a typ header other than at+jwt or JWT, or a critical header parameter.
	CodeType Code = "wrong_type"
	// CodeUnknownKey: signed by a key the issuer does not publish, after fetching its keys again.
	CodeUnknownKey Code = "unknown_key"
	// CodeSignature: the signature does not verify with the issuer's key.
	CodeSignature Code = "bad_signature"
	// CodeIssuer: iss is not the configured issuer.
	CodeIssuer Code = "wrong_issuer"
	// CodeAudience: aud does not contain the gateway's audience.
	CodeAudience Code = "wrong_audience"
	// CodeExpired: exp is missing or past (beyond Leeway).
	CodeExpired Code = "expired"
	// CodeNotYetValid: nbf or iat is in the future (beyond Leeway).
	CodeNotYetValid Code = "not_yet_valid"
	// CodePrincipal: the principal claim is missing, not a string, empty, too long, or names a
	// reserved principal; or the roles claim is not a string or an array of strings.
	CodePrincipal Code = "bad_principal"
	// CodeInsufficientScope: a valid token that lacks a required scope (HTTP 403).
	CodeInsufficientScope Code = "insufficient_scope"
	// CodeUnavailable: the issuer's keys could not be fetched, so the token cannot be checked
	// now (HTTP 503: retry later).
	CodeUnavailable Code = "issuer_unavailable"
)

// Error is why Verify refused a token.
type Error struct {
	Code Code
	// Description says what was wrong, for the caller and the log. It never holds the token,
	// and is safe in a quoted-string of a WWW-Authenticate header.
	Description string
	// Scope is, for CodeInsufficientScope, the scopes required (space-separated).
	Scope string
}

func (e *Error) Error() string { return e.Description }

func refuse(code Code, description string) *Error {
	return &Error{Code: code, Description: headerSafe(description)}
}

// ErrorOf is the *Error in err's chain, or nil.
func ErrorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// headerSafe is s with what a quoted-string of an HTTP header cannot hold replaced: RFC 6750
// allows %x20-21 / %x23-5B / %x5D-7E in error_description. Values a token carries (its kid,
// its aud) pass through here, so it must also keep them from ending the header.
func headerSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			b.WriteByte('\'')
		case c == '\\' || c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// clip is v cut to at most n bytes, for values a token carries that a description repeats.
func clip(v string, n int) string {
	if len(v) <= n {
		return v
	}
	return v[:n] + "..."
}
