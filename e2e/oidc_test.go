package e2e

// The gateway as an OAuth 2.1 resource server (auth.oidc) against a real OpenID provider: the
// zitadel/oidc OP of e2e/oidcprovider, started by each test on a loopback port.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcp-gateway/mcp-gateway/identity"
)

// The provider's service clients. planner-app's tokens name the subject svc-planner-7f3a (not
// its client id), with roles agent and planner; reader-app's lack the scope mcp:tools the
// gateway requires. short-app's live shortLife and are backdated by the gateway's leeway
// (identity.Leeway, a minute), as from a provider whose clock is a minute behind: the gateway
// takes them for shortLife and then refuses them as expired, without the test waiting a minute.
const (
	plannerApp    = "planner-app"
	plannerSecret = "planner-app-secret-3c9e1f7a"
	plannerSub    = "svc-planner-7f3a"
	readerApp     = "reader-app"
	readerSecret  = "reader-app-secret-8d2b4c6e"
	shortApp      = "short-app"
	shortSecret   = "short-app-secret-5a7f9e1b"
	shortLife     = 5 * time.Second
)

var oidcClients = []string{
	"-client", "id=" + plannerApp + ";secret=" + plannerSecret + ";sub=" + plannerSub + ";roles=agent,planner;scopes=mcp:tools",
	"-client", "id=" + readerApp + ";secret=" + readerSecret + ";scopes=mcp:read",
	"-client", "id=" + shortApp + ";secret=" + shortSecret + ";scopes=mcp:tools;ttl=" + shortLife.String() + ";backdate=" + identity.Leeway.String(),
}

// oidcGatewayConfig takes tokens of the provider at {{issuer}} for its own /mcp, with the
// roles claim as principal.roles and the scope mcp:tools required, and a rule on the planner
// role.
const oidcGatewayConfig = `
gateway:
  listen: "{{listen}}"
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-record", "{{dir}}/calls.jsonl"]
auth:
  oidc:
    issuer: "{{issuer}}"
    resource: "http://{{listen}}/mcp"
    roles_claim: roles
    required_scopes: [mcp:tools]
policies:
  default: allow
  rules:
    - id: planners-keep-off-the-shelf
      effect: deny
      when: '"planner" in principal.roles && tool == "robot__navigate_to" && args.target == "shelf"'
      reason: planners do not send the robot to the shelf
`

// oidcSetup starts the provider with args and a gateway that trusts it; it returns them, the
// config file and the gateway's resource URI.
func oidcSetup(t *testing.T, args ...string) (op *oidcProvider, gw *gatewayProc, cfg, resource string) {
	t.Helper()
	op = startOIDCProvider(t, args...)
	cfg, addr := writeConfig(t, strings.ReplaceAll(oidcGatewayConfig, "{{issuer}}", op.issuer))
	gw = startGateway(t, cfg, addr)
	return op, gw, cfg, "http://" + addr + "/mcp"
}

