package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func jwkJSON(t *testing.T, k jose.JSONWebKey) json.RawMessage {
	t.Helper()
	b, err := k.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKeySetKeepsOnlyAsymmetricSigningKeys: of a JWKS, only public RSA (2048 bits or more),
// EC (P-256, P-384, P-521) and Ed25519 keys for signing are kept, each only for the
// algorithms it can verify.
func TestKeySetKeepsOnlyAsymmetricSigningKeys(t *testing.T) {
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	keys := []json.RawMessage{
		jwkJSON(t, jose.JSONWebKey{Key: &rsa2048.PublicKey, KeyID: "rsa", Use: "sig"}),
		jwkJSON(t, jose.JSONWebKey{Key: p256.Public(), KeyID: "ec", Algorithm: "ES256"}),
		jwkJSON(t, jose.JSONWebKey{Key: ed, KeyID: "ed"}),
		jwkJSON(t, jose.JSONWebKey{Key: &rsa1024.PublicKey, KeyID: "short"}),
		jwkJSON(t, jose.JSONWebKey{Key: &rsa2048.PublicKey, KeyID: "enc", Use: "enc"}),
		jwkJSON(t, jose.JSONWebKey{Key: &rsa2048.PublicKey, KeyID: "hs", Algorithm: "HS256"}),
		jwkJSON(t, jose.JSONWebKey{Key: p256.Public(), KeyID: "ec384", Algorithm: "ES384"}),
		jwkJSON(t, jose.JSONWebKey{Key: []byte("a shared secret of 32 bytes long"), KeyID: "oct"}),
		jwkJSON(t, jose.JSONWebKey{Key: rsa2048, KeyID: "private"}),
		json.RawMessage(`{"kty":"EC","crv":"P-224","x":"` + strings.Repeat("A", 38) + `","y":"` + strings.Repeat("A", 38) + `","kid":"p224"}`),
		json.RawMessage(`{"kty":"RSA","kid":"ops","key_ops":["encrypt"],"n":"` + jwkN(t, &rsa2048.PublicKey) + `","e":"AQAB"}`),
		json.RawMessage(`{"kty":"whatever","kid":"odd"}`),
	}
	doc, _ := json.Marshal(map[string]any{"keys": keys})
	ks, skipped, err := parseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range ks.keys {
		ids = append(ids, k.id)
	}
	if strings.Join(ids, " ") != "rsa ec ed" {
		t.Errorf("kept %v, want rsa ec ed; skipped:\n%s", ids, strings.Join(skipped, "\n"))
	}
	all := strings.Join(skipped, "\n")
	for _, why := range []string{"1024 bits", `use is "enc"`, `alg "HS256"`, `alg "ES384"`, "symmetric", "private key", "key_ops"} {
		if !strings.Contains(all, why) {
			t.Errorf("no key skipped for %q:\n%s", why, all)
		}
	}
	for _, c := range []struct {
		kid, alg string
		n        int
	}{
		{"rsa", "RS256", 1}, {"rsa", "PS512", 1}, {"rsa", "ES256", 0}, {"ec", "ES256", 1}, {"ec", "ES384", 0},
		{"ed", "EdDSA", 1}, {"ed", "RS256", 0}, {"", "RS384", 1}, {"", "EdDSA", 1}, {"missing", "RS256", 0},
	} {
		if got := len(ks.candidates(c.kid, c.alg)); got != c.n {
			t.Errorf("candidates(%q, %s): %d keys, want %d", c.kid, c.alg, got, c.n)
		}
	}
}

func jwkN(t *testing.T, k *rsa.PublicKey) string {
	var m map[string]any
	_ = json.Unmarshal(jwkJSON(t, jose.JSONWebKey{Key: k}), &m)
	return m["n"].(string)
}

func TestKeySetBounds(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	one := jwkJSON(t, jose.JSONWebKey{Key: k.Public()})
	many := make([]json.RawMessage, MaxKeys+10)
	for i := range many {
		many[i] = one
	}
	doc, _ := json.Marshal(map[string]any{"keys": many})
	ks, skipped, err := parseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks.keys) != MaxKeys || len(skipped) != 1 || !strings.Contains(skipped[0], "10 keys after the first") {
		t.Errorf("%d keys kept, skipped %v", len(ks.keys), skipped)
	}
	for _, bad := range []string{`[]`, `{"keys": {}}`, `{}`, `not json`} {
		if _, _, err := parseKeySet([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}

	// An answer larger than maxDocumentBytes is not read whole.
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"keys": [` + strings.Repeat(" ", maxDocumentBytes) + `]}`))
	}))
	defer big.Close()
	if _, _, err := fetchKeys(context.Background(), newHTTPClient(), big.URL); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a key set over the bound: %v", err)
	}
}

func TestFetchesOnlyOverHTTPS(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://idp.example.com/keys": true,
		"http://127.0.0.1:8080/keys":   true,
		"http://localhost/keys":        true,
		"http://[::1]:9/keys":          true,
		"http://idp.example.com/keys":  false,
		"http://10.0.0.7/keys":         false,
		"ftp://idp.example.com/keys":   false,
	} {
		u, _ := url.Parse(raw)
		if got := checkFetchURL(u) == ""; got != ok {
			t.Errorf("%s: allowed %v, want %v", raw, got, ok)
		}
	}
	// A redirect from a loopback issuer elsewhere over http is not followed.
	redirect := httptest.NewServer(http.RedirectHandler("http://idp.example.com/keys", http.StatusFound))
	defer redirect.Close()
	_, _, err := fetchKeys(context.Background(), newHTTPClient(), redirect.URL)
	if err == nil || !strings.Contains(err.Error(), "redirected to http://idp.example.com/keys") {
		t.Errorf("a redirect to plain http: %v", err)
	}
}

func TestDiscoveryURLs(t *testing.T) {
	got := discoveryURLs("https://idp.example.com/realms/robots")
	want := []string{
		"https://idp.example.com/realms/robots/.well-known/openid-configuration",
		"https://idp.example.com/.well-known/oauth-authorization-server/realms/robots",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := discoveryURLs("https://idp.example.com/"); got[1] != "https://idp.example.com/.well-known/oauth-authorization-server" {
		t.Errorf("for a root issuer: %v", got)
	}
}

func TestHeaderSafe(t *testing.T) {
	if got := headerSafe("kid \"x\"\r\nSet-Cookie: a\\b é"); got != "kid 'x'??Set-Cookie: a?b ??" {
		t.Errorf("got %q", got)
	}
}
