// Command oidcprovider is the OpenID provider that mcp-gateway's end-to-end tests of its OAuth
// resource server run against: the op package of github.com/zitadel/oidc/v3, with the example
// storage and login page of that module's example server, on a loopback address.
//
// It issues JWT access tokens signed with RS256 by one key, generated at each start or read from
// -key, and publishes in its JWKS that key and those named by -publish (previous keys kept for a
// rotation). A key's kid is its RFC 7638 thumbprint, so a new key has a new kid.
//
// Service clients (-client) get tokens by the client-credentials grant. A public client
// (-native-client) signs the example user in by the authorization-code grant with PKCE at the
// example login page (/login/username; username test-user@HOST where HOST is the issuer's host,
// password verysecure; subject id1).
//
// An access token's audience is the RFC 8707 resource parameter of the token request when there
// is one, and otherwise the client's audience (its aud option, or its id). Its scope claim holds
// the granted scopes, space-delimited; a service client's token has a roles claim with its roles.
// A service client that asks for no scope is granted all of its scopes; one that asks for a
// scope it does not have is refused with invalid_scope.
//
// Usage:
//
//	oidcprovider -listen 127.0.0.1:PORT [-issuer URL] [-key FILE] [-publish FILE]...
//	    [-token-lifetime DURATION]
//	    [-client 'id=ID;secret=SECRET[;sub=SUBJECT][;roles=A,B][;scopes=X,Y][;aud=URI,URI][;ttl=DURATION][;backdate=DURATION]']...
//	    [-native-client 'id=ID;redirect=URI[,URI][;scopes=X,Y][;aud=URI]']...
//
// A key file is PEM: an RSA private key (PKCS #1 or PKCS #8) for -key; for -publish, that or
// an RSA public key (PKIX). ttl is the lifetime of that client's tokens (default
// -token-lifetime). backdate dates its tokens' iat and nbf that far in the past, and their exp
// ttl after that, as a provider whose clock is behind would: with a backdate of a resource
// server's leeway, a token is taken for ttl and then refused as expired, which tests expiry
// without waiting out the leeway. It prints "listening on ISSUER kid KID" on stdout once it
// serves, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}

// listFlag collects the values of a flag given more than once.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("oidcprovider", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "loopback `address` to serve on")
	issuer := fs.String("issuer", "", "issuer `URL` (default http://ADDRESS, the address served on)")
	keyFile := fs.String("key", "", "PEM `file` of the RSA private key that signs tokens (default: one generated at start)")
	lifetime := fs.Duration("token-lifetime", 5*time.Minute, "lifetime of an access token")
	var publish, clientSpecs, nativeSpecs listFlag
	fs.Var(&publish, "publish", "PEM `file` of a further RSA key to publish in the JWKS (repeatable)")
	fs.Var(&clientSpecs, "client", "a service client for the client-credentials grant: 'id=ID;secret=S;...' (repeatable)")
	fs.Var(&nativeSpecs, "native-client", "a public client for the authorization-code grant with PKCE: 'id=ID;redirect=URI;...' (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *lifetime <= 0 {
		return fmt.Errorf("-token-lifetime %s: must be positive", *lifetime)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		ln.Close()
		return fmt.Errorf("-listen %s is not a loopback address: this provider is for tests only", *listen)
	}
	if *issuer == "" {
		*issuer = "http://" + addr.String()
	}

	s, err := newStore(*issuer, *keyFile, publish, *lifetime)
	if err != nil {
		ln.Close()
		return err
	}
	for _, spec := range clientSpecs {
		c, err := parseClient(spec, false)
		if err != nil {
			ln.Close()
			return fmt.Errorf("-client %q: %w", spec, err)
		}
		s.clients[c.id] = c
	}
	for _, spec := range nativeSpecs {
		c, err := parseClient(spec, true)
		if err != nil {
			ln.Close()
			return fmt.Errorf("-native-client %q: %w", spec, err)
		}
		s.clients[c.id] = c
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(*issuer, s, logger, false)
	srv := &http.Server{Handler: withResource(router), ReadHeaderTimeout: 10 * time.Second}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Printf("listening on %s kid %s\n", *issuer, s.signing.id)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-served:
		return err
	case <-stop:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// client is a client of this provider: a service client (client-credentials grant) or a native
// one (authorization-code grant with PKCE, no secret). It implements op.Client.
type client struct {
	id, secret string
	subject    string // a service client's tokens' sub; its id when not given
	roles      []string
	scopes     []string
	audience   []string // aud when the token request has no resource parameter
	ttl        time.Duration
	backdate   time.Duration // iat and nbf this far in the past (op's client clock skew)
	native     bool
	redirects  []string
}

// parseClient reads 'key=value;key=value' with list values separated by commas.
func parseClient(spec string, native bool) (*client, error) {
	c := &client{native: native}
	for _, part := range strings.Split(spec, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		list := func() []string {
			var out []string
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			return out
		}
		switch k = strings.TrimSpace(k); k {
		case "id":
			c.id = v
		case "secret":
			c.secret = v
		case "sub":
			c.subject = v
		case "roles":
			c.roles = list()
		case "scopes":
			c.scopes = list()
		case "aud":
			c.audience = list()
		case "redirect":
			c.redirects = list()
		case "ttl":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("ttl: %w", err)
			}
			if d <= 0 {
				return nil, errors.New("ttl must be positive")
			}
			c.ttl = d
		case "backdate":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return nil, fmt.Errorf("backdate must be a duration of 0 or more: %q", v)
			}
			c.backdate = d
		default:
			return nil, fmt.Errorf("unknown key %q (known: id, secret, sub, roles, scopes, aud, redirect, ttl, backdate)", k)
		}
	}
	switch {
	case c.id == "":
		return nil, errors.New("id is missing")
	case !native && c.secret == "":
		return nil, errors.New("secret is missing")
	case native && c.secret != "":
		return nil, errors.New("a native client has no secret")
	case native && len(c.redirects) == 0:
		return nil, errors.New("redirect is missing")
	}
	if c.subject == "" {
		c.subject = c.id
	}
	if len(c.audience) == 0 {
		c.audience = []string{c.id}
	}
	return c, nil
}

