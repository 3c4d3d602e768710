// Package identity makes the gateway an OAuth 2.1 resource server (the MCP authorization
// spec, RFC 9068, RFC 8707, RFC 9728): it checks the JWT access tokens an OpenID Connect
// identity provider issues, and describes the gateway to clients that must sign in.
//
// A Verifier reads the issuer's discovery document (/.well-known/openid-configuration, or the
// RFC 8414 /.well-known/oauth-authorization-server) and its JSON Web Key Set when it starts,
// keeps them, fetches the keys again every hour and when a token names a key it does not know
// (at most once every ten seconds, one fetch for every caller waiting), and retries in the
// background while the issuer cannot be reached. Every fetch is bounded: its time, the size of
// the answer, the number of keys. Only asymmetric public keys are ever used (RSA of 2048 bits
// or more, ECDSA P-256, P-384 and P-521, Ed25519); a key whose alg or use says otherwise is
// skipped.
//
// Verify takes a token as it came in an Authorization header: at most MaxTokenBytes, signed
// with an algorithm of auth.oidc.algorithms (never none, never HMAC) by a key of the issuer's
// set, issued by the issuer for the gateway's audience, within its exp, nbf and iat (with
// Leeway), of type at+jwt or JWT, naming a principal that is not reserved, and carrying the
// required scopes. What it finds wrong is an *Error whose description says what, never the
// token.
package identity
