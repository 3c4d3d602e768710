// Package identitytest runs a real OpenID provider in the test's process, for the tests of
// package identity and of the gateway's sign-in: zitadel/oidc's op package (discovery, the
// JWKS, the token endpoint, signing) over the storage of zitadel/oidc's example server. The
// storage is the part a deployment writes itself; this one adds what the example's lacks: a
// confidential service client that gets JWT access tokens by the client-credentials grant,
// for the audience, subject, lifetime and claims a test sets, under a signing key the test can
// rotate.
package identitytest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// The provider's service client.
const (
	ClientID     = "robot-planner"
	ClientSecret = "planner-secret-0123456789"
)

// Settings are what the provider puts in the access tokens it issues from now on.
type Settings struct {
	// Audience is the tokens' aud.
	Audience []string
	// Subject is their sub (default ClientID).
	Subject string
	// Lifetime is from issue to exp (default five minutes; negative for expired tokens).
	Lifetime time.Duration
	// Claims are added to every token.
	Claims map[string]any
}

// Provider is an OpenID provider served over httptest on a loopback address.
type Provider struct {
	// Issuer is its issuer identifier, its URL.
	Issuer string

	srv        *httptest.Server
	st         *opStorage
	keyFetches atomic.Int64
	down       atomic.Bool
	only8414   atomic.Bool
}

// NewProvider starts a provider issuing tokens for audience, signed with a new RS256 key; it
// stops when the test ends.
func NewProvider(t testing.TB, audience string) *Provider {
	t.Helper()
	p := &Provider{}
	p.st = &opStorage{
		Storage: storage.NewStorage(storage.NewUserStore("http://127.0.0.1/")),
		set:     Settings{Audience: []string{audience}, Lifetime: 5 * time.Minute, Subject: ClientID},
		key:     NewRSAKey(t),
	}
	var handler atomic.Pointer[http.Handler]
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/keys" {
			p.keyFetches.Add(1)
		}
		if p.only8414.Load() {
			switch r.URL.Path {
			case "/.well-known/openid-configuration":
				http.NotFound(w, r)
				return
			case "/.well-known/oauth-authorization-server":
				r = r.Clone(r.Context())
				r.URL.Path = "/.well-known/openid-configuration"
			}
		}
		(*handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte("identitytest")), CryptoKeyId: "aes1"}
	h, err := op.NewProvider(cfg, p.st, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	var hh http.Handler = h
	handler.Store(&hh)
	return p
}

// Token gets an access token by the client-credentials grant, asking for scopes.
func (p *Provider) Token(t testing.TB, scopes ...string) string {
	t.Helper()
	tok, err := p.TryToken(scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TryToken is Token, returning its error.
func (p *Provider) TryToken(scopes ...string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	req, _ := http.NewRequest(http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(ClientID, ClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tr oidc.AccessTokenResponse
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", errors.New("token endpoint answered " + resp.Status + ": " + string(body))
	}
	return tr.AccessToken, nil
}

// Set changes what the tokens issued from now on say.
func (p *Provider) Set(f func(*Settings)) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	f(&p.st.set)
}

// Issue is a token issued under the settings f makes, which apply to it alone.
func (p *Provider) Issue(t testing.TB, f func(*Settings), scopes ...string) string {
	t.Helper()
	p.st.mu.Lock()
	saved := p.st.set
	saved.Claims = maps.Clone(saved.Claims)
	f(&p.st.set)
	p.st.mu.Unlock()
	defer func() {
		p.st.mu.Lock()
		p.st.set = saved
		p.st.mu.Unlock()
	}()
	return p.Token(t, scopes...)
}

// Rotate makes k the provider's only key: it signs from now on, and the JWKS holds it alone.
func (p *Provider) Rotate(k *SigningKey) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.key = k
}

// Key is the key the provider signs with.
func (p *Provider) Key() *SigningKey {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.key
}

// KeyFetches is how many times its JWKS was requested.
func (p *Provider) KeyFetches() int64 { return p.keyFetches.Load() }

// SetDown makes every request answer 503 (true) or be served again (false).
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Only8414 serves the metadata at the RFC 8414 path alone, the OpenID configuration 404.
func (p *Provider) Only8414(on bool) { p.only8414.Store(on) }

// SigningKey is a key of the provider: its private half signs, its public half is in the JWKS.
type SigningKey struct {
	KID     string
	Alg     jose.SignatureAlgorithm
	Private crypto.Signer
}

// SignatureAlgorithm, Key and ID make it an op.SigningKey.
func (k *SigningKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.Alg }

// Key is the private key.
func (k *SigningKey) Key() any { return k.Private }

// ID is the key's kid.
func (k *SigningKey) ID() string { return k.KID }

type publicKey struct{ k *SigningKey }

func (p publicKey) ID() string                         { return p.k.KID }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.Alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.Private.Public() }