// TestOIDCClientCredentialsCallsATool: a service gets a token from the provider by the
// client-credentials grant, for the gateway's resource (RFC 8707), and calls the robot's tools
// with the Go SDK's client; the token's subject is the principal of the audit records and its
// roles claim reaches the policies.
func TestOIDCClientCredentialsCallsATool(t *testing.T) {
	op, gw, cfg, resource := oidcSetup(t, oidcClients...)
	addr := gw.addr

	tok := op.token(t, plannerApp, plannerSecret, resource)
	if _, claims := jwtParts(t, tok); claims["sub"] != plannerSub || claims["iss"] != op.issuer ||
		!slices.Contains(anyStrings(claims["aud"]), resource) || claims["client_id"] != plannerApp {
		t.Fatalf("the provider's token says %s; want sub %s, iss %s, aud %s, client_id %s", mustJSON(claims), plannerSub, op.issuer, resource, plannerApp)
	}

	cs := connectHTTPAs(t, addr, tok, nil)
	if res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "counter"}); res.IsError || env["success"] != true {
		t.Fatalf("navigate_to counter with the provider's token: %s", mustJSON(res))
	}
	if res, env := call(t, cs, "robot__navigate_to", map[string]any{"target": "shelf"}); !res.IsError || env["kind"] != "policy_denied" ||
		!strings.Contains(env["reason"].(string), "planners-keep-off-the-shelf") {
		t.Fatalf("the token's roles claim did not reach the policy on role planner: %s", mustJSON(res))
	}
	if got := readFile(t, filepath.Join(cfgDir(cfg), "calls.jsonl")); !strings.Contains(got, "counter") || strings.Contains(got, "shelf") {
		t.Errorf("the robot's record of calls: %q, want the counter and not the shelf", got)
	}

	var got []string
	for _, r := range auditJSONL(t, "-c", cfg, "--tool", "robot__navigate_to") {
		got = append(got, r.Principal+" "+r.Decision+" "+string(r.Args))
	}
	want := []string{
		plannerSub + ` allow:default {"target":"counter"}`,
		plannerSub + ` deny:planners-keep-off-the-shelf {"target":"shelf"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit records (principal decision args):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(gw.stderr.String(), tok) {
		t.Errorf("the gateway logged the access token")
	}
}

// TestOIDCRefusesWhatIsNotATokenForIt: the metadata document is served; a request without a
// token, and one with a token for another audience, an expired one, one signed by another key
// (under the provider's kid, under an unknown kid, or carrying its key in its header), an alg
// none one, an HMAC one keyed with the provider's public key, a tampered one and one of another
// issuer are refused with 401 and a Bearer challenge naming the metadata; a valid token without
// the required scope gets 403 insufficient_scope.
func TestOIDCRefusesWhatIsNotATokenForIt(t *testing.T) {
	dir := t.TempDir()
	keyFile, _ := newRSAKeyFile(t, dir, "op-key.pem")
	op, gw, _, resource := oidcSetup(t, append([]string{"-key", keyFile}, oidcClients...)...)
	addr := gw.addr
	// The short-lived token first, so that it has expired by the time it is tried last.
	short := op.token(t, shortApp, shortSecret, resource)
	shortIssued := time.Now()
	if a := initializeAs(t, addr, "Bearer "+short); a.code != 200 {
		t.Fatalf("the short-lived token while it lives: HTTP %d %s %s", a.code, a.challenge, a.body)
	}

	// The metadata document, at the well-known URI of the resource (RFC 9728 §3.1) and at the
	// bare well-known path.
	metadataURL := "http://" + addr + "/.well-known/oauth-protected-resource/mcp"
	for _, u := range []string{metadataURL, "http://" + addr + "/.well-known/oauth-protected-resource"} {
		var md struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			ScopesSupported      []string `json:"scopes_supported"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		if err := json.Unmarshal([]byte(getBody(t, u, 200)), &md); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if md.Resource != resource || !slices.Equal(md.AuthorizationServers, []string{op.issuer}) ||
			!slices.Contains(md.ScopesSupported, "mcp:tools") || slices.Contains(md.BearerMethods, "query") {
			t.Errorf("%s: %+v; want resource %s, authorization_servers [%s], scopes_supported with mcp:tools", u, md, resource, op.issuer)
		}
	}

	// checkChallenge fails unless a is a 401 or 403 with a Bearer challenge naming the metadata,
	// with error errCode ("" for none).
	checkChallenge := func(name string, a mcpAnswer, code int, errCode string) {
		t.Helper()
		if a.code != code {
			t.Errorf("%s: HTTP %d %q, want %d", name, a.code, a.body, code)
			return
		}
		scheme, params, err := parseChallenge(a.challenge)
		switch {
		case err != nil:
			t.Errorf("%s: WWW-Authenticate: %v", name, err)
		case !strings.EqualFold(scheme, "Bearer"):
			t.Errorf("%s: WWW-Authenticate %q is not a Bearer challenge", name, a.challenge)
		case params["resource_metadata"] != metadataURL:
			t.Errorf("%s: WWW-Authenticate %q: resource_metadata is not %s", name, a.challenge, metadataURL)
		case params["error"] != errCode:
			t.Errorf("%s: WWW-Authenticate %q: error is %q, want %q", name, a.challenge, params["error"], errCode)
		}
	}

	checkChallenge("no token", initializeAs(t, addr, ""), 401, "")

	good := op.token(t, plannerApp, plannerSecret, resource)
	header, claims := jwtParts(t, good)
	if a := initializeAs(t, addr, "Bearer "+good); a.code != 200 {
		t.Fatalf("a valid token: HTTP %d %s %s", a.code, a.challenge, a.body)
	}

	// The provider's public key, as an HMAC secret for the algorithm-confusion token.
	resp, err := http.Get(op.issuer + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	var jwks jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&jwks); err != nil || len(jwks.Keys) == 0 {
		t.Fatalf("the provider's JWKS: %v %+v", err, jwks)
	}
	resp.Body.Close()
	pubDER, err := x509.MarshalPKIXPublicKey(jwks.Keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := header["kid"].(string)
	if kid != op.kid {
		t.Fatalf("the token's kid %q is not the provider's %q", kid, op.kid)
	}
	tampered := copyClaims(claims)
	tampered["sub"], tampered["roles"] = "operator", []string{"admin"}

	// A second provider with the same key at another address: its tokens verify with the key
	// the gateway trusts, but their issuer is not the one it trusts.
	other := startOIDCProvider(t, append([]string{"-key", keyFile}, oidcClients...)...)

	// Each is refused for what is wrong with it: error_description (RFC 6750) says so.
	for _, c := range []struct{ name, token, says string }{
		{"a token for another resource", op.token(t, plannerApp, plannerSecret, "http://127.0.0.1:1/another/mcp"), "audience"},
		{"a token for the client itself (no resource asked)", op.token(t, plannerApp, plannerSecret, ""), "audience"},
		{"a token signed by another key, under the provider's kid", signWith(t, jose.RS256, stranger, kid, claims), "signature"},
		{"a token signed by another key, under a kid the provider never had", signWith(t, jose.RS256, stranger, "kid-of-nobody", claims), "kid-of-nobody"},
		{"a token signed by another key that carries that key (jwk header)", signEmbedded(t, stranger, claims), "signature"},
		{"an alg none token", unsigned(claims, kid), "none"},
		{"an alg none token without kid", unsigned(claims, ""), "none"},
		{"an HS256 token keyed with the provider's public key", signWith(t, jose.HS256, pubPEM, kid, claims), "HS256"},
		{"a tampered token", withClaims(good, tampered), "signature"},
		{"a token of another issuer signed with the same key", other.token(t, plannerApp, plannerSecret, resource), other.issuer},
		{"not a JWT", "not-a-jwt-at-all", ""},
	} {
		a := initializeAs(t, addr, "Bearer "+c.token)
		checkChallenge(c.name, a, 401, "invalid_token")
		if _, params, _ := parseChallenge(a.challenge); !strings.Contains(params["error_description"], c.says) {
			t.Errorf("%s: WWW-Authenticate %q: error_description does not say %q", c.name, a.challenge, c.says)
		}
	}

	// A valid token without the required scope: 403 insufficient_scope, naming the scope.
	reader := op.token(t, readerApp, readerSecret, resource)
	a := initializeAs(t, addr, "Bearer "+reader)
	checkChallenge("a token without the scope mcp:tools", a, 403, "insufficient_scope")
	if _, params, _ := parseChallenge(a.challenge); !slices.Contains(strings.Fields(params["scope"]), "mcp:tools") {
		t.Errorf("a token without the scope: WWW-Authenticate %q does not name the scope mcp:tools", a.challenge)
	}

	// The short-lived token, once past its exp and the gateway's leeway.
	time.Sleep(time.Until(shortIssued.Add(shortLife + time.Second)))
	a = initializeAs(t, addr, "Bearer "+short)
	checkChallenge("an expired token", a, 401, "invalid_token")
	if _, params, _ := parseChallenge(a.challenge); !strings.Contains(params["error_description"], "expired") {
		t.Errorf("an expired token: WWW-Authenticate %q: error_description does not say expired", a.challenge)
	}

	// Nothing of the tokens reaches the log.
	for _, secret := range []string{good, short, reader} {
		if strings.Contains(gw.stderr.String(), secret) {
			t.Errorf("the gateway logged a token")
		}
	}
}