func (c *client) GetID() string                    { return c.id }
func (c *client) RedirectURIs() []string           { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) LoginURL(id string) string {
	return "/login/username?authRequestID=" + url.QueryEscape(id)
}
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *client) DevMode() bool                        { return false }
func (c *client) IsScopeAllowed(scope string) bool     { return slices.Contains(c.scopes, scope) }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }

// ClockSkew is what op subtracts from a token's iat and nbf (and adds to the expires_in it
// reports): the client's backdate.
func (c *client) ClockSkew() time.Duration { return c.backdate }

func (c *client) ApplicationType() op.ApplicationType {
	if c.native {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *client) AuthMethod() oidc.AuthMethod {
	if c.native {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *client) ResponseTypes() []oidc.ResponseType {
	if c.native {
		return []oidc.ResponseType{oidc.ResponseTypeCode}
	}
	return nil
}

// GrantTypes: a native client gets no refresh token, so every access token this provider
// issues comes from a request that carried its resource parameter.
func (c *client) GrantTypes() []oidc.GrantType {
	if c.native {
		return []oidc.GrantType{oidc.GrantTypeCode}
	}
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// store is the example storage (auth requests, codes, the example users and their login) with
// this provider's clients, keys, token lifetimes and claims in place of the example's.
type store struct {
	*storage.Storage
	signing   *signingKey
	published []op.Key
	lifetime  time.Duration
	clients   map[string]*client
}

var (
	_ op.Storage                        = (*store)(nil)
	_ op.ClientCredentialsStorage       = (*store)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*store)(nil)
)

func newStore(issuer, keyFile string, publish []string, lifetime time.Duration) (*store, error) {
	var key *rsa.PrivateKey
	if keyFile == "" {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		key = k
	} else {
		k, err := readKey(keyFile)
		if err != nil {
			return nil, err
		}
		priv, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("-key %s holds no RSA private key", keyFile)
		}
		key = priv
	}
	kid, err := thumbprint(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	s := &store{
		Storage:  storage.NewStorageWithClients(storage.NewUserStore(issuer), map[string]*storage.Client{}),
		signing:  &signingKey{id: kid, key: key},
		lifetime: lifetime,
		clients:  map[string]*client{},
	}
	s.published = append(s.published, &publicKey{id: kid, key: &key.PublicKey})
	for _, f := range publish {
		k, err := readKey(f)
		if err != nil {
			return nil, err
		}
		var pub *rsa.PublicKey
		switch k := k.(type) {
		case *rsa.PrivateKey:
			pub = &k.PublicKey
		case *rsa.PublicKey:
			pub = k
		default:
			return nil, fmt.Errorf("-publish %s holds no RSA key", f)
		}
		id, err := thumbprint(pub)
		if err != nil {
			return nil, err
		}
		if id != kid {
			s.published = append(s.published, &publicKey{id: id, key: pub})
		}
	}
	return s, nil
}

// readKey reads the first PEM block of file: an RSA private key (PKCS #1 or #8) or public key.
func readKey(file string) (any, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", file)
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		return x509.ParsePKCS8PrivateKey(block.Bytes)
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(block.Bytes)
	}
	return nil, fmt.Errorf("%s: a PEM block of type %q is not a key this provider reads", file, block.Type)
}

func thumbprint(pub *rsa.PublicKey) (string, error) {
	t, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(t), nil
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct {
	id  string
	key *rsa.PublicKey
}

func (k *publicKey) ID() string                         { return k.id }
func (k *publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *publicKey) Use() string                        { return "sig" }
func (k *publicKey) Key() any                           { return k.key }

func (s *store) SigningKey(context.Context) (op.SigningKey, error) { return s.signing, nil }
func (s *store) KeySet(context.Context) ([]op.Key, error)          { return s.published, nil }
func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *store) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if c, ok := s.clients[id]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("no client %q", id)
}

