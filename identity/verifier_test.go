package identity_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/identity"
	"github.com/mcp-gateway/mcp-gateway/identity/identitytest"
)

const clientID = identitytest.ClientID

var (
	newProvider = identitytest.NewProvider
	newRSAKey   = identitytest.NewRSAKey
	newECKey    = identitytest.NewECKey
	newEdKey    = identitytest.NewEdKey
	sign        = identitytest.Sign
)

const resource = "https://gw.example.com/mcp"

// oidcConfig is the auth.oidc section of a config file for issuer, with more settings in
// extra (indented under oidc), as config.Parse checks it and fills in its defaults.
func oidcConfig(t *testing.T, issuer, extra string) config.OIDC {
	t.Helper()
	src := fmt.Sprintf("servers: [{name: arm, command: arm}]\nauth:\n  oidc:\n    issuer: %s\n    resource: %s\n%s", issuer, resource, extra)
	cfg, err := config.Parse("cell.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return *cfg.Auth.OIDC
}

func newVerifier(t *testing.T, cfg config.OIDC, opts identity.Options) *identity.Verifier {
	t.Helper()
	v, err := identity.NewVerifier(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// refusal is the *identity.Error of Verify's refusal of token, failing the test when it was
// accepted or the description repeats the token.
func refusal(t *testing.T, v *identity.Verifier, token string) *identity.Error {
	t.Helper()
	p, err := v.Verify(context.Background(), token)
	if err == nil {
		t.Fatalf("accepted, as %+v", p)
	}
	e := identity.ErrorOf(err)
	if e == nil {
		t.Fatalf("refused with %T %v, not an *identity.Error", err, err)
	}
	if parts := strings.Split(token, "."); len(parts) == 3 && len(parts[2]) > 8 && strings.Contains(e.Description, parts[2]) {
		t.Errorf("the description repeats the token's signature: %s", e.Description)
	}
	if strings.ContainsAny(e.Description, "\"\\\r\n") {
		t.Errorf("the description cannot go in a WWW-Authenticate quoted-string: %q", e.Description)
	}
	return e
}

// parts decodes a compact JWS's header and claims.
func parts(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	p := strings.Split(token, ".")
	if len(p) != 3 {
		t.Fatalf("not a compact JWS: %d parts", len(p))
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(p[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	return header, claims
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// goodClaims are what the provider's tokens say, for tokens the test signs itself.
func goodClaims(issuer string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": issuer, "sub": clientID, "aud": []string{resource}, "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "scope": "mcp:tools"}
}

func TestVerifiesTheProvidersToken(t *testing.T) {
	p := newProvider(t, resource)
	p.Set(func(s *identitytest.Settings) {
		s.Claims = map[string]any{"realm_access": map[string]any{"roles": []string{"operator", "planner", "operator"}}}
	})
	v := newVerifier(t, oidcConfig(t, p.Issuer, "    roles_claim: realm_access.roles\n    required_scopes: [mcp:tools]\n"), identity.Options{})

	token := p.Token(t, "mcp:tools", "robots:read")
	header, claims := parts(t, token)
	if header["alg"] != "RS256" || header["kid"] != p.Key().KID || header["typ"] != "JWT" {
		t.Errorf("the provider's token header: %v", header)
	}
	if claims["iss"] != p.Issuer || claims["sub"] != clientID || claims["client_id"] != clientID {
		t.Errorf("the provider's token claims: %v", claims)
	}
	got, err := v.Verify(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != clientID || !slices.Equal(got.Roles, []string{"operator", "planner"}) ||
		!slices.Equal(got.Scopes, []string{"mcp:tools", "robots:read"}) || time.Until(got.Expiry) < 4*time.Minute {
		t.Errorf("principal: %+v", got)
	}
}

func TestRefusesTokens(t *testing.T) {
	p := newProvider(t, resource)
	v := newVerifier(t, oidcConfig(t, p.Issuer, "    required_scopes: [mcp:tools]\n"), identity.Options{Reserved: []string{"admin", "operator"}})
	good := p.Token(t, "mcp:tools")
	if _, err := v.Verify(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	opKey := p.Key()
	issue := func(f func(s *identitytest.Settings)) string { return p.Issue(t, f, "mcp:tools") }
	_, claims := parts(t, good)
	segments := strings.Split(good, ".")

	// Another key that says it is the provider's.
	impostor := newRSAKey(t)
	impostor.KID = opKey.KID
	// The classic confusion: HS256 keyed with the provider's public key as published.
	der, _ := x509.MarshalPKIXPublicKey(opKey.Private.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hsHeader := b64(map[string]any{"alg": "HS256", "kid": opKey.KID, "typ": "JWT"})
	mac := hmac.New(sha256.New, pubPEM)
	mac.Write([]byte(hsHeader + "." + segments[1]))
	confused := hsHeader + "." + segments[1] + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	// The payload altered, the signature kept.
	claims["sub"] = "someone-else"
	tampered := segments[0] + "." + b64(claims) + "." + segments[2]
	// A token that embeds its own key and names none.
	attacker, _ := rsa.GenerateKey(rand.Reader, 2048)
	embedded := func() string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: attacker}, (&jose.SignerOptions{EmbedJWK: true}).WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(goodClaims(p.Issuer))
		jws, _ := signer.Sign(payload)
		s, _ := jws.CompactSerialize()
		return s
	}()

	expiredClaims, futureClaims, noExp, otherIss := goodClaims(p.Issuer), goodClaims(p.Issuer), goodClaims(p.Issuer), goodClaims(p.Issuer)
	expiredClaims["exp"] = time.Now().Add(-2 * identity.Leeway).Unix()
	futureClaims["nbf"] = time.Now().Add(10 * time.Minute).Unix()
	delete(noExp, "exp")
	otherIss["iss"] = "https://idp.example.com"

	tests := []struct {
		name  string
		token string
		code  identity.Code
		says  string
	}{
		{"for another audience", issue(func(s *identitytest.Settings) { s.Audience = []string{"https://other.example.com/mcp"} }), identity.CodeAudience, "https://other.example.com/mcp"},
		{"expired, as the provider issued it", issue(func(s *identitytest.Settings) { s.Lifetime = -5 * time.Minute }), identity.CodeExpired, "expired at"},
		{"expired beyond the leeway", sign(t, opKey, expiredClaims, nil), identity.CodeExpired, "expired at"},
		{"without exp", sign(t, opKey, noExp, nil), identity.CodeExpired, "no exp"},
		{"not yet valid", sign(t, opKey, futureClaims, nil), identity.CodeNotYetValid, "not valid before"},
		{"from another issuer", sign(t, opKey, otherIss, nil), identity.CodeIssuer, "https://idp.example.com"},
		{"signed by another key under the provider's kid", sign(t, impostor, goodClaims(p.Issuer), nil), identity.CodeSignature, "does not verify"},
		{"signed by a key the provider does not publish", sign(t, newRSAKey(t), goodClaims(p.Issuer), nil), identity.CodeUnknownKey, "does not publish"},
		{"with its own key embedded", embedded, identity.CodeSignature, "does not verify"},
		{"unsigned (alg none)", b64(map[string]any{"alg": "none", "typ": "JWT"}) + "." + segments[1] + ".", identity.CodeAlgorithm, "alg none"},
		{"HS256 keyed with the provider's public key", confused, identity.CodeAlgorithm, "HMAC"},
		{"tampered", tampered, identity.CodeSignature, "altered"},
		{"of another type", sign(t, opKey, goodClaims(p.Issuer), map[jose.HeaderKey]any{"typ": "dpop+jwt"}), identity.CodeType, "dpop+jwt"},
		{"with a critical header", sign(t, opKey, goodClaims(p.Issuer), map[jose.HeaderKey]any{"crit": []string{"exp"}, "exp": 1}), identity.CodeType, "crit"},
		{"naming a reserved principal", issue(func(s *identitytest.Settings) { s.Subject = "admin" }), identity.CodePrincipal, `principal 'admin'`},
		{"naming a static principal", issue(func(s *identitytest.Settings) { s.Subject = "operator" }), identity.CodePrincipal, "auth.tokens"},
		{"without the required scope", p.Token(t, "robots:read"), identity.CodeInsufficientScope, "mcp:tools"},
		{"oversized", segments[0] + "." + strings.Repeat("A", identity.MaxTokenBytes) + "." + segments[2], identity.CodeTooLarge, "longer than"},
		{"garbage", "not-a-token-at-all", identity.CodeMalformed, "not a JWT"},
		{"garbage in JWT shape", "eyJhbGciOi.eyJzdWIiOi.c2ln", identity.CodeMalformed, "header"},
		{"a header that is not an object", b64([]string{"RS256"}) + "." + segments[1] + "." + segments[2], identity.CodeMalformed, "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := refusal(t, v, tt.token)
			if e.Code != tt.code || !strings.Contains(e.Description, tt.says) {
				t.Errorf("refused with %s: %s\nwant %s, saying %q", e.Code, e.Description, tt.code, tt.says)
			}
			if tt.code == identity.CodeInsufficientScope && e.Scope != "mcp:tools" {
				t.Errorf("scope %q, want mcp:tools", e.Scope)
			}
		})
	}
	// After all of that the good token is still good.
	if _, err := v.Verify(context.Background(), good); err != nil {
		t.Fatal(err)
	}
}

func TestAlgorithmsLimitWhatIsAccepted(t *testing.T) {
	p := newProvider(t, resource)
	p.Rotate(newECKey(t))
	token := p.Token(t)
	if h, _ := parts(t, token); h["alg"] != "ES256" {
		t.Fatalf("the provider signed with %v", h["alg"])
	}
	all := newVerifier(t, oidcConfig(t, p.Issuer, ""), identity.Options{})
	if _, err := all.Verify(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	rsaOnly := newVerifier(t, oidcConfig(t, p.Issuer, "    algorithms: [RS256, PS256]\n"), identity.Options{})
	if e := refusal(t, rsaOnly, token); e.Code != identity.CodeAlgorithm || !strings.Contains(e.Description, "ES256") {
		t.Errorf("refused with %s: %s", e.Code, e.Description)
	}
}

// TestKeyRotation: a token signed with a key the verifier has not seen makes it fetch the keys
// again, once for every caller waiting and at most once per MinRefreshGap.
func TestKeyRotation(t *testing.T) {
	p := newProvider(t, resource)
	const gap = 300 * time.Millisecond
	v := newVerifier(t, oidcConfig(t, p.Issuer, ""), identity.Options{MinRefreshGap: gap})
	first := p.Token(t)
	if _, err := v.Verify(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	fetches := p.KeyFetches()

	time.Sleep(gap)
	p.Rotate(newECKey(t))
	second := p.Token(t)
	if _, err := v.Verify(context.Background(), second); err != nil {
		t.Fatalf("after the provider rotated its key: %v", err)
	}
	if n := p.KeyFetches() - fetches; n != 1 {
		t.Errorf("the keys were fetched %d times for the rotation, want 1", n)
	}
	// The old key is gone from the provider's set.
	if e := refusal(t, v, first); e.Code != identity.CodeUnknownKey {
		t.Errorf("the retired key's token: %s: %s", e.Code, e.Description)
	}

	// Many tokens naming unknown keys at once: one fetch, then none until the gap has passed.
	time.Sleep(gap)
	fetches = p.KeyFetches()
	stranger := sign(t, newRSAKey(t), goodClaims(p.Issuer), nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), stranger); identity.ErrorOf(err) == nil || identity.ErrorOf(err).Code != identity.CodeUnknownKey {
				t.Errorf("a token of an unknown key: %v", err)
			}
		})
	}
	wg.Wait()
	for range 20 {
		_, _ = v.Verify(context.Background(), stranger)
	}
	if n := p.KeyFetches() - fetches; n != 1 {
		t.Errorf("70 tokens of unknown keys within the gap fetched the keys %d times, want 1", n)
	}

	time.Sleep(gap)
	p.Rotate(newEdKey(t))
	if _, err := v.Verify(context.Background(), p.Token(t)); err != nil {
		t.Fatalf("after a rotation to an Ed25519 key: %v", err)
	}
}

// TestIssuerDown: a provider that cannot be reached at start does not stop the verifier; its
// tokens get CodeUnavailable, and once it answers they are accepted, fetched in the background
// and on demand.
func TestIssuerDown(t *testing.T) {
	p := newProvider(t, resource)
	token := p.Token(t)
	p.SetDown(true)
	v, err := identity.NewVerifier(t.Context(), oidcConfig(t, p.Issuer, ""), identity.Options{MinRefreshGap: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("start with the provider down: %v", err)
	}
	if v == nil {
		t.Fatal("no verifier")
	}
	t.Cleanup(v.Close)
	e := refusal(t, v, token)
	if e.Code != identity.CodeUnavailable || !strings.Contains(e.Description, "could not be fetched") || !strings.Contains(e.Description, "retry") {
		t.Errorf("with the provider down: %s: %s", e.Code, e.Description)
	}

	p.SetDown(false)
	deadline := time.Now().Add(10 * time.Second)
	for p.KeyFetches() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p.KeyFetches() == 0 {
		t.Fatal("the verifier did not retry in the background")
	}
	if _, err := v.Verify(context.Background(), token); err != nil {
		t.Fatalf("once the provider is back: %v", err)
	}

	// Down again: the keys fetched are kept, and tokens of known keys keep working.
	p.SetDown(true)
	time.Sleep(150 * time.Millisecond)
	if _, err := v.Verify(context.Background(), token); err != nil {
		t.Fatalf("a known key while the provider is down: %v", err)
	}
	stranger := sign(t, newRSAKey(t), goodClaims(p.Issuer), nil)
	if e := refusal(t, v, stranger); e.Code != identity.CodeUnavailable {
		t.Errorf("an unknown key while the provider is down: %s: %s", e.Code, e.Description)
	}
}

func TestDiscovery(t *testing.T) {
	t.Run("RFC 8414 when there is no OpenID configuration", func(t *testing.T) {
		p := newProvider(t, resource)
		p.Only8414(true)
		v := newVerifier(t, oidcConfig(t, p.Issuer, ""), identity.Options{})
		if _, err := v.Verify(context.Background(), p.Token(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an issuer written otherwise than the provider names itself", func(t *testing.T) {
		p := newProvider(t, resource)
		_, err := identity.NewVerifier(t.Context(), oidcConfig(t, p.Issuer+"/", ""), identity.Options{})
		if err == nil || !strings.Contains(err.Error(), "names issuer") || !strings.Contains(err.Error(), "trailing /") {
			t.Errorf("got %v", err)
		}
	})
}

func TestClaims(t *testing.T) {
	p := newProvider(t, resource)
	cases := []struct {
		name   string
		claims map[string]any
		extra  string
		id     string
		roles  []string
		code   identity.Code
	}{
		{"a role as a string", map[string]any{"roles": "viewer"}, "    roles_claim: roles\n", clientID, []string{"viewer"}, ""},
		{"a namespaced claim with dots in its name", map[string]any{"https://gw.example.com/roles": []string{"admin"}}, "    roles_claim: https://gw.example.com/roles\n", clientID, []string{"admin"}, ""},
		{"no roles claim", nil, "    roles_claim: realm_access.roles\n", clientID, nil, ""},
		{"roles of another type", map[string]any{"roles": 7}, "    roles_claim: roles\n", "", nil, identity.CodePrincipal},
		{"roles holding a number", map[string]any{"roles": []any{"a", 7}}, "    roles_claim: roles\n", "", nil, identity.CodePrincipal},
		{"another principal claim", map[string]any{"ext": map[string]any{"user": "alice@example.com"}}, "    principal_claim: ext.user\n", "alice@example.com", nil, ""},
		{"a principal claim the token lacks", nil, "    principal_claim: email\n", "", nil, identity.CodePrincipal},
		{"an empty principal", map[string]any{"email": ""}, "    principal_claim: email\n", "", nil, identity.CodePrincipal},
		{"a principal with a control character", map[string]any{"email": "a\nb"}, "    principal_claim: email\n", "", nil, identity.CodePrincipal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p.Set(func(s *identitytest.Settings) { s.Claims = c.claims })
			v := newVerifier(t, oidcConfig(t, p.Issuer, c.extra), identity.Options{})
			token := p.Token(t)
			if c.code != "" {
				if e := refusal(t, v, token); e.Code != c.code {
					t.Errorf("refused with %s: %s", e.Code, e.Description)
				}
				return
			}
			got, err := v.Verify(context.Background(), token)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != c.id || !slices.Equal(got.Roles, c.roles) {
				t.Errorf("got %+v, want id %s roles %v", got, c.id, c.roles)
			}
		})
	}
	t.Run("scopes in scp", func(t *testing.T) {
		p.Set(func(s *identitytest.Settings) { s.Claims = map[string]any{"scp": []string{"mcp:tools", "other"}} })
		v := newVerifier(t, oidcConfig(t, p.Issuer, "    required_scopes: [mcp:tools]\n"), identity.Options{})
		got, err := v.Verify(context.Background(), p.Token(t))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Scopes, []string{"mcp:tools", "other"}) {
			t.Errorf("scopes %v", got.Scopes)
		}
	})
}

func TestProtectedResourceMetadata(t *testing.T) {
	cfg := oidcConfig(t, "https://idp.example.com/realms/robots", "    required_scopes: [mcp:tools]\n")
	md := identity.ProtectedResourceMetadata(cfg, "cell-7")
	b, _ := json.Marshal(md)
	want := `{"resource":"https://gw.example.com/mcp","authorization_servers":["https://idp.example.com/realms/robots"],"scopes_supported":["mcp:tools"],"bearer_methods_supported":["header"],"resource_name":"cell-7"}`
	if string(b) != want {
		t.Errorf("metadata:\n got %s\nwant %s", b, want)
	}
	for resource, want := range map[string]string{
		"https://gw.example.com/mcp":              "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
		"https://gw.example.com":                  "https://gw.example.com/.well-known/oauth-protected-resource",
		"https://gw.example.com:8443/cell-7/mcp/": "https://gw.example.com:8443/.well-known/oauth-protected-resource/cell-7/mcp",
	} {
		if got := identity.MetadataURL(resource); got != want {
			t.Errorf("MetadataURL(%s) = %s, want %s", resource, got, want)
		}
	}
}
