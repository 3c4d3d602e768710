package upstream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// An HTTP server with servers[].oauth gets the gateway's own access token, by the OAuth client
// credentials grant at its token_url, as the bearer token of every request to its origin. The
// requests are the gateway's own (the SDK's streamable client builds them): nothing of a
// downstream client's request, its Authorization header least of all, is copied onto them, so
// a client's token never reaches an upstream (no token passthrough).
//
// The token is cached per server, across sessions, until shortly before it expires
// (renewMargin); one request to the token endpoint at a time gets the next, and every request
// that needs it waits for that one. A 401 from the server drops the token it refused, and the
// request is sent once more with a new one. That resend is safe for every message, tools/call
// on a physical server included: the streamable HTTP transport sends each JSON-RPC message as
// its own POST, and a 401 is the server refusing that POST's credentials before it took the
// message (RFC 9110 §15.5.2, RFC 6750 §3.1; the MCP authorization specification has the server
// validate the token of every request before it handles it). A 401 answer is the whole answer:
// the message was not accepted, so nothing ran and it cannot run twice. The same holds for the
// second 401, so that one fails the request as not sent too (a TokenError), as does a token the
// endpoint did not give: the call is answered upstream_unavailable at once, without waiting
// for its deadline and without taking the session down.

// TokenError says a request to an HTTP server was not sent because the gateway had no access
// token the server takes: the token endpoint did not give one (Refused false), or the server
// answered 401 to a new one too (Refused true). It never holds the client secret or a token.
type TokenError struct {
	Server string
	// Refused: the server refused the gateway's token also after a new one was fetched.
	Refused bool
	// Reason says what the token endpoint or the server answered.
	Reason string
	cause  error // the call's context error when the call ended while it waited for the token
}

func (e *TokenError) Error() string {
	if e.Refused {
		return fmt.Sprintf("server %q refused the gateway's access token (HTTP 401) also after a new one from its token_url: %s", e.Server, e.Reason)
	}
	return fmt.Sprintf("the gateway could not get a token for server %q from its token_url: %s", e.Server, e.Reason)
}

// Unwrap is the context error of a call that ended while it waited for the token, else nil.
func (e *TokenError) Unwrap() error { return e.cause }

// tokenError returns the TokenError in err, or nil.
func tokenError(err error) *TokenError {
	var te *TokenError
	if errors.As(err, &te) {
		return te
	}
	return nil
}

// Longest the gateway keeps using a token: it is replaced renewMargin before its expiry, or a
// quarter of its lifetime before when that is shorter.
const renewMargin = 30 * time.Second

// tokenSource gets and caches one server's access token. Its methods are safe for concurrent use.
type tokenSource struct {
	server  string
	conf    *clientcredentials.Config
	secret  string // to recognise a changed variable, and to keep it out of messages
	env     string // the variable it is read from, for messages
	timeout time.Duration
	client  *http.Client // to the token endpoint: its own timeout, no redirects
	log     *slog.Logger

	mu      sync.Mutex
	tok     *oauth2.Token
	renewAt time.Time   // when the cached token is replaced
	retryAt time.Time   // the next attempt after a failed renewal of a token still valid
	pending *tokenFetch // the request to the token endpoint in progress, if any
	issued  []string    // the tokens got, to keep them out of messages; bounded

	fetches atomic.Int64 // requests to the token endpoint, for tests
}