// TestOIDCPicksUpAKeyRotation: the provider is restarted on its port with a new key, publishing
// the old one beside it; the gateway, not restarted, takes tokens of the new key (whose kid it
// did not know) once it may fetch the keys again (identity.DefaultMinRefreshGap after its last
// fetch), and still those of the old one. Then the provider is restarted with a third key only:
// the old keys' tokens are still taken until the gateway fetches the keys again, which the
// third key's first token makes it do; then that token is taken and the retired keys' tokens
// are refused.
func TestOIDCPicksUpAKeyRotation(t *testing.T) {
	dir := t.TempDir()
	key1, _ := newRSAKeyFile(t, dir, "key1.pem")
	key2, _ := newRSAKeyFile(t, dir, "key2.pem")
	key3, _ := newRSAKeyFile(t, dir, "key3.pem")
	op, gw, _, resource := oidcSetup(t, append([]string{"-key", key1}, oidcClients...)...)
	addr := gw.addr
	kid1 := op.kid
	tok1 := op.token(t, plannerApp, plannerSecret, resource)
	expect := func(name, tok string, code int) {
		t.Helper()
		if a := initializeAs(t, addr, "Bearer "+tok); a.code != code {
			t.Errorf("%s: HTTP %d %s %s, want %d", name, a.code, a.challenge, a.body, code)
		}
	}
	expect("the first key's token", tok1, 200)

	op.restart(append([]string{"-key", key2, "-publish", key1}, oidcClients...)...)
	if op.kid == kid1 {
		t.Fatalf("the new key has the old kid %s", kid1)
	}
	tok2 := op.token(t, plannerApp, plannerSecret, resource)
	took := waitAccepted(t, addr, tok2, "the second key's token")
	t.Logf("the second key's token (new kid) was taken %s after the rotation", took.Round(time.Millisecond))
	expect("the first key's token, still published", tok1, 200)

	op.restart(append([]string{"-key", key3}, oidcClients...)...)
	// The gateway keeps the keys it fetched until it fetches them again (hourly, or for a kid it
	// does not know): a key the provider no longer publishes is trusted until then.
	expect("the first key's token, no longer published, before the gateway fetches the keys again", tok1, 200)
	tok3 := op.token(t, plannerApp, plannerSecret, resource)
	took = waitAccepted(t, addr, tok3, "the third key's token")
	t.Logf("the third key's token was taken %s after the second rotation", took.Round(time.Millisecond))
	for _, c := range []struct{ name, tok string }{{"the first key's token, retired", tok1}, {"the second key's token, retired", tok2}} {
		a := initializeAs(t, addr, "Bearer "+c.tok)
		if _, params, _ := parseChallenge(a.challenge); a.code != 401 || params["error"] != "invalid_token" {
			t.Errorf("%s: HTTP %d %s, want 401 invalid_token", c.name, a.code, a.challenge)
		}
	}
}

