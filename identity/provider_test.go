package identity_test

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

// A real OpenID provider in the test's process: zitadel/oidc's op package (discovery, JWKS,
// token endpoint, signing), over the example storage of its example server. The storage is the
// part a deployment writes itself; the test's adds what the example's lacks: a service client
// that gets JWT access tokens by the client-credentials grant, for an audience the test picks,
// with the roles and scopes the test gives, under a signing key the test can rotate.

const (
	clientID     = "robot-planner"
	clientSecret = "planner-secret-0123456789"
)

type provider struct {
	t      *testing.T
	srv    *httptest.Server
	issuer string
	st     *opStorage
	// keyFetches counts the requests for the JWKS; down makes every request fail with 503.
	keyFetches atomic.Int64
	down       atomic.Bool
	// only8414 serves the metadata at the RFC 8414 path only.
	only8414 atomic.Bool
}

// newProvider starts an OP signing with an RS256 key, its tokens for audience, lasting five
// minutes.
func newProvider(t *testing.T, audience string) *provider {
	t.Helper()
	p := &provider{t: t}
	p.st = &opStorage{
		Storage:  storage.NewStorage(storage.NewUserStore("http://127.0.0.1/")),
		audience: []string{audience},
		lifetime: 5 * time.Minute,
		subject:  clientID,
	}
	p.st.rotate(newRSAKey(t))
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
	p.issuer = p.srv.URL
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte("test")), CryptoKeyId: "aes1"}
	h, err := op.NewProvider(cfg, p.st, op.StaticIssuer(p.issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	var hh http.Handler = h
	handler.Store(&hh)
	return p
}

// token gets an access token by the client-credentials grant, asking for scopes.
func (p *provider) token(scopes ...string) string {
	p.t.Helper()
	tok, err := p.tryToken(scopes...)
	if err != nil {
		p.t.Fatal(err)
	}
	return tok
}

func (p *provider) tryToken(scopes ...string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	req, _ := http.NewRequest(http.MethodPost, p.issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(clientID, clientSecret)
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

// signingKey is a key of the OP: its private half signs, its public half is in the JWKS.
type signingKey struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *signingKey) Key() any                                    { return k.priv }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.priv.Public() }

func newRSAKey(t *testing.T) *signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKey{id: uuid.NewString(), alg: jose.RS256, priv: k}
}

func newECKey(t *testing.T) *signingKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKey{id: uuid.NewString(), alg: jose.ES256, priv: k}
}

func newEdKey(t *testing.T) *signingKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKey{id: uuid.NewString(), alg: jose.EdDSA, priv: k}
}

// opStorage is the example storage with a JWT service client and a rotatable key.
type opStorage struct {
	*storage.Storage
	mu       sync.Mutex
	key      *signingKey
	audience []string
	lifetime time.Duration
	subject  string
	claims   map[string]any // private claims of every access token
}

// rotate makes k the OP's only key: it signs from now on, and the JWKS holds it alone.
func (s *opStorage) rotate(k *signingKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = k
}

func (s *opStorage) set(f func(s *opStorage)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, nil
}

func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []jose.SignatureAlgorithm{s.key.alg}, nil
}

func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []op.Key{publicKey{s.key}}, nil
}

func (s *opStorage) ClientCredentials(_ context.Context, id, secret string) (op.Client, error) {
	if id != clientID || secret != clientSecret {
		return nil, errors.New("wrong client or secret")
	}
	return serviceClient{}, nil
}

func (s *opStorage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &oidc.JWTTokenRequest{Subject: s.subject, Audience: s.audience, Scopes: scopes}, nil
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, _, err := s.Storage.CreateAccessToken(ctx, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	return id, time.Now().Add(s.lifetime), err
}

func (s *opStorage) GetPrivateClaimsFromScopes(_ context.Context, _, _ string, scopes []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	claims := map[string]any{}
	for k, v := range s.claims {
		claims[k] = v
	}
	if scope := strings.Join(scopes, " "); strings.TrimSpace(scope) != "" {
		claims["scope"] = scope
	}
	return claims, nil
}

// serviceClient is a confidential client of the client-credentials grant whose access tokens
// are JWTs.
type serviceClient struct{}

func (serviceClient) GetID() string                      { return clientID }
func (serviceClient) RedirectURIs() []string             { return nil }
func (serviceClient) PostLogoutRedirectURIs() []string   { return nil }
func (serviceClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (serviceClient) AuthMethod() oidc.AuthMethod        { return oidc.AuthMethodBasic }
func (serviceClient) ResponseTypes() []oidc.ResponseType { return nil }
func (serviceClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (serviceClient) LoginURL(string) string                { return "" }
func (serviceClient) AccessTokenType() op.AccessTokenType   { return op.AccessTokenTypeJWT }
func (serviceClient) IDTokenLifetime() time.Duration        { return time.Hour }
func (serviceClient) DevMode() bool                         { return false }
func (serviceClient) IsScopeAllowed(string) bool            { return true }
func (serviceClient) IDTokenUserinfoClaimsAssertion() bool  { return false }
func (serviceClient) ClockSkew() time.Duration              { return 0 }
func (serviceClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (serviceClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