// tokenFetch is one request to the token endpoint; done is closed when tok or err is set.
type tokenFetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// tokenSource returns the server's token source, made at the first connection and kept while
// the client secret stays the same. The secret is read from its variable at every connection,
// so a rotated one is picked up by a restart of the server.
func (u *Upstream) tokenSource(o *config.UpstreamOAuth) (*tokenSource, error) {
	secret := os.Getenv(o.ClientSecretEnv)
	if secret == "" {
		return nil, fmt.Errorf("oauth.client_secret_env names the environment variable %s, which is not set (or empty); set it to the client secret of client_id %q at the token endpoint",
			o.ClientSecretEnv, o.ClientID)
	}
	if ts := u.tokens; ts != nil && ts.secret == secret {
		return ts, nil
	}
	params := url.Values{}
	if o.Resource != "" {
		params.Set("resource", o.Resource) // RFC 8707
	}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	timeout := o.TokenTimeout()
	u.tokens = &tokenSource{
		server: u.cfg.Name,
		conf: &clientcredentials.Config{
			ClientID:       o.ClientID,
			ClientSecret:   secret,
			TokenURL:       o.TokenURL,
			Scopes:         o.Scopes,
			EndpointParams: params,
		},
		secret:  secret,
		env:     o.ClientSecretEnv,
		timeout: timeout,
		client: &http.Client{
			Transport: u.httpTransport,
			Timeout:   timeout,
			// A redirect would send the credentials of a POST on to wherever it points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log: u.log,
	}
	return u.tokens, nil
}

// token returns the cached token, or waits for a new one within ctx. A token past its renewal
// time but not expired is returned at once while the next one is got in the background.
func (ts *tokenSource) token(ctx context.Context) (*oauth2.Token, error) {
	now := time.Now()
	ts.mu.Lock()
	tok, f := ts.tok, ts.pending
	if tok != nil && now.Before(ts.renewAt) {
		ts.mu.Unlock()
		return tok, nil
	}
	valid := tok != nil && now.Before(tok.Expiry)
	if f == nil && (!valid || !now.Before(ts.retryAt)) {
		f = &tokenFetch{done: make(chan struct{})}
		ts.pending = f
		go ts.run(f) // not under ctx: the requests waiting with it may have other deadlines
	}
	ts.mu.Unlock()
	if valid {
		return tok, nil
	}
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, &TokenError{Server: ts.server, cause: ctx.Err(),
			Reason: fmt.Sprintf("the request ended (%v) while it waited for the token", ctx.Err())}
	}
}

// retryAfter is how long a token that is still valid is used after a failed renewal before the
// next attempt.
const retryAfter = 2 * time.Second

// run makes the request f stands for and caches what it got.
func (ts *tokenSource) run(f *tokenFetch) {
	tok, err := ts.fetch()
	now := time.Now()
	ts.mu.Lock()
	switch {
	case err == nil:
		ts.tok, ts.renewAt = tok, renewAt(now, tok.Expiry)
		ts.issued = append(ts.issued, tok.AccessToken)
		if len(ts.issued) > 8 {
			ts.issued = ts.issued[1:]
		}
	case ts.tok != nil && now.Before(ts.tok.Expiry):
		ts.retryAt = now.Add(retryAfter)
		ts.log.Warn("could not renew the access token for the server; the current one is used until it expires",
			"error", err.Error(), "expires_in", ts.tok.Expiry.Sub(now).Round(time.Second))
	default:
		ts.log.Warn("could not get an access token for the server", "error", err.Error())
	}
	ts.pending = nil
	ts.mu.Unlock()
	f.tok, f.err = tok, err
	close(f.done)
}

// fetch makes one request to the token endpoint.
func (ts *tokenSource) fetch() (*oauth2.Token, error) {
	ts.fetches.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), ts.timeout)
	defer cancel()
	tok, err := ts.conf.Token(context.WithValue(ctx, oauth2.HTTPClient, ts.client))
	if err != nil {
		return nil, &TokenError{Server: ts.server, Reason: ts.redact(ts.explain(err))}
	}
	if !strings.EqualFold(tok.Type(), "Bearer") {
		return nil, &TokenError{Server: ts.server, Reason: fmt.Sprintf(
			"the token endpoint issued a token of type %q; the gateway sends bearer tokens only", clean(tok.Type(), 40))}
	}
	ts.log.Debug("got an access token for the server", "expires_in", expiresIn(tok))
	return tok, nil
}

// invalidate drops tok if it is still the cached token: the server refused it.
func (ts *tokenSource) invalidate(tok *oauth2.Token) {
	ts.mu.Lock()
	if ts.tok == tok {
		ts.tok = nil
	}
	ts.mu.Unlock()
}

// renewAt is when a token got at now that expires at expiry is replaced. One without an expiry
// (no expires_in) is kept until the server refuses it.
func renewAt(now, expiry time.Time) time.Time {
	if expiry.IsZero() {
		return now.Add(100 * 365 * 24 * time.Hour)
	}
	margin := max(min(renewMargin, expiry.Sub(now)/4), 0)
	return expiry.Add(-margin)
}

func expiresIn(tok *oauth2.Token) string {
	if tok.Expiry.IsZero() {
		return "unknown"
	}
	return time.Until(tok.Expiry).Round(time.Second).String()
}

