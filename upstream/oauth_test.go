package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// The OpenID provider of these tests is zitadel/oidc's example server and its in-memory
// storage, whose service user sid1 (secret verysecret) may use the client credentials grant.
const (
	opClientID     = "sid1"
	opClientSecret = "verysecret"
	secretVariable = "UPSTREAM_TEST_CLIENT_SECRET"
)

// opStorage is the example storage with two settings of a real deployment: the service user's
// access tokens are JWTs (so the resource server can check them with the provider's keys), and
// their lifetime is set by the test.
type opStorage struct {
	*storage.Storage
	lifetime atomic.Int64 // nanoseconds
}

func (s *opStorage) ClientCredentials(ctx context.Context, clientID, clientSecret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, clientID, clientSecret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	id, _, err := s.Storage.CreateAccessToken(ctx, req)
	return id, time.Now().Add(time.Duration(s.lifetime.Load())), err
}

type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

// Modes of the token endpoint.
const (
	opServes = iota
	opHangs  // it takes the request and never answers
	opEchoes // it answers an error that repeats the client's credentials
)

// testOP is the provider on a loopback listener, with a count of the requests to its token
// endpoint and the forms they sent.
type testOP struct {
	server   *httptest.Server
	issuer   string
	tokenURL string
	store    *opStorage
	mode     atomic.Int32
	requests atomic.Int64
	mu       sync.Mutex
	forms    []url.Values
}

func startOP(t *testing.T, lifetime time.Duration) *testOP {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	o := &testOP{server: ts, issuer: "http://" + ts.Listener.Addr().String()}
	o.tokenURL = o.issuer + "/oauth/token"
	o.store = &opStorage{Storage: storage.NewStorage(storage.NewUserStore(o.issuer))}
	o.store.lifetime.Store(int64(lifetime))
	provider := exampleop.SetupServer(o.issuer, o.store, nil, false)
	ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			o.requests.Add(1)
			_ = r.ParseForm()
			o.mu.Lock()
			o.forms = append(o.forms, r.PostForm)
			o.mu.Unlock()
			switch o.mode.Load() {
			case opHangs:
				<-r.Context().Done()
				return
			case opEchoes:
				id, secret, _ := r.BasicAuth()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request",
					"error_description": "client " + id + " with secret " + secret + r.PostForm.Get("client_secret") + " and " + r.Header.Get("Authorization")})
				return
			}
		}
		provider.ServeHTTP(w, r)
	})
	ts.Start()
	t.Cleanup(ts.Close)
	return o
}

func (o *testOP) lastForm() url.Values {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.forms) == 0 {
		return nil
	}
	return o.forms[len(o.forms)-1]
}

// protected is a streamable HTTP MCP server behind the SDK's bearer token middleware, which
// checks every request's token against the provider's signing keys. It records every request's
// headers, counts its 401s and the runs of its tool "move", and can revoke tokens.
type protected struct {
	server  *httptest.Server
	runs    atomic.Int64
	mu      sync.Mutex
	headers []http.Header
	refused int
	revoked map[string]bool
	all     bool // refuse every token
}

func startProtected(t *testing.T, o *testOP) *protected {
	t.Helper()
	p := &protected{revoked: map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "cloud", Version: "1"}, nil)
	addTestTools(srv)
	srv.AddTool(objectTool("move"), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p.runs.Add(1)
		return textResult("moved"), nil
	})
	keysTransport := &http.Transport{}
	t.Cleanup(keysTransport.CloseIdleConnections)
	verifier := op.NewAccessTokenVerifier(o.issuer, rp.NewRemoteKeySet(&http.Client{Transport: keysTransport}, o.issuer+"/keys"))
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p.mu.Lock()
		refuse := p.all || p.revoked[token]
		if refuse {
			p.refused++
		}
		p.mu.Unlock()
		if refuse {
			return nil, fmt.Errorf("%w: revoked", auth.ErrInvalidToken)
		}
		claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, token, verifier)
		if err != nil {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return &auth.TokenInfo{UserID: claims.Subject, Scopes: claims.Scopes, Expiration: claims.Expiration.AsTime()}, nil
	}
	var ts *httptest.Server
	handler := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: "http://resource.test/.well-known/oauth-protected-resource"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.headers = append(p.headers, r.Header.Clone())
		p.mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		ts.Close()
	})
	p.server = ts
	return p
}

// tokens is the bearer tokens the server was sent, in order, each once.
func (p *protected) tokens(t *testing.T) []string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for i, h := range p.headers {
		v := h.Get("Authorization")
		tok, ok := strings.CutPrefix(v, "Bearer ")
		if !ok || tok == "" {
			t.Errorf("request %d to the server carried Authorization %q, want the gateway's bearer token", i, v)
			continue
		}
		if len(out) == 0 || out[len(out)-1] != tok {
			out = append(out, tok)
		}
	}
	return out
}