// waitAccepted polls the gateway with tok until it is taken, refused meanwhile only with 401
// invalid_token, within the gateway's bound on fetching the keys again; it returns how long
// that took.
func waitAccepted(t *testing.T, addr, tok, name string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(identity.DefaultMinRefreshGap + 5*time.Second)
	for {
		a := initializeAs(t, addr, "Bearer "+tok)
		if a.code == 200 {
			return time.Since(start)
		}
		if _, params, _ := parseChallenge(a.challenge); a.code != 401 || params["error"] != "invalid_token" {
			t.Fatalf("%s: HTTP %d %s %s while the gateway had not the new key, want 401 invalid_token", name, a.code, a.challenge, a.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still refused %s after the rotation: %s", name, time.Since(start).Round(time.Millisecond), a.challenge)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestOIDCInspectorWithATokenOfTheProvider: the MCP Inspector's CLI calls a tool over
// streamable HTTP with a client-credentials token of the provider in its --header.
func TestOIDCInspectorWithATokenOfTheProvider(t *testing.T) {
	node, cli := inspectorCLI(t)
	op, gw, cfg, resource := oidcSetup(t, oidcClients...)
	tok := op.token(t, plannerApp, plannerSecret, resource)
	out, errOut, err := runInspector(t, node, cli, t.TempDir(), nil,
		"--transport", "http", "--server-url", resource, "--header", "Authorization: Bearer "+tok,
		"--method", "tools/call", "--tool-name", "robot__wait", "--tool-arg", "timeout_sec=0.2")
	if err != nil {
		t.Fatalf("inspector: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	checkInspectorWait(t, out, errOut)
	if r := auditJSONL(t, "-c", cfg, "--tool", "robot__wait"); len(r) != 1 || r[0].Principal != plannerSub {
		t.Errorf("audit records of the Inspector's call: %+v, want one of principal %s", r, plannerSub)
	}
	if strings.Contains(gw.stderr.String(), tok) {
		t.Errorf("the gateway logged the access token")
	}
}

// TestOIDCInspectorSignsInThroughTheMetadata: the MCP Inspector's CLI, given only the gateway's
// URL and a client id registered at the provider, is refused with 401, reads the gateway's
// Protected Resource Metadata (which the challenge names, and which alone names the provider),
// then the provider's metadata, and runs its OAuth flow: the authorization-code grant with PKCE
// and the resource parameter, the test acting as the browser that signs the example user in at
// the provider's login page. It then calls the tool with the token it got, and the user's
// subject is the principal of the audit record.
//
// The Inspector's CLI (2.12) has no client-credentials flow: its OAuth is the authorization-code
// grant (with a static --client-id and optional --client-secret, dynamic registration, or a
// client metadata document), and without a TTY it starts it only with MCP_AUTO_OPEN_ENABLED=true.
// The provider offers no dynamic registration, so the client id is registered with it.
func TestOIDCInspectorSignsInThroughTheMetadata(t *testing.T) {
	node, cli := inspectorCLI(t)
	callback := "http://" + freeAddr(t) + "/oauth/callback"
	op, _, cfg, resource := oidcSetup(t, append([]string{"-native-client", "id=mcp-inspector;redirect=" + callback + ";scopes=mcp:tools"}, oidcClients...)...)

	// The Inspector is ended as soon as the sign-in fails: it would wait for its callback.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	browsed := make(chan error, 1)
	var authURL *url.URL
	onStderr := func(line string) {
		// "Please navigate to: URL"
		_, raw, ok := strings.Cut(line, "Please navigate to: ")
		if !ok || authURL != nil {
			return
		}
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			browsed <- err
			return
		}
		authURL = u
		go func() {
			err := signIn(op, u, callback, "test-user@127.0.0.1", "verysecure")
			browsed <- err
			if err != nil {
				cancel()
			}
		}()
	}
	// Without a TTY the CLI starts its OAuth flow only when told to open the browser, which
	// BROWSER makes a no-op: the test is the browser.
	env := []string{"MCP_AUTO_OPEN_ENABLED=true", "BROWSER=true"}
	out, errOut, err := runInspectorLines(ctx, t, node, cli, t.TempDir(), env, onStderr,
		"--transport", "http", "--server-url", resource, "--client-id", "mcp-inspector", "--callback-url", callback,
		"--method", "tools/call", "--tool-name", "robot__wait", "--tool-arg", "timeout_sec=0.2")
	if authURL == nil {
		t.Fatalf("the Inspector asked for no sign-in: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	select {
	case berr := <-browsed:
		if berr != nil {
			t.Fatalf("signing in at the provider: %v\ninspector stderr: %s", berr, errOut)
		}
	default:
		t.Fatalf("the sign-in had not ended when the Inspector did: %v\nstderr: %s", err, errOut)
	}
	if err != nil {
		t.Fatalf("inspector: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}

	// The Inspector went where the metadata points (nothing else told it of the provider): the
	// provider's authorization endpoint, for the gateway's resource, with PKCE.
	q := authURL.Query()
	if got := authURL.Scheme + "://" + authURL.Host; got != op.issuer || q.Get("client_id") != "mcp-inspector" ||
		q.Get("resource") != resource || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		!slices.Contains(strings.Fields(q.Get("scope")), "mcp:tools") {
		t.Errorf("the Inspector's authorization request %s: want the provider %s, client mcp-inspector, resource %s, PKCE S256, scope mcp:tools", authURL, op.issuer, resource)
	}
	checkInspectorWait(t, out, errOut)
	if r := auditJSONL(t, "-c", cfg, "--tool", "robot__wait"); len(r) != 1 || r[0].Principal != "id1" {
		t.Errorf("audit records of the Inspector's call: %+v, want one of principal id1 (the example user's subject)", r)
	}
}

// signIn plays the browser of an authorization-code flow at the provider: it opens the
// authorization URL, is sent to the example login page, posts the user's name and password,
// and follows the redirects to the client's callback, which must answer 200.
func signIn(op *oidcProvider, authURL *url.URL, callback, username, password string) error {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, err := hc.Get(authURL.String())
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	login := resp.Request.URL
	id := login.Query().Get("authRequestID")
	if resp.StatusCode != 200 || login.Path != "/login/username" || id == "" {
		return &signInError{"the authorization request did not lead to the login page", resp.StatusCode, login.String(), string(page)}
	}
	resp, err = hc.PostForm(op.issuer+"/login/username", url.Values{"id": {id}, "username": {username}, "password": {password}})
	if err != nil {
		return err
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Request.URL.String(), callback+"?") {
		return &signInError{"the sign-in did not lead back to the client's callback", resp.StatusCode, resp.Request.URL.String(), string(page)}
	}
	return nil
}

type signInError struct {
	what   string
	status int
	at     string
	page   string
}

func (e *signInError) Error() string {
	return e.what + ": HTTP " + http.StatusText(e.status) + " at " + e.at + "\n" + e.page
}

// runInspector runs the MCP Inspector's CLI with --cli --format json and args, with HOME (where
// it keeps its OAuth state) at home and env added to its environment.
func runInspector(t *testing.T, node, cli, home string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return runInspectorLines(ctx, t, node, cli, home, env, nil, args...)
}

// runInspectorLines is runInspector until ctx ends, with each line of the CLI's stderr handed
// to onStderr as it comes.
func runInspectorLines(ctx context.Context, t *testing.T, node, cli, home string, env []string, onStderr func(string), args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "--cli", "--format", "json"}, args...)...)
	base := os.Environ()
	for _, drop := range []string{"HOME=", "DISPLAY=", "WAYLAND_DISPLAY=", "BROWSER=", "MCP_"} {
		base = slicesWithout(base, drop)
	}
	// Its secrets (tokens, client registrations) in memory: there is no OS keychain here.
	cmd.Env = append(append(base, "HOME="+home, "MCP_INSPECTOR_SECRET_STORE=memory"), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	pipe, perr := cmd.StderrPipe()
	if perr != nil {
		t.Fatal(perr)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		errb.WriteString(sc.Text() + "\n")
		if onStderr != nil {
			onStderr(sc.Text())
		}
	}
	err = cmd.Wait()
	return out.String(), errb.String(), err
}

// checkInspectorWait fails unless out is the Inspector's JSON result of robot__wait for 0.2s.
func checkInspectorWait(t *testing.T, out, errOut string) {
	t.Helper()
	var res struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("inspector output: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if env := res.Result.StructuredContent; res.Result.IsError || env["success"] != true || env["observation"] != "waited 0.2s" {
		t.Fatalf("tools/call through the Inspector: %s\nstderr: %s", out, errOut)
	}
}

func anyStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, s := range x {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func copyClaims(c map[string]any) map[string]any {
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}