// explain says why a token request failed. The body of the endpoint's answer is never
// repeated (it could echo what was sent); only RFC 6749's error code and description are.
func (ts *tokenSource) explain(err error) string {
	var re *oauth2.RetrieveError
	var ne net.Error
	switch {
	case errors.As(err, &re):
		msg := "the token endpoint refused the request"
		if re.Response != nil {
			msg = fmt.Sprintf("the token endpoint answered HTTP %d", re.Response.StatusCode)
		}
		if re.ErrorCode != "" {
			msg += " with error " + clean(re.ErrorCode, 60)
			if d := clean(re.ErrorDescription, 200); d != "" {
				msg += " (" + d + ")"
			}
		}
		switch {
		case re.ErrorCode == "invalid_client":
			msg += fmt.Sprintf("; check oauth.client_id %q and the client secret in %s", ts.conf.ClientID, ts.env)
		case re.ErrorCode == "unauthorized_client":
			msg += "; the client may not use the client credentials grant at this authorization server"
		case re.ErrorCode == "invalid_scope":
			msg += "; check oauth.scopes"
		case re.ErrorCode == "invalid_target":
			msg += "; check oauth.resource"
		case re.Response != nil && re.Response.StatusCode >= 300 && re.Response.StatusCode < 400:
			msg += "; redirects are not followed: give the endpoint's final URL as oauth.token_url"
		}
		return msg
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("the token endpoint did not answer within %s (oauth.timeout)", ts.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the token endpoint could not be reached: " + ue.Err.Error()
	}
	return err.Error()
}

// redact replaces the client secret, in the forms a request carries it, and the tokens got
// by [REDACTED].
func (ts *tokenSource) redact(s string) string {
	secrets := []string{ts.secret, url.QueryEscape(ts.secret),
		base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(ts.conf.ClientID) + ":" + url.QueryEscape(ts.secret)))}
	ts.mu.Lock()
	secrets = append(secrets, ts.issued...)
	ts.mu.Unlock()
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

// clean keeps a string from another party printable and short.
func clean(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if len(s) > limit {
		s = truncateUTF8(s, limit) + "…"
	}
	return strings.TrimSpace(s)
}

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// oauthTransport sends the server's token on every request to the server's origin, and on no
// other: a redirect elsewhere never receives it.
type oauthTransport struct {
	base   http.RoundTripper
	origin string
	tokens *tokenSource
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if origin(req.URL) != t.origin {
		return t.base.RoundTrip(req)
	}
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, also when it fails
		}
	}
	tok, err := t.tokens.token(req.Context())
	if err != nil {
		closeBody()
		return nil, err
	}
	resp, err := t.base.RoundTrip(withToken(req, req.Body, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	// Refused: the server did not take the request (see the top of this file). Once more,
	// with a new token.
	discard(resp)
	t.tokens.invalidate(tok)
	body := req.Body
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, &TokenError{Server: t.tokens.server, Refused: true, Reason: "the request cannot be sent again (its body cannot be read twice)"}
		}
		if body, err = req.GetBody(); err != nil {
			return nil, &TokenError{Server: t.tokens.server, Refused: true, Reason: "the request cannot be sent again: " + err.Error()}
		}
	}
	if tok, err = t.tokens.token(req.Context()); err != nil {
		if body != nil {
			_ = body.Close()
		}
		return nil, err
	}
	resp, err = t.base.RoundTrip(withToken(req, body, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	challenge := resp.Header.Get("WWW-Authenticate")
	discard(resp)
	t.tokens.invalidate(tok)
	reason := "check that oauth's scopes, resource and audience get a token this server takes"
	if challenge != "" {
		reason = "it answered WWW-Authenticate: " + t.tokens.redact(clean(challenge, 300)) + "; " + reason
	}
	return nil, &TokenError{Server: t.tokens.server, Refused: true, Reason: reason}
}

// withToken is a copy of req with body and tok's Authorization header; a RoundTripper must not
// modify the request it was given.
func withToken(req *http.Request, body io.ReadCloser, tok *oauth2.Token) *http.Request {
	r := req.Clone(req.Context())
	r.Body = body
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return r
}

// discard reads a little of an answer that is not used, so the connection can be reused, and
// closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}
