package e2e

// Helpers of the OAuth resource server tests (oidc_test.go): the OpenID provider of
// e2e/oidcprovider as a process, tokens from it by the client-credentials grant, tokens made by
// hand to be refused, and the reading of WWW-Authenticate challenges.

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2/clientcredentials"
)

var (
	oidcProviderOnce sync.Once
	oidcProviderBin  string
	oidcProviderErr  error
)

// oidcProviderBinary builds e2e/oidcprovider once per test binary.
func oidcProviderBinary(t *testing.T) string {
	t.Helper()
	oidcProviderOnce.Do(func() {
		oidcProviderBin = filepath.Join(binDir, "oidcprovider")
		cmd := exec.Command("go", "build", "-o", oidcProviderBin, "./oidcprovider")
		out, err := cmd.CombinedOutput()
		if err != nil {
			oidcProviderErr = fmt.Errorf("building e2e/oidcprovider: %v\n%s", err, out)
		}
	})
	if oidcProviderErr != nil {
		t.Fatal(oidcProviderErr)
	}
	return oidcProviderBin
}

// oidcProvider is a running e2e/oidcprovider process: the zitadel/oidc OP on a loopback port.
type oidcProvider struct {
	t      *testing.T
	addr   string // host:port, kept across restarts
	issuer string
	kid    string // the kid of the key signing its tokens now
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

// startOIDCProvider starts the provider on a free loopback port with args (its -client,
// -native-client, -key, … flags) and waits until it serves.
func startOIDCProvider(t *testing.T, args ...string) *oidcProvider {
	t.Helper()
	p := &oidcProvider{t: t}
	p.start("127.0.0.1:0", args)
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("OpenID provider stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *oidcProvider) start(addr string, args []string) {
	p.t.Helper()
	cmd := exec.Command(oidcProviderBinary(p.t), append([]string{"-listen", addr}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if p.stderr == nil {
		p.stderr = &syncBuffer{}
	} else {
		fmt.Fprintf(p.stderr, "--- restarted: %v\n", args)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case line := <-lines:
		// "listening on ISSUER kid KID"
		f := strings.Fields(line)
		if len(f) != 5 || f[0] != "listening" || f[3] != "kid" {
			p.t.Fatalf("the OpenID provider said %q", line)
		}
		p.issuer, p.kid = f[2], f[4]
		p.addr = strings.TrimPrefix(p.issuer, "http://")
	case <-p.done:
		p.t.Fatalf("the OpenID provider exited at start:\n%s", p.stderr.String())
	case <-time.After(20 * time.Second):
		p.t.Fatalf("the OpenID provider did not start within 20s:\n%s", p.stderr.String())
	}
}

// stop ends the provider with SIGTERM and waits for it.
func (p *oidcProvider) stop() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// restart stops the provider and starts it again on the same port, with the same issuer, and
// with args in place of the ones it had.
func (p *oidcProvider) restart(args ...string) {
	p.t.Helper()
	addr := p.addr
	p.stop()
	p.start(addr, append([]string{"-issuer", "http://" + addr}, args...))
}

// token gets an access token from the provider by the client-credentials grant, with the
// resource parameter of RFC 8707 when resource is not "".
func (p *oidcProvider) token(t *testing.T, clientID, secret, resource string, scopes ...string) string {
	t.Helper()
	tok, err := p.tryToken(clientID, secret, resource, scopes...)
	if err != nil {
		t.Fatalf("client-credentials grant for %s: %v\nprovider stderr:\n%s", clientID, err, p.stderr.String())
	}
	return tok
}

func (p *oidcProvider) tryToken(clientID, secret, resource string, scopes ...string) (string, error) {
	cc := clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: p.issuer + "/oauth/token", Scopes: scopes}
	if resource != "" {
		cc.EndpointParams = map[string][]string{"resource": {resource}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := cc.Token(ctx)
	if err != nil {
		return "", err
	}
	return tok.AccessToken, nil
}

// jwtParts splits a compact JWS into its decoded header and claims.
func jwtParts(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("%q is not a compact JWS", token)
	}
	for i, into := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatalf("part %d of the token: %v", i, err)
		}
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("part %d of the token: %v", i, err)
		}
	}
	return header, claims
}

func b64JSON(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// withClaims is token with its claims replaced by claims, and its header and signature kept:
// a tampered token.
func withClaims(token string, claims map[string]any) string {
	parts := strings.Split(token, ".")
	return parts[0] + "." + b64JSON(claims) + "." + parts[2]
}

// unsigned is an alg "none" token with claims (and kid in its header when not "").
func unsigned(claims map[string]any, kid string) string {
	h := map[string]any{"alg": "none", "typ": "JWT"}
	if kid != "" {
		h["kid"] = kid
	}
	return b64JSON(h) + "." + b64JSON(claims) + "."
}

// signWith signs claims with key (an *rsa.PrivateKey, or []byte for HMAC) by alg, with kid in
// the header.
func signWith(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	return sign(t, &jose.SignerOptions{}, alg, key, kid, claims)
}

// signEmbedded signs claims with key by RS256 and puts the public key in the token's header
// (jwk), as a token that brings the key to check it with.
func signEmbedded(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	return sign(t, &jose.SignerOptions{EmbedJWK: true}, jose.RS256, key, "", claims)
}

func sign(t *testing.T, opts *jose.SignerOptions, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	opts = opts.WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
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

// newRSAKeyFile writes a fresh 2048-bit RSA private key as PEM into dir and returns the file and
// the key.
func newRSAKeyFile(t *testing.T, dir, name string) (string, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// mcpAnswer is the answer to a request on /mcp.
type mcpAnswer struct {
	code      int
	challenge string // WWW-Authenticate
	body      string
}

// initializeAs sends an MCP initialize request to the gateway at addr with the Authorization
// header authz (none when "").
func initializeAs(t *testing.T, addr, authz string) mcpAnswer {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e-raw","version":"1"}}}`
	req, err := http.NewRequest("POST", "http://"+addr+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return mcpAnswer{resp.StatusCode, strings.Join(resp.Header.Values("WWW-Authenticate"), ", "), string(b)}
}

// parseChallenge reads one WWW-Authenticate challenge, `Scheme k="v", k2=v2`, into its scheme
// and its parameters. A parameter given twice is reported as an error.
func parseChallenge(h string) (scheme string, params map[string]string, err error) {
	h = strings.TrimSpace(h)
	scheme, rest, _ := strings.Cut(h, " ")
	params = map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		k, after, ok := strings.Cut(rest, "=")
		if !ok {
			return scheme, params, fmt.Errorf("%q: %q is not key=value", h, rest)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		var v string
		if strings.HasPrefix(after, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(after) && after[i] != '"'; i++ {
				if after[i] == '\\' && i+1 < len(after) {
					i++
				}
				b.WriteByte(after[i])
			}
			if i >= len(after) {
				return scheme, params, fmt.Errorf("%q: unterminated quoted value", h)
			}
			v, rest = b.String(), after[i+1:]
		} else {
			v, rest, _ = strings.Cut(after, ",")
			v = strings.TrimSpace(v)
			rest = "," + rest
		}
		if _, dup := params[k]; dup {
			return scheme, params, fmt.Errorf("%q: %s given twice", h, k)
		}
		params[k] = v
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, ",")
	}
	return scheme, params, nil
}