// NewRSAKey is a new RS256 key of 2048 bits.
func NewRSAKey(t testing.TB) *SigningKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &SigningKey{KID: uuid.NewString(), Alg: jose.RS256, Private: k}
}

// NewECKey is a new ES256 key.
func NewECKey(t testing.TB) *SigningKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &SigningKey{KID: uuid.NewString(), Alg: jose.ES256, Private: k}
}

// NewEdKey is a new EdDSA (Ed25519) key.
func NewEdKey(t testing.TB) *SigningKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &SigningKey{KID: uuid.NewString(), Alg: jose.EdDSA, Private: k}
}

// Sign is a token of claims signed with k (its kid in the header, typ JWT, and the extra
// header parameters): one the test makes itself, not the provider.
func Sign(t testing.TB, k *SigningKey, claims map[string]any, extra map[jose.HeaderKey]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	for name, v := range extra {
		opts = opts.WithHeader(name, v)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: &jose.JSONWebKey{Key: k.Private, KeyID: k.KID}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// opStorage is the example storage with a JWT service client and a rotatable key.
type opStorage struct {
	*storage.Storage
	mu  sync.Mutex
	key *SigningKey
	set Settings
}

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, nil
}

func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []jose.SignatureAlgorithm{s.key.Alg}, nil
}

func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []op.Key{publicKey{s.key}}, nil
}

func (s *opStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	if id != ClientID || secret != ClientSecret {
		return nil, errors.New("wrong client or secret")
	}
	return serviceClient{}, nil
}

func (s *opStorage) ClientCredentialsTokenRequest(_ context.Context, _ string, scopes []string) (op.TokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &oidc.JWTTokenRequest{Subject: s.set.Subject, Audience: s.set.Audience, Scopes: scopes}, nil
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, _, err := s.Storage.CreateAccessToken(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	return id, time.Now().Add(s.set.Lifetime), err
}

// GetPrivateClaimsFromScopes adds the settings' claims and the scopes granted (the scope
// claim of RFC 9068, which zitadel/oidc leaves to the storage).
func (s *opStorage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	claims := maps.Clone(s.set.Claims)
	if claims == nil {
		claims = map[string]any{}
	}
	if scope := strings.Join(scopes, " "); strings.TrimSpace(scope) != "" {
		claims["scope"] = scope
	}
	return claims, nil
}

// serviceClient is a confidential client of the client-credentials grant whose access tokens
// are JWTs.
type serviceClient struct{}

func (serviceClient) GetID() string                       { return ClientID }
func (serviceClient) RedirectURIs() []string              { return nil }
func (serviceClient) PostLogoutRedirectURIs() []string    { return nil }
func (serviceClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (serviceClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (serviceClient) ResponseTypes() []oidc.ResponseType  { return nil }
func (serviceClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (serviceClient) LoginURL(string) string               { return "" }
func (serviceClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (serviceClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (serviceClient) DevMode() bool                        { return false }
func (serviceClient) IsScopeAllowed(string) bool           { return true }
func (serviceClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (serviceClient) ClockSkew() time.Duration             { return 0 }
func (serviceClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (serviceClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
