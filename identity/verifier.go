package identity

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Bounds and intervals of a Verifier.
const (
	// MaxTokenBytes is the largest token Verify reads; a larger one is refused before it is
	// parsed. Access tokens are one to a few KB.
	MaxTokenBytes = 16 << 10
	// Leeway is the clock skew allowed between the gateway and the issuer when exp, nbf and
	// iat are checked.
	Leeway = 60 * time.Second
	// DefaultRefreshInterval is how often the keys are fetched again while all is well.
	DefaultRefreshInterval = time.Hour
	// DefaultMinRefreshGap is the least time between two fetches a token with an unknown key
	// causes: a flood of tokens naming made-up keys costs the issuer one fetch per gap.
	DefaultMinRefreshGap = 10 * time.Second
	// maxRetryDelay bounds the wait between retries while the issuer cannot be reached.
	maxRetryDelay = 5 * time.Minute
	// startWait is how long Start waits for the first fetch before it lets the gateway go on.
	startWait = 5 * time.Second
)

// Options configure a Verifier. The zero value is usable.
type Options struct {
	// HTTPClient fetches the discovery document and the keys; nil is one whose fetches are
	// bounded in time and that follows at most 3 redirects, none to plain http:// but for a
	// loopback host.
	HTTPClient *http.Client
	// Logger receives what the Verifier fetched and what it refused; nil logs nothing.
	Logger *slog.Logger
	// Reserved are principal ids a token may not claim: the gateway's static principals and
	// its own names. A token naming one is refused, so a person cannot become the operator by
	// being called "admin" at the identity provider.
	Reserved []string
	// RefreshInterval is how often the keys are fetched again (default DefaultRefreshInterval).
	RefreshInterval time.Duration
	// MinRefreshGap is the least time between two fetches that unknown keys cause (default
	// DefaultMinRefreshGap).
	MinRefreshGap time.Duration
	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
}

// Principal is who a valid token stands for.
type Principal struct {
	// ID is the principal claim's value (sub by default): principal.id in policies, the
	// principal of audit records.
	ID string
	// Roles are the roles claim's values; the IdP's role admin opens /admin.
	Roles []string
	// Scopes are the token's scopes.
	Scopes []string
	// Expiry is the token's exp.
	Expiry time.Time
}

// Verifier checks the access tokens of one issuer (auth.oidc). Its methods are safe for
// concurrent use.
type Verifier struct {
	cfg      config.OIDC
	hc       *http.Client
	log      *slog.Logger
	reserved map[string]bool
	algs     []jose.SignatureAlgorithm
	interval time.Duration
	gap      time.Duration
	now      func() time.Time

	keys atomic.Pointer[keySet] // nil until the first fetch succeeds

	ctx    context.Context // ends with Close; fetches run under it
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight chan struct{} // closed when the fetch under way ends; nil when none is
	last     time.Time     // when the last fetch began
	lastErr  error         // of the last fetch that ended
	jwksURI  string        // from the discovery document
	started  bool
}

