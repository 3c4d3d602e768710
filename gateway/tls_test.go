package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/testpki"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// testCA is a CA of the tests (internal/testpki), its certificate as PEM in pem.
type testCA struct {
	*testpki.CA
	pem []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	ca := testpki.NewCA(t, name)
	return &testCA{CA: ca, pem: ca.PEM}
}

// issue makes a certificate for cn signed by ca, valid from notBefore to notAfter, for a server
// (127.0.0.1) or a client; it returns the certificate's and the key's PEM.
func (ca *testCA) issue(t *testing.T, cn string, client bool, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, _ = ca.Issue(t, cn, client, notBefore, notAfter)
	return certPEM, keyPEM
}

func (ca *testCA) server(t *testing.T) (certPEM, keyPEM []byte) {
	return ca.issue(t, "gateway", false, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// clientCert is a client certificate for cn signed by ca, for a tls.Config.
func (ca *testCA) clientCert(t *testing.T, cn string) tls.Certificate { return ca.ClientCert(t, cn) }

func writeTestFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// tlsConfigIn parses src as dir/cell.yaml.
func tlsConfigIn(t *testing.T, dir, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(filepath.Join(dir, "cell.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// tlsFilesConfig is a config whose gateway.tls names server.crt (line 4), server.key (line 5)
// and clients.pem (line 6) beside it.
const tlsFilesConfig = `servers: [{name: arm, command: arm}]
gateway:
  tls:
    cert_file: server.crt
    key_file: server.key
    client_ca_file: clients.pem
    client_roles: {ops: [admin], planner-7: [agent]}
`

// Every problem of the files is reported at the line that names the file, and a certificate
// that is not valid yet is only a warning.
func TestCheckTLSReportsEachFileProblemWithItsLine(t *testing.T) {
	ca, other := newTestCA(t, "cell CA"), newTestCA(t, "other CA")
	goodCert, goodKey := ca.server(t)
	_, otherKey := other.server(t)
	expired, expiredKey := ca.issue(t, "gateway", false, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
	early, earlyKey := ca.issue(t, "gateway", false, time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	clientOnly, clientOnlyKey := ca.issue(t, "gateway", true, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("secret bytes")})
	for _, c := range []struct {
		name               string
		cert, key, ca      []byte // nil: the file does not exist
		keyMode            os.FileMode
		dirAsKey           bool
		problems, warnings []string
	}{
		{name: "good", cert: goodCert, key: goodKey, ca: ca.pem},
		{name: "missing files", problems: []string{
			"cell.yaml:4: gateway.tls.cert_file: " + "DIR/server.crt does not exist; name the PEM file of the gateway's certificate",
			"cell.yaml:5: gateway.tls.key_file: DIR/server.key does not exist",
			"cell.yaml:6: gateway.tls.client_ca_file: DIR/clients.pem does not exist",
		}},
		{name: "a directory as the key", cert: goodCert, dirAsKey: true, ca: ca.pem, problems: []string{
			"cell.yaml:5: gateway.tls.key_file: DIR/server.key cannot be read: is a directory"}},
		{name: "a key that does not match", cert: goodCert, key: otherKey, ca: ca.pem, problems: []string{
			"cell.yaml:5: gateway.tls.key_file: DIR/server.key holds a private key that does not match the certificate in DIR/server.crt (line 4)"}},
		{name: "swapped", cert: goodKey, key: goodCert, ca: ca.pem, problems: []string{
			"cell.yaml:4: gateway.tls.cert_file: DIR/server.crt holds no PEM certificate (-----BEGIN CERTIFICATE-----) but a private key: are cert_file and key_file swapped?"}},
		{name: "a key that is not PEM", cert: goodCert, key: []byte("not pem\n"), ca: ca.pem, problems: []string{
			"cell.yaml:5: gateway.tls.key_file: DIR/server.key holds no PEM data"}},
		{name: "an encrypted key", cert: goodCert, key: encrypted, ca: ca.pem, problems: []string{
			"cell.yaml:5: gateway.tls.key_file: DIR/server.key holds an encrypted private key"}},
		{name: "a certificate as the key", cert: goodCert, key: append(append([]byte{}, goodCert...), goodCert...), ca: ca.pem, problems: []string{
			"cell.yaml:5: gateway.tls.key_file: DIR/server.key holds a certificate, not a private key"}},
		{name: "expired", cert: expired, key: expiredKey, ca: ca.pem, problems: []string{
			"cell.yaml:4: gateway.tls.cert_file: the certificate in DIR/server.crt (CN=gateway, serial", "expired at"}},
		{name: "not valid yet", cert: early, key: earlyKey, ca: ca.pem, warnings: []string{
			"cell.yaml:4: gateway.tls.cert_file: warning: the certificate in DIR/server.crt (CN=gateway) is valid only from"}},
		{name: "a client certificate", cert: clientOnly, key: clientOnlyKey, ca: ca.pem, problems: []string{
			"cell.yaml:4: gateway.tls.cert_file: the certificate in DIR/server.crt (CN=gateway) is not for a server"}},
		{name: "a key others can read", cert: goodCert, key: goodKey, keyMode: 0o644, ca: ca.pem, warnings: []string{
			"cell.yaml:5: gateway.tls.key_file: warning: DIR/server.key can be read by other users (mode 0644)"}},
		{name: "a CA bundle without a certificate", cert: goodCert, key: goodKey, ca: goodKey, problems: []string{
			"cell.yaml:6: gateway.tls.client_ca_file: DIR/clients.pem holds no PEM certificate"}},
		{name: "a CA bundle with a broken certificate", cert: goodCert, key: goodKey,
			ca: append(append([]byte{}, ca.pem...), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})...), problems: []string{
				"cell.yaml:6: gateway.tls.client_ca_file: DIR/clients.pem holds a PEM block 2 that is not a valid certificate"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.cert != nil {
				writeTestFile(t, filepath.Join(dir, "server.crt"), c.cert, 0o644)
			}
			mode := c.keyMode
			if mode == 0 {
				mode = 0o600
			}
			if c.key != nil {
				writeTestFile(t, filepath.Join(dir, "server.key"), c.key, mode)
			}
			if c.dirAsKey {
				if err := os.Mkdir(filepath.Join(dir, "server.key"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if c.ca != nil {
				writeTestFile(t, filepath.Join(dir, "clients.pem"), c.ca, 0o644)
			}
			cfg := tlsConfigIn(t, dir, tlsFilesConfig)
			problems, warnings := CheckTLS(cfg)
			check := func(what string, got, want []string) {
				t.Helper()
				joined := strings.Join(got, "\n")
				if len(want) == 0 && len(got) > 0 {
					t.Errorf("%s: %s, want none", what, joined)
				}
				for _, w := range want {
					if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(joined, w) {
						t.Errorf("%s lack %q:\n%s", what, w, joined)
					}
				}
				for _, g := range got {
					if !strings.HasPrefix(g, filepath.Join(dir, "cell.yaml")+":") {
						t.Errorf("%q does not begin with the config file and line", g)
					}
				}
			}
			check("problems", problems, c.problems)
			check("warnings", warnings, c.warnings)
			if strings.Contains(strings.Join(problems, ""), "secret bytes") {
				t.Errorf("a problem repeats the key's content")
			}
			_, _, err := LoadTLS(cfg)
			if (err != nil) != (len(c.problems) > 0) {
				t.Errorf("LoadTLS: %v, want an error exactly when there are problems", err)
			}
		})
	}
}

func TestCheckTLSNamesAFileThisUserCannotRead(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	ca := newTestCA(t, "cell CA")
	c, k := ca.server(t)
	writeTestFile(t, filepath.Join(dir, "server.crt"), c, 0o644)
	writeTestFile(t, filepath.Join(dir, "server.key"), k, 0o000)
	writeTestFile(t, filepath.Join(dir, "clients.pem"), ca.pem, 0o644)
	problems, _ := CheckTLS(tlsConfigIn(t, dir, tlsFilesConfig))
	if want := "cell.yaml:5: gateway.tls.key_file: " + filepath.Join(dir, "server.key") + " cannot be read by this user"; !strings.Contains(strings.Join(problems, "\n"), want) {
		t.Errorf("problems %q lack %q", problems, want)
	}
}

// mtlsGateway serves a gateway of tlsFilesConfig, with client_auth given (or the default when
// ""), on a TLS listener of its own; it returns the address and the CA of the certificates.
func mtlsGateway(t *testing.T, clientAuth string) (addr string, ca *testCA) {
	t.Helper()
	dir := t.TempDir()
	ca = newTestCA(t, "cell CA")
	c, k := ca.server(t)
	writeTestFile(t, filepath.Join(dir, "server.crt"), c, 0o644)
	writeTestFile(t, filepath.Join(dir, "server.key"), k, 0o600)
	writeTestFile(t, filepath.Join(dir, "clients.pem"), ca.pem, 0o644)
	src := tlsFilesConfig + authConfig[strings.Index(authConfig, "auth:"):]
	if clientAuth != "" {
		src = strings.Replace(src, "    client_roles:", "    client_auth: "+clientAuth+"\n    client_roles:", 1)
	}
	cfg := tlsConfigIn(t, dir, src)
	creds, err := LoadCredentials(cfg, lookupIn(authEnv))
	if err != nil {
		t.Fatal(err)
	}
	lt, _, err := LoadTLS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Store: st, AdminToken: adminToken, TLS: lt, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, limited := g.NewHTTPServer(ln, creds)
	go func() { _ = srv.Serve(limited) }()
	t.Cleanup(func() {
		srv.Close()
		st.Close()
	})
	return ln.Addr().String(), ca
}

// tlsGet sends GET url with a client presenting certs and trusting ca.
func tlsGet(t *testing.T, url string, ca *testCA, header map[string]string, certs ...tls.Certificate) (answer, error) {
	t.Helper()
	return tlsDo(t, "GET", url, "", ca, header, certs...)
}

// tlsDo sends a request with a client presenting certs and trusting ca.
func tlsDo(t *testing.T, method, url, body string, ca *testCA, header map[string]string, certs ...tls.Certificate) (answer, error) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	tc := &tls.Config{RootCAs: roots}
	if len(certs) > 0 {
		// Sent whatever CAs the server names: a certificate of another CA too.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, body: string(b)}, nil
}

// A verified client certificate's subject is the principal, with the roles client_roles gives
// it; a bearer token, when sent, decides instead.
func TestClientCertificateIsThePrincipal(t *testing.T) {
	addr, ca := mtlsGateway(t, "")
	base := "https://" + addr
	ops, planner, stranger := ca.clientCert(t, "ops"), ca.clientCert(t, "planner-7"), ca.clientCert(t, "stranger")
	for _, c := range []struct {
		name   string
		cert   tls.Certificate
		header map[string]string
		code   int
		says   string
	}{
		{"ops (role admin)", ops, nil, 200, `"upstreams"`},
		{"planner-7 (role agent)", planner, nil, 403, "principal planner-7 lacks the role admin"},
		{"a name client_roles does not list", stranger, nil, 403, "principal stranger lacks the role admin"},
		{"the planner's bearer token on ops's connection", ops, bearer(plannerToken), 403, "principal planner lacks the role admin"},
		{"the operator's bearer token on the planner's connection", planner, bearer(operatorToken), 200, `"upstreams"`},
		{"a wrong bearer token on ops's connection", ops, bearer("not-a-token-of-this-gateway"), 401, "not valid"},
		// Names that are not the CA's to give: the gateway's own, a static token's principal,
		// and one that prints as another (a zero-width space).
		{"a certificate named admin", ca.clientCert(t, "admin"), nil, 401, "a bearer token is required"},
		{"a certificate named after auth.tokens' planner", ca.clientCert(t, "planner"), nil, 401, "a bearer token is required"},
		{"a certificate named ops with a zero-width space", ca.clientCert(t, "ops\u200b"), nil, 401, "a bearer token is required"},
	} {
		a, err := tlsGet(t, base+"/admin/status", ca, c.header, c.cert)
		if err != nil || a.code != c.code || !strings.Contains(a.body, c.says) {
			t.Errorf("%s: HTTP %d %q, %v; want %d saying %q", c.name, a.code, a.body, err, c.code, c.says)
		}
	}
	// Required: no connection without a certificate, or with one of another CA.
	if _, err := tlsGet(t, base+"/healthz", ca, nil); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a client without a certificate: %v, want the handshake refused", err)
	}
	if _, err := tlsGet(t, base+"/healthz", ca, nil, newTestCA(t, "other CA").clientCert(t, "ops")); err == nil {
		t.Errorf("a certificate of another CA was accepted")
	}
}

// With client_auth verify_if_given, a client without a certificate connects, and /mcp needs a
// bearer token from it; probes stay open.
func TestClientCertificateVerifiedIfGiven(t *testing.T) {
	addr, ca := mtlsGateway(t, config.ClientAuthVerifyIfGiven)
	base := "https://" + addr
	if a, err := tlsGet(t, base+"/healthz", ca, nil); err != nil || a.code != 200 {
		t.Errorf("/healthz without a certificate: %d, %v", a.code, err)
	}
	a, err := tlsGet(t, base+"/mcp", ca, nil)
	if err != nil || a.code != 401 || !strings.Contains(a.body, "client certificate signed by a CA of gateway.tls.client_ca_file") {
		t.Errorf("/mcp without a certificate or a token: HTTP %d %q, %v", a.code, a.body, err)
	}
	if a, err := tlsGet(t, base+"/admin/status", ca, nil, ca.clientCert(t, "ops")); err != nil || a.code != 200 {
		t.Errorf("/admin/status with ops's certificate: HTTP %d %q, %v", a.code, a.body, err)
	}
	// The certificate's principal reaches the MCP SDK, which needs it to open a session.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	mcpHeader := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	if a, err := tlsDo(t, "POST", base+"/mcp", initialize, ca, mcpHeader, ca.clientCert(t, "planner-7")); err != nil || a.code != 200 || !strings.Contains(a.body, `"protocolVersion"`) {
		t.Errorf("initialize with planner-7's certificate: HTTP %d %q, %v", a.code, a.body, err)
	}
	if _, err := tlsGet(t, base+"/healthz", ca, nil, newTestCA(t, "other CA").clientCert(t, "ops")); err == nil {
		t.Errorf("a certificate of another CA was accepted")
	}
}

// A reload serves renewed files to new connections; broken ones are refused and the
// certificate in force stays.
func TestReloadTLSRenewsTheCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cell CA")
	c, k := ca.server(t)
	writeTestFile(t, filepath.Join(dir, "server.crt"), c, 0o644)
	writeTestFile(t, filepath.Join(dir, "server.key"), k, 0o600)
	writeTestFile(t, filepath.Join(dir, "clients.pem"), ca.pem, 0o644)
	cfg := tlsConfigIn(t, dir, tlsFilesConfig)
	lt, _, err := LoadTLS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{cfg: cfg, opts: Options{TLS: lt}, log: slog.New(slog.DiscardHandler)}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", lt.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = conn.(*tls.Conn).Handshake(); conn.Close() }()
		}
	}()
	served := func() string {
		t.Helper()
		roots := x509.NewCertPool()
		roots.AddCert(ca.Cert)
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{ca.clientCert(t, "ops")}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := served()

	renewed, renewedKey := ca.server(t)
	writeTestFile(t, filepath.Join(dir, "server.crt"), renewed, 0o644)
	writeTestFile(t, filepath.Join(dir, "server.key"), renewedKey, 0o600)
	apply, problems := g.reloadTLS(tlsConfigIn(t, dir, tlsFilesConfig))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if got := served(); got != first {
		t.Fatalf("the renewed certificate is served before the reload is applied")
	}
	var rep ReloadReport
	apply(&rep)
	second := served()
	if second == first || !strings.Contains(rep.TLS, "serial ") || len(rep.NeedsRestart) > 0 {
		t.Fatalf("after the reload: serial %s (was %s), report %+v", second, first, rep)
	}

	writeTestFile(t, filepath.Join(dir, "server.key"), []byte("truncated"), 0o600)
	if _, problems := g.reloadTLS(tlsConfigIn(t, dir, tlsFilesConfig)); len(problems) != 1 || !strings.Contains(problems[0], "cell.yaml:5: gateway.tls.key_file:") {
		t.Errorf("a broken key: %q", problems)
	}
	if got := served(); got != second {
		t.Errorf("a refused reload changed the certificate served")
	}

	// Turning client certificates off waits for a restart.
	writeTestFile(t, filepath.Join(dir, "server.key"), renewedKey, 0o600)
	apply, problems = g.reloadTLS(tlsConfigIn(t, dir, "servers: [{name: arm, command: arm}]\ngateway:\n  tls: {cert_file: server.crt, key_file: server.key}\n"))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	rep = ReloadReport{}
	apply(&rep)
	if len(rep.NeedsRestart) != 1 || rep.NeedsRestart[0] != "gateway.tls.client_ca_file" {
		t.Errorf("needs_restart %v, want gateway.tls.client_ca_file", rep.NeedsRestart)
	}
	if got := served(); got != second {
		t.Errorf("serial %s after a reload of the same files, want %s", got, second)
	}
}

// Over TLS the connection cap holds as without: connections busy with a request are not taken
// for silent ones, and a connection refused at the cap is answered 503 over TLS.
func TestConnLimiterOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cell CA")
	c, k := ca.server(t)
	writeTestFile(t, filepath.Join(dir, "server.crt"), c, 0o644)
	writeTestFile(t, filepath.Join(dir, "server.key"), k, 0o600)
	lt, _, err := LoadTLS(tlsConfigIn(t, dir, "servers: [{name: arm, command: arm}]\ngateway:\n  tls: {cert_file: server.crt, key_file: server.key}\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gateway{cfg: &config.Config{Gateway: config.Gateway{MaxConnections: 2}}, opts: Options{TLS: lt}, log: slog.New(slog.DiscardHandler)}
	release := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, limited := g.newHTTPServer(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			<-release
		}
	}))
	go func() { _ = srv.Serve(limited) }()
	defer srv.Close()
	defer close(release)
	base := "https://" + ln.Addr().String()
	for range 2 {
		go func() { _, _ = tlsGet(t, base+"/busy", ca, nil) }()
	}
	time.Sleep(300 * time.Millisecond) // both in their handlers
	a, err := tlsGet(t, base+"/other", ca, nil)
	if err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "gateway.max_connections") {
		t.Fatalf("a third connection: HTTP %d %q, %v; want 503 naming gateway.max_connections", a.code, a.body, err)
	}
}

// The names an identity provider's token may not be: the gateway's own, auth.tokens'
// principals, and the subjects gateway.tls.client_roles gives roles to; and those a client
// certificate may not be: the same but client_roles'.
func TestPrincipalNamespaces(t *testing.T) {
	cfg := &config.Config{
		Auth:    config.Auth{Tokens: []config.Token{{Principal: "planner"}}},
		Gateway: config.Gateway{TLS: &config.TLS{ClientRoles: map[string][]string{"ops": {"admin"}, "cell-7": nil}}},
	}
	want := []string{anonymous, adminPrincipal, agentPrincipal, "planner", "cell-7", "ops"}
	if got := tokenReserved(cfg); !slices.Equal(got, want) {
		t.Errorf("tokens may not be %v, want %v", got, want)
	}
	if got := reservedPrincipals(cfg); !slices.Equal(got, want[:4]) {
		t.Errorf("certificates may not be %v, want %v", got, want[:4])
	}
}