func (p *protected) counts() (requests, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.headers), p.refused
}

func (p *protected) revoke(token string) {
	p.mu.Lock()
	p.revoked[token] = true
	p.mu.Unlock()
}

func (p *protected) refuseAll() {
	p.mu.Lock()
	p.all = true
	p.mu.Unlock()
}

func oauthServer(o *testOP, p *protected) config.Server {
	return config.Server{
		Name:              "cloud",
		URL:               p.server.URL,
		StartupTimeoutSec: 5,
		OAuth: &config.UpstreamOAuth{
			TokenURL:        o.tokenURL,
			ClientID:        opClientID,
			ClientSecretEnv: secretVariable,
			Scopes:          []string{storage.CustomScope},
			Resource:        p.server.URL,
			Timeout:         config.Duration(2 * time.Second),
		},
	}
}

// noSecrets fails the test if the client secret or one of the tokens is in s.
func noSecrets(t *testing.T, what, s string, tokens []string) {
	t.Helper()
	for _, v := range append([]string{opClientSecret}, tokens...) {
		if strings.Contains(s, v) {
			t.Errorf("%s holds a secret (%.12s…):\n%s", what, v, s)
		}
	}
}

func callMove(t *testing.T, u *Upstream) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := u.Call(ctx, "move", json.RawMessage(`{}`), nil)
	if err == nil && resultText(t, res) != "moved" {
		t.Errorf("move returned %q", resultText(t, res))
	}
	return err
}