// New is a Verifier of the issuer cfg names. It fetches nothing: Start does, or the first
// Verify. cfg is an auth.oidc section as config.Parse checked it; the defaults of audience
// (resource) and principal_claim (sub) apply to one built in code too.
func New(cfg config.OIDC, opts Options) (*Verifier, error) {
	if cfg.Audience == "" {
		cfg.Audience = cfg.Resource
	}
	if cfg.PrincipalClaim == "" {
		cfg.PrincipalClaim = config.DefaultPrincipalClaim
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("auth.oidc needs an issuer and a resource (or an audience)")
	}
	var algs []jose.SignatureAlgorithm
	for _, a := range cfg.Algorithms {
		if !slices.Contains(config.DefaultOIDCAlgorithms, a) {
			return nil, fmt.Errorf("auth.oidc.algorithms: %q is not accepted; use some of %s", a, strings.Join(config.DefaultOIDCAlgorithms, ", "))
		}
		algs = append(algs, jose.SignatureAlgorithm(a))
	}
	if len(algs) == 0 {
		for _, a := range config.DefaultOIDCAlgorithms {
			algs = append(algs, jose.SignatureAlgorithm(a))
		}
	}
	v := &Verifier{
		cfg: cfg, hc: opts.HTTPClient, log: opts.Logger, algs: algs,
		interval: opts.RefreshInterval, gap: opts.MinRefreshGap, now: opts.Now,
		reserved: map[string]bool{},
	}
	if v.hc == nil {
		v.hc = newHTTPClient()
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if v.interval <= 0 {
		v.interval = DefaultRefreshInterval
	}
	if v.gap <= 0 {
		v.gap = DefaultMinRefreshGap
	}
	if v.now == nil {
		v.now = time.Now
	}
	for _, p := range opts.Reserved {
		v.reserved[p] = true
	}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	return v, nil
}

// NewVerifier is New and Start: a Verifier that has fetched the issuer's keys, or is
// retrying in the background (the error says why the first fetch failed; the Verifier is
// usable all the same).
func NewVerifier(ctx context.Context, cfg config.OIDC, opts Options) (*Verifier, error) {
	v, err := New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return v, v.Start(ctx)
}

// Start fetches the issuer's discovery document and keys, waiting at most a few seconds,
// and keeps them fresh in the background until ctx ends or Close: every RefreshInterval, and
// while the issuer cannot be reached with a growing delay up to five minutes. The error is
// the first fetch's; tokens are answered CodeUnavailable until a fetch succeeds.
func (v *Verifier) Start(ctx context.Context) error {
	v.mu.Lock()
	if v.started {
		v.mu.Unlock()
		return nil
	}
	v.started = true
	first := v.fetchLocked()
	v.mu.Unlock()
	go v.loop(ctx, first)
	wait := time.NewTimer(startWait)
	defer wait.Stop()
	select {
	case <-first:
	case <-wait.C:
		return fmt.Errorf("the identity provider %s did not answer within %s; retrying in the background", v.cfg.Issuer, startWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastErr
}

// Close stops the background fetches.
func (v *Verifier) Close() { v.cancel() }

// loop keeps the keys fresh once the fetch first has ended.
func (v *Verifier) loop(ctx context.Context, first chan struct{}) {
	failures := 0
	for ch := first; ; {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-v.ctx.Done():
			return
		}
		v.mu.Lock()
		err := v.lastErr
		v.mu.Unlock()
		delay := v.interval
		if err != nil {
			failures++
			delay = min(maxRetryDelay, time.Duration(1<<min(failures, 9))*time.Second)
			v.log.Warn("auth.oidc: the identity provider's keys could not be fetched; its tokens are answered 503 until they are, static tokens keep working",
				"issuer", v.cfg.Issuer, "error", err.Error(), "retry_in", delay)
		} else {
			if failures > 0 {
				v.log.Info("auth.oidc: the identity provider's keys were fetched", "issuer", v.cfg.Issuer, "keys", len(v.keys.Load().keys))
			}
			failures = 0
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		case <-v.ctx.Done():
			t.Stop()
			return
		}
		v.mu.Lock()
		ch = v.inflight
		if ch == nil {
			ch = v.fetchLocked()
		}
		v.mu.Unlock()
	}
}

// fetchLocked starts a fetch of the discovery document (unless known) and the keys, and
// returns the channel closed when it ends. v.mu is held.
func (v *Verifier) fetchLocked() chan struct{} {
	ch := make(chan struct{})
	v.inflight = ch
	v.last = v.now()
	jwksURI := v.jwksURI
	go func() {
		ctx, cancel := context.WithTimeout(v.ctx, fetchTimeout)
		defer cancel()
		uri, err := v.fetch(ctx, jwksURI)
		v.mu.Lock()
		v.inflight, v.lastErr = nil, err
		if err == nil {
			v.jwksURI = uri
		}
		v.mu.Unlock()
		close(ch)
	}()
	return ch
}

// fetch reads the keys, at jwksURI or, when that is "" or fails, where the discovery
// document says; it returns the jwks_uri that served them.
func (v *Verifier) fetch(ctx context.Context, jwksURI string) (string, error) {
	var ks *keySet
	var skipped []string
	var err error
	if jwksURI != "" {
		ks, skipped, err = fetchKeys(ctx, v.hc, jwksURI)
	}
	if jwksURI == "" || err != nil {
		md, derr := discover(ctx, v.hc, v.cfg.Issuer)
		if derr != nil {
			return "", derr
		}
		jwksURI = md.JWKSURI
		if ks, skipped, err = fetchKeys(ctx, v.hc, jwksURI); err != nil {
			return "", err
		}
	}
	for _, s := range skipped {
		v.log.Warn("auth.oidc: a key of the identity provider is not used", "issuer", v.cfg.Issuer, "key", s)
	}
	if len(ks.keys) == 0 {
		return "", fmt.Errorf("%s holds no key the gateway can verify with (RSA of 2048 bits or more, EC P-256/P-384/P-521, Ed25519, for signing)", jwksURI)
	}
	v.keys.Store(ks)
	v.log.Debug("auth.oidc: keys fetched", "issuer", v.cfg.Issuer, "jwks_uri", jwksURI, "keys", len(ks.keys))
	return jwksURI, nil
}

// refreshKeys fetches the keys again because a token named one not known, unless a fetch
// began less than MinRefreshGap ago; it waits for the fetch under way, if any, or until ctx
// ends. It reports the error of the last fetch.
func (v *Verifier) refreshKeys(ctx context.Context) error {
	v.mu.Lock()
	ch := v.inflight
	if ch == nil {
		if v.now().Sub(v.last) < v.gap && !v.last.IsZero() {
			err := v.lastErr
			v.mu.Unlock()
			return err
		}
		ch = v.fetchLocked()
	}
	v.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastErr
}

// Issuer is the issuer whose tokens v checks.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// header is what Verify reads of a token's JOSE header before it is verified.
type header struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Typ  string          `json:"typ"`
	Crit json.RawMessage `json:"crit"`
}

// LooksLikeJWT reports whether token has the shape of a compact JWS: three base64url parts,
// the first a JSON object. A static token of auth.tokens almost never has it.
func LooksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2 && strings.HasPrefix(token, "eyJ")
}