func (s *store) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	c, ok := s.clients[id]
	if !ok || c.native || subtle.ConstantTimeCompare([]byte(c.secret), []byte(secret)) != 1 {
		return errors.New("wrong client id or secret")
	}
	return nil
}

// ClientCredentials authenticates a service client for the client-credentials grant.
func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.clients[id], nil
}

// serviceRequest is the token request of a client-credentials grant.
type serviceRequest struct {
	client   *client
	audience []string
	scopes   []string
}

func (r *serviceRequest) GetSubject() string    { return r.client.subject }
func (r *serviceRequest) GetAudience() []string { return r.audience }
func (r *serviceRequest) GetScopes() []string   { return r.scopes }

func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[id]
	if !ok || c.native {
		return nil, oidc.ErrInvalidClient()
	}
	if len(scopes) == 0 {
		scopes = c.scopes
	}
	for _, sc := range scopes {
		if !c.IsScopeAllowed(sc) {
			return nil, oidc.ErrInvalidScope().WithDescription("client %s may not have the scope %s", id, sc)
		}
	}
	aud := resourceFrom(ctx)
	if len(aud) == 0 {
		aud = c.audience
	}
	return &serviceRequest{client: c, audience: aud, scopes: scopes}, nil
}

// userRequest is the example's authorization request of a code flow, with the audience the
// token request asked for.
type userRequest struct {
	*storage.AuthRequest
	audience []string
}

func (r *userRequest) GetAudience() []string { return r.audience }

func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	req, ok := ar.(*storage.AuthRequest)
	if !ok {
		return ar, nil
	}
	aud := resourceFrom(ctx)
	if len(aud) == 0 {
		if c, ok := s.clients[req.GetClientID()]; ok {
			aud = c.audience
		}
	}
	return &userRequest{AuthRequest: req, audience: aud}, nil
}

// CreateAccessToken gives a JWT access token its id and expiry; the token itself is not kept.
func (s *store) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	var c *client
	switch r := req.(type) {
	case *serviceRequest:
		c = r.client
	case *userRequest:
		c = s.clients[r.GetClientID()]
	}
	ttl, backdate := s.lifetime, time.Duration(0)
	if c != nil {
		if c.ttl != 0 {
			ttl = c.ttl
		}
		backdate = c.backdate
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", time.Time{}, err
	}
	return fmt.Sprintf("%x", id), time.Now().Add(ttl - backdate), nil
}

// GetPrivateClaimsFromRequest puts the granted scopes and a service client's roles on its token.
func (s *store) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, _ []string) (map[string]any, error) {
	claims := map[string]any{}
	if sc := req.GetScopes(); len(sc) > 0 {
		claims["scope"] = strings.Join(sc, " ")
	}
	if r, ok := req.(*serviceRequest); ok && len(r.client.roles) > 0 {
		claims["roles"] = r.client.roles
	}
	return claims, nil
}

type resourceKey struct{}

func resourceFrom(ctx context.Context) []string {
	r, _ := ctx.Value(resourceKey{}).([]string)
	return r
}

// withResource reads the RFC 8707 resource parameters of a token request into its context,
// refusing one that is not an absolute URI without a fragment with invalid_target.
func withResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
			next.ServeHTTP(w, r)
			return
		}
		if err := r.ParseForm(); err != nil {
			tokenError(w, "invalid_request", "the token request's form cannot be read: "+err.Error())
			return
		}
		resources := r.PostForm["resource"]
		for _, res := range resources {
			u, err := url.Parse(res)
			if err != nil || !u.IsAbs() || u.Fragment != "" {
				tokenError(w, "invalid_target", fmt.Sprintf("resource %q is not an absolute URI without a fragment", res))
				return
			}
		}
		if len(resources) > 0 {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, resources))
		}
		next.ServeHTTP(w, r)
	})
}

func tokenError(w http.ResponseWriter, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}