func TestHTTPUpstreamOAuthGetsATokenAndReusesIt(t *testing.T) {
	checkGoroutines(t)
	t.Setenv(secretVariable, opClientSecret)
	o := startOP(t, 5*time.Minute)
	p := startProtected(t, o)
	var logs logBuffer
	m, err := startManager(t, []config.Server{oauthServer(o, p)}, Options{Logger: logs.logger()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("cloud")
	if !hasTool(u, "move") {
		t.Fatalf("tools = %v", toolNames(u.Tools()))
	}
	for i := range 5 {
		if err := callMove(t, u); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := o.requests.Load(); n != 1 {
		t.Errorf("%d token requests for the start and 5 calls, want 1: the token is cached", n)
	}
	form := o.lastForm()
	if form.Get("grant_type") != "client_credentials" || form.Get("scope") != storage.CustomScope || form.Get("resource") != p.server.URL {
		t.Errorf("token request form: %v", form)
	}
	tokens := p.tokens(t)
	requests, refused := p.counts()
	if len(tokens) != 1 || refused != 0 || requests < 7 {
		t.Errorf("the server saw %d requests with %d tokens, %d refused; want one token on every request, none refused", requests, len(tokens), refused)
	}
	if p.runs.Load() != 5 {
		t.Errorf("move ran %d times, want 5", p.runs.Load())
	}
	noSecrets(t, "the log", logs.String(), tokens)
}

func TestHTTPUpstreamOAuthRenewsAnExpiringToken(t *testing.T) {
	checkGoroutines(t)
	t.Setenv(secretVariable, opClientSecret)
	// expires_in 2 (whole seconds of 3s less the time to answer): renewed from 1.5s on.
	o := startOP(t, 3*time.Second)
	p := startProtected(t, o)
	m, err := startManager(t, []config.Server{oauthServer(o, p)}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("cloud")
	if err := callMove(t, u); err != nil {
		t.Fatal(err)
	}
	// Within the renewal margin: the call goes with the current token at once, and the next
	// one is got beside it.
	time.Sleep(1700 * time.Millisecond)
	if err := callMove(t, u); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "the token is renewed in the background", func() bool {
		u.tokens.mu.Lock()
		defer u.tokens.mu.Unlock()
		return o.requests.Load() == 2 && u.tokens.pending == nil
	})
	if err := callMove(t, u); err != nil {
		t.Fatal(err)
	}
	// Past the expiry of the second token: the call waits for a new one.
	time.Sleep(2200 * time.Millisecond)
	for i := range 3 {
		if err := callMove(t, u); err != nil {
			t.Fatalf("call %d after the expiry: %v", i, err)
		}
	}
	if n := o.requests.Load(); n != 3 {
		t.Errorf("%d token requests, want 3: the first token and two renewals", n)
	}
	tokens := p.tokens(t)
	if _, refused := p.counts(); len(tokens) != 3 || refused != 0 {
		t.Errorf("the server saw %d tokens and refused %d requests; want 3 tokens, none sent expired", len(tokens), refused)
	}
}

// TestHTTPUpstreamOAuthRevokedTokenIsReplacedOnce: the server refuses the cached token (revoked
// at the resource server); the request is sent once more with a new token, and the tool of the
// physical server runs once.
func TestHTTPUpstreamOAuthRevokedTokenIsReplacedOnce(t *testing.T) {
	checkGoroutines(t)
	t.Setenv(secretVariable, opClientSecret)
	o := startOP(t, 5*time.Minute)
	p := startProtected(t, o)
	s := oauthServer(o, p)
	s.Physical = true
	m, err := startManager(t, []config.Server{s}, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("cloud")
	if err := callMove(t, u); err != nil {
		t.Fatal(err)
	}
	first := p.tokens(t)
	p.revoke(first[0])
	if err := callMove(t, u); err != nil {
		t.Fatalf("the call after the revocation: %v", err)
	}
	if err := callMove(t, u); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	tokens := p.tokens(t)
	_, refused := p.counts()
	if n := o.requests.Load(); n != 2 || refused != 1 || len(tokens) != 2 || tokens[1] == tokens[0] {
		t.Errorf("%d token requests, %d refused, %d tokens sent; want 2, 1, and the new token after the revoked one", n, refused, len(tokens))
	}
	if got := p.runs.Load(); got != 3 {
		t.Errorf("move ran %d times for 3 calls", got)
	}
}

// TestHTTPUpstreamOAuthRefusedTokenFailsTheCallUnsent: a server that refuses also the new token
// fails the call as not sent, with the reason, and the tool does not run.
func TestHTTPUpstreamOAuthRefusedTokenFailsTheCallUnsent(t *testing.T) {
	checkGoroutines(t)
	t.Setenv(secretVariable, opClientSecret)
	o := startOP(t, 5*time.Minute)
	p := startProtected(t, o)
	s := oauthServer(o, p)
	s.Physical = true
	var logs logBuffer
	m, err := startManager(t, []config.Server{s}, Options{Logger: logs.logger()})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u := m.Get("cloud")
	p.refuseAll()
	err = callMove(t, u)
	t.Logf("call: %v", err)
	var te *TokenError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &te) || !te.Refused {
		t.Fatalf("call = %v, want ErrUnavailable with a refused TokenError", err)
	}
	for _, want := range []string{`server "cloud" refused the gateway's access token (HTTP 401) also after a new one`, `resource_metadata=`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, refused := p.counts(); refused != 2 || o.requests.Load() != 2 || p.runs.Load() != 0 {
		t.Errorf("refused %d, token requests %d, runs %d; want 2, 2 and 0", refused, o.requests.Load(), p.runs.Load())
	}
	noSecrets(t, "the error", err.Error(), p.tokens(t))
	noSecrets(t, "the log", logs.String(), p.tokens(t))
}

// TestHTTPUpstreamOAuthTokenEndpointDown: with the cached token expired, a token endpoint that is
// gone or does not answer fails the call as not sent within oauth.timeout, and once the
// endpoint is back the same session serves calls again.
func TestHTTPUpstreamOAuthTokenEndpointDown(t *testing.T) {
	for _, c := range []struct {
		name string
		down func(*testOP)
		says string
	}{
		{"closed", func(o *testOP) { o.server.Close() }, "the token endpoint could not be reached"},
		{"hanging", func(o *testOP) { o.mode.Store(opHangs) }, "the token endpoint did not answer within 500ms (oauth.timeout)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			t.Setenv(secretVariable, opClientSecret)
			o := startOP(t, 3*time.Second)
			p := startProtected(t, o)
			s := oauthServer(o, p)
			s.OAuth.Timeout = config.Duration(500 * time.Millisecond)
			var logs logBuffer
			m, err := startManager(t, []config.Server{s}, Options{Logger: logs.logger()})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			u := m.Get("cloud")
			c.down(o)
			time.Sleep(2200 * time.Millisecond) // past the token's expiry
			start := time.Now()
			err = callMove(t, u)
			took := time.Since(start)
			t.Logf("after %s: %v", took, err)
			var te *TokenError
			if !errors.Is(err, ErrUnavailable) || !errors.As(err, &te) || te.Refused {
				t.Fatalf("call = %v, want ErrUnavailable with a TokenError", err)
			}
			if want := `the gateway could not get a token for server "cloud" from its token_url: ` + c.says; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			if took > 1500*time.Millisecond {
				t.Errorf("the call took %s to fail, want about oauth.timeout", took)
			}
			if p.runs.Load() != 0 {
				t.Error("the tool ran")
			}
			if !logs.contains("could not get an access token for the server") {
				t.Errorf("no warning logged:\n%s", logs.String())
			}
			noSecrets(t, "the log", logs.String(), p.tokens(t))
			if c.name == "hanging" {
				o.mode.Store(opServes)
				if err := callMove(t, u); err != nil {
					t.Fatalf("the call after the endpoint is back: %v", err)
				}
				if u.Restarts() != 0 {
					t.Errorf("the session was restarted %d times", u.Restarts())
				}
			}
		})
	}
}

// TestHTTPUpstreamOAuthStartFailures: a missing secret variable, a wrong secret and an endpoint
// that repeats the credentials it got each fail the start with a reason naming what to fix, and
// never the secret.
func TestHTTPUpstreamOAuthStartFailures(t *testing.T) {
	for _, c := range []struct {
		name, secret string
		mode         int32
		says         []string
	}{
		{"missing variable", "", opServes, []string{"oauth.client_secret_env names the environment variable " + secretVariable + ", which is not set"}},
		{"wrong secret", "not-" + opClientSecret, opServes, []string{
			`the gateway could not get a token for server "cloud" from its token_url: the token endpoint answered HTTP 401 with error invalid_client`,
			`check oauth.client_id "sid1"`}},
		{"echoing endpoint", opClientSecret, opEchoes, []string{"the token endpoint answered HTTP 400 with error invalid_request", "[REDACTED]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkGoroutines(t)
			t.Setenv(secretVariable, c.secret)
			o := startOP(t, 5*time.Minute)
			o.mode.Store(c.mode)
			p := startProtected(t, o)
			s := oauthServer(o, p)
			s.StartupTimeoutSec = 2
			var logs logBuffer
			_, err := startManager(t, []config.Server{s}, Options{Logger: logs.logger()})
			var se *StartError
			if !errors.As(err, &se) {
				t.Fatalf("Start = %v, want a StartError", err)
			}
			reason := se.NotReady[0].Reason
			t.Logf("reason: %s", reason)
			for _, want := range c.says {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q does not say %q", reason, want)
				}
			}
			if requests, _ := p.counts(); requests != 0 {
				t.Errorf("%d requests reached the server without a token", requests)
			}
			for _, secret := range []string{opClientSecret, "c2lkMTp2ZXJ5c2VjcmV0"} { // and base64 of sid1:verysecret
				if strings.Contains(reason, secret) || logs.contains(secret) {
					t.Errorf("the secret is in the reason or the log:\n%s\n%s", reason, logs.String())
				}
			}
		})
	}
}

// TestOAuthTokenStaysAtTheServersOrigin: a redirect to another origin does not carry the token.
func TestOAuthTokenStaysAtTheServersOrigin(t *testing.T) {
	checkGoroutines(t)
	t.Setenv(secretVariable, opClientSecret)
	o := startOP(t, 5*time.Minute)
	var got atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization") + "|")
	}))
	defer elsewhere.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			t.Errorf("the server's own origin got Authorization %q", r.Header.Get("Authorization"))
		}
		http.Redirect(w, r, elsewhere.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer home.Close()
	u := newUpstream(config.Server{Name: "cloud", URL: home.URL}, Options{Logger: (&logBuffer{}).logger()})
	defer u.httpTransport.CloseIdleConnections()
	ts, err := u.tokenSource(&config.UpstreamOAuth{TokenURL: o.tokenURL, ClientID: opClientID, ClientSecretEnv: secretVariable})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &oauthTransport{base: u.httpTransport, origin: origin(mustURL(t, home.URL)), tokens: ts}}
	resp, err := hc.Post(home.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if v, _ := got.Load().(string); v != "|" {
		t.Errorf("the other origin got Authorization %q, want none", strings.TrimSuffix(v, "|"))
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSameLaunchSeesOAuth: a reload that changes a server's oauth settings reconnects it, one
// that only writes them anew does not.
func TestSameLaunchSeesOAuth(t *testing.T) {
	a := config.Server{Name: "cloud", URL: "https://mcp.example.com/mcp",
		OAuth: &config.UpstreamOAuth{TokenURL: "https://login.example.com/token", ClientID: "gw", ClientSecretEnv: "S", Scopes: []string{"a"}}}
	same, other, none := a, a, a
	o1, o2 := *a.OAuth, *a.OAuth
	o1.Scopes = []string{"a"}
	o2.Scopes = []string{"a", "b"}
	same.OAuth, other.OAuth, none.OAuth = &o1, &o2, nil
	if !sameLaunch(a, same) || sameLaunch(a, other) || sameLaunch(a, none) {
		t.Errorf("sameLaunch: same %v, other scopes %v, no oauth %v", sameLaunch(a, same), sameLaunch(a, other), sameLaunch(a, none))
	}
}