// Verify checks token and returns its principal, or an *Error saying why it is refused.
func (v *Verifier) Verify(ctx context.Context, token string) (*Principal, error) {
	p, err := v.verify(ctx, token)
	if err != nil {
		switch err.Code {
		case CodeMalformed, CodeTooLarge, CodeAlgorithm, CodeType, CodeSignature, CodeUnknownKey:
			// What anyone can send without a token of the issuer's: not worth a line each.
			v.log.Debug("auth.oidc: token refused", "code", string(err.Code), "reason", err.Description)
		case CodeUnavailable:
			v.log.Debug("auth.oidc: token not checked", "code", string(err.Code), "reason", err.Description)
		default:
			v.log.Info("auth.oidc: token refused", "code", string(err.Code), "reason", err.Description)
		}
		return nil, err
	}
	return p, nil
}

func (v *Verifier) verify(ctx context.Context, token string) (*Principal, *Error) {
	if len(token) > MaxTokenBytes {
		return nil, refuse(CodeTooLarge, fmt.Sprintf("the token is longer than %d bytes", MaxTokenBytes))
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, refuse(CodeMalformed, "the token is not a JWT (three base64url parts separated by dots)")
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, refuse(CodeMalformed, "the token's header is not base64url")
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil {
		return nil, refuse(CodeMalformed, "the token's header is not a JSON object")
	}
	if msg := v.checkAlg(h.Alg); msg != "" {
		return nil, refuse(CodeAlgorithm, msg)
	}
	if len(h.Crit) > 0 {
		return nil, refuse(CodeType, "the token's header has critical parameters (crit), which the gateway does not understand")
	}
	if !typeAllowed(h.Typ) {
		return nil, refuse(CodeType, fmt.Sprintf("the token's type is %q; an access token is at+jwt (RFC 9068) or JWT", clip(h.Typ, 40)))
	}
	tok, err := jwt.ParseSigned(token, v.algs)
	if err != nil {
		return nil, refuse(CodeMalformed, "the token is not a signed JWT the gateway can read")
	}

	// The keys that may have signed it; when none is known, the keys are fetched again (a
	// rotation at the provider), at most once per MinRefreshGap.
	ks := v.keys.Load()
	cands := ks.candidates(h.Kid, h.Alg)
	if len(cands) == 0 {
		ferr := v.refreshKeys(ctx)
		ks = v.keys.Load()
		cands = ks.candidates(h.Kid, h.Alg)
		if len(cands) == 0 {
			switch {
			case ks == nil || (ferr != nil && h.Kid != ""):
				// Why the fetch failed is the gateway's log's to say, not every caller's.
				return nil, refuse(CodeUnavailable, "the identity provider's keys could not be fetched, so the token cannot be checked now; retry later")
			case h.Kid != "" && ks.has(h.Kid):
				return nil, refuse(CodeAlgorithm, fmt.Sprintf("the token's key %q is not one for %s", clip(h.Kid, 64), h.Alg))
			case h.Kid != "":
				return nil, refuse(CodeUnknownKey, fmt.Sprintf("the token is signed with key %q, which the issuer does not publish", clip(h.Kid, 64)))
			default:
				return nil, refuse(CodeUnknownKey, fmt.Sprintf("the token names no key, and the issuer publishes none for %s", h.Alg))
			}
		}
	}
	var payload json.RawMessage
	verified := false
	for _, k := range cands {
		if tok.Claims(k.pub, &payload) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, refuse(CodeSignature, "the token's signature does not verify with the issuer's key: it was altered, or signed by someone else")
	}
	return v.checkClaims(payload)
}

// checkAlg says why a token signed with alg is refused, or "".
func (v *Verifier) checkAlg(alg string) string {
	switch {
	case alg == "":
		return "the token's header names no algorithm"
	case strings.EqualFold(alg, "none"):
		return "the token is not signed (alg none)"
	case strings.HasPrefix(strings.ToUpper(alg), "HS"):
		return fmt.Sprintf("the token is signed with %s, an HMAC algorithm, which the gateway never accepts", clip(alg, 16))
	case !slices.Contains(v.algs, jose.SignatureAlgorithm(alg)):
		return fmt.Sprintf("the token is signed with %s, which auth.oidc.algorithms does not accept", clip(alg, 16))
	}
	return ""
}

// typeAllowed reports whether typ, a token's typ header, is that of an access token: at+jwt
// (RFC 9068), JWT, or none at all.
func typeAllowed(typ string) bool {
	t := strings.ToLower(strings.TrimPrefix(strings.ToLower(typ), "application/"))
	return typ == "" || t == "at+jwt" || t == "jwt"
}

// checkClaims checks the claims of a token whose signature verified.
func (v *Verifier) checkClaims(payload []byte) (*Principal, *Error) {
	var std jwt.Claims
	if err := json.Unmarshal(payload, &std); err != nil {
		return nil, refuse(CodeMalformed, "the token's registered claims (iss, aud, exp, nbf, iat) are not of their types")
	}
	claims := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return nil, refuse(CodeMalformed, "the token's claims are not a JSON object")
	}
	if std.Issuer != v.cfg.Issuer {
		return nil, refuse(CodeIssuer, fmt.Sprintf("the token was issued by %q, not by %s (auth.oidc.issuer)", clip(std.Issuer, 100), v.cfg.Issuer))
	}
	if !std.Audience.Contains(v.cfg.Audience) {
		aud := make([]string, 0, 3)
		for i, a := range std.Audience {
			if i == 3 {
				aud = append(aud, "...")
				break
			}
			aud = append(aud, clip(a, 100))
		}
		return nil, refuse(CodeAudience, fmt.Sprintf("the token is for audience %s, not for this gateway (%s): request it for resource %s",
			strings.Join(aud, " "), v.cfg.Audience, v.cfg.Resource))
	}
	now := v.now()
	switch {
	case std.Expiry == nil:
		return nil, refuse(CodeExpired, "the token has no exp claim; the gateway takes only tokens that expire")
	case now.Add(-Leeway).After(std.Expiry.Time()):
		return nil, refuse(CodeExpired, fmt.Sprintf("the token expired at %s; get a new one", std.Expiry.Time().UTC().Format(time.RFC3339)))
	case std.NotBefore != nil && now.Add(Leeway).Before(std.NotBefore.Time()):
		return nil, refuse(CodeNotYetValid, fmt.Sprintf("the token is not valid before %s (nbf)", std.NotBefore.Time().UTC().Format(time.RFC3339)))
	case std.IssuedAt != nil && now.Add(Leeway).Before(std.IssuedAt.Time()):
		return nil, refuse(CodeNotYetValid, fmt.Sprintf("the token was issued in the future (iat %s): the clocks of the gateway and the identity provider differ",
			std.IssuedAt.Time().UTC().Format(time.RFC3339)))
	}
	id, perr := principalOf(claims, v.cfg.PrincipalClaim)
	if perr != nil {
		return nil, perr
	}
	if v.reserved[id] {
		return nil, refuse(CodePrincipal, fmt.Sprintf("the token names principal %q, which is one of the gateway's own or of auth.tokens; the identity provider cannot stand for it", clip(id, 64)))
	}
	roles, rerr := rolesOf(claims, v.cfg.RolesClaim)
	if rerr != nil {
		return nil, rerr
	}
	scopes := scopesOf(claims)
	var missing []string
	for _, s := range v.cfg.RequiredScopes {
		if !slices.Contains(scopes, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		e := refuse(CodeInsufficientScope, fmt.Sprintf("the token lacks scope %s, which this gateway requires", strings.Join(missing, " ")))
		e.Scope = strings.Join(v.cfg.RequiredScopes, " ")
		return nil, e
	}
	return &Principal{ID: id, Roles: roles, Scopes: scopes, Expiry: std.Expiry.Time()}, nil
}
