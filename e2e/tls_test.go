package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/testpki"
)

// TLS on the listener (gateway.tls), with certificates the tests make: a CA, a server
// certificate for 127.0.0.1 and client certificates.

// pki is a CA of the tests (internal/testpki).
type pki struct{ *testpki.CA }

func newPKI(t *testing.T, name string) *pki { return &pki{testpki.NewCA(t, name)} }

func (p *pki) pem() []byte { return p.PEM }

// issue makes a certificate for cn, for a server on 127.0.0.1 or for a client, valid from an
// hour ago for a day, and returns it and its key as PEM, and its serial number.
func (p *pki) issue(t *testing.T, cn string, client bool) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	return p.Issue(t, cn, client, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// client is a client certificate for cn.
func (p *pki) client(t *testing.T, cn string) *tls.Certificate {
	t.Helper()
	pair := p.ClientCert(t, cn)
	return &pair
}

// writeServerCert writes a fresh server certificate and its key to dir/tls/server.crt and
// server.key, each replaced whole (renamed into place, as a renewal tool does), and returns its
// serial number.
func (p *pki) writeServerCert(t *testing.T, dir string) *big.Int {
	t.Helper()
	c, k, serial := p.issue(t, "gateway", false)
	replaceFile(t, filepath.Join(dir, "tls", "server.crt"), c, 0o644)
	replaceFile(t, filepath.Join(dir, "tls", "server.key"), k, 0o600)
	return serial
}

func replaceFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsClientConfig trusts ca and presents cert (nil: none), whichever CAs the server names.
func tlsClientConfig(ca *pki, cert *tls.Certificate) *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	c := &tls.Config{RootCAs: roots}
	if cert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return c
}

// httpsClient is an HTTP client over TLS with tc, adding the bearer token unless it is "".
func httpsClient(tc *tls.Config, token string) *http.Client {
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: tc}
	if token != "" {
		rt = bearerOver{token: token, base: rt}
	}
	return &http.Client{Transport: rt, Timeout: 30 * time.Second}
}

// bearerOver adds "Authorization: Bearer <token>" to every request it sends through base.
type bearerOver struct {
	token string
	base  http.RoundTripper
}

func (b bearerOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// waitReadyTLS waits until /readyz answers 200 over TLS with tc.
func (p *gatewayProc) waitReadyTLS(t *testing.T, tc *tls.Config) {
	t.Helper()
	hc := httpsClient(tc, "")
	defer hc.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("gateway exited before it was ready: %v\n%s", p.err, p.stderr.String())
		default:
		}
		if resp, err := hc.Get("https://" + p.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("gateway not ready over TLS within 30s\n%s", p.stderr.String())
}

// connectHTTPS connects the Go SDK's client to the gateway's /mcp over TLS with hc.
func connectHTTPS(t *testing.T, addr string, hc *http.Client) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-tls-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "https://" + addr + "/mcp", HTTPClient: hc}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// servedSerial is the serial number of the certificate a new TLS connection to addr gets.
func servedSerial(t *testing.T, addr string, tc *tls.Config) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, tc)
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// hangup sends SIGHUP and waits until the gateway logs the reload's outcome, which contains
// says, for the n-th time.
func (p *gatewayProc) hangup(t *testing.T, says string, n int) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if strings.Count(p.stderr.String(), says) >= n {
			return
		}
	}
	t.Fatalf("no %q (%d) in the log after SIGHUP:\n%s", says, n, p.stderr.String())
}

const tlsConfig = `
gateway:
  listen: "{{listen}}"
  tls:
    cert_file: tls/server.crt
    key_file: tls/server.key
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_OPERATOR_TOKEN}
`

func TestTLSListenerServesMCPAndRenewsItsCertificateOnHangup(t *testing.T) {
	t.Setenv("E2E_OPERATOR_TOKEN", operatorToken)
	cfg, addr := writeConfig(t, tlsConfig)
	dir := cfgDir(cfg)
	ca := newPKI(t, "e2e cell CA")
	first := ca.writeServerCert(t, dir)
	gw := startGatewayNoWait(t, cfg, addr)
	trust := tlsClientConfig(ca, nil)
	gw.waitReadyTLS(t, trust)
	for _, want := range []string{"https://" + addr + "/mcp", "Operator console: https://" + addr + "/console", "serving over TLS"} {
		if !strings.Contains(gw.stderr.String(), want) {
			t.Errorf("the start banner and log lack %q:\n%s", want, gw.stderr.String())
		}
	}

	// The Go SDK's client over https, trusting the test CA, calls a tool.
	cs, err := connectHTTPS(t, addr, httpsClient(trust, operatorToken))
	if err != nil {
		t.Fatalf("connect over https: %v", err)
	}
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Fatalf("get_scene over https: %s", mustJSON(res))
	}
	// The CLI on this machine reaches the admin API over TLS too: it trusts the gateway's own
	// certificate from gateway.tls.cert_file.
	recs := auditJSONL(t, "-c", cfg, "--tool", "robot__get_scene")
	if len(recs) != 1 || recs[0].Principal != "operator" {
		t.Fatalf("the audit over TLS: %+v", recs)
	}

	// Plain HTTP to the TLS listener gets nowhere.
	a := do(t, "POST", "http://"+addr+"/mcp", map[string]string{"Authorization": "Bearer " + operatorToken, "Content-Type": "application/json"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"robot__get_scene","arguments":{}}}`)
	if a.code != http.StatusBadRequest || !strings.Contains(a.body, "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the TLS listener: HTTP %d %q, want 400", a.code, a.body)
	}
	if _, err := connectHTTPS(t, addr, &http.Client{Timeout: 10 * time.Second}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the CA connected: %v", err)
	}
	old := tlsClientConfig(ca, nil)
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if conn, err := tls.Dial("tcp", addr, old); err == nil {
		conn.Close()
		t.Errorf("a TLS 1.1 client was served")
	}
	if recs := auditJSONL(t, "-c", cfg, "--tool", "robot__get_scene"); len(recs) != 1 {
		t.Errorf("a refused request reached the robot: %+v", recs)
	}

	// The console's session cookie is Secure over TLS.
	hc := httpsClient(trust, "")
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest("POST", "https://"+addr+"/console/login", strings.NewReader(url.Values{"token": {operatorToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://"+addr)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ck := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly {
		t.Errorf("console sign-in over TLS: HTTP %d, cookies %+v; want one Secure, HttpOnly session cookie", resp.StatusCode, ck)
	}

	// A renewed certificate, replaced on disk, reaches new connections after SIGHUP; the session
	// open before goes on.
	if got := servedSerial(t, addr, trust); got.Cmp(first) != 0 {
		t.Fatalf("serving serial %s, want %s", got, first)
	}
	renewed := ca.writeServerCert(t, dir)
	gw.hangup(t, "config reloaded", 1)
	if got := servedSerial(t, addr, trust); got.Cmp(renewed) != 0 {
		t.Fatalf("after SIGHUP a new connection gets serial %s, want the renewed %s", got, renewed)
	}
	if !strings.Contains(gw.stderr.String(), "serial "+renewed.Text(16)) {
		t.Errorf("the reload does not log the renewed certificate's serial %s:\n%s", renewed.Text(16), gw.stderr.String())
	}
	if res, env := call(t, cs, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Fatalf("get_scene on the session opened before the renewal: %s", mustJSON(res))
	}

	// A broken file keeps the certificate in force and says why, with the file and line.
	replaceFile(t, filepath.Join(dir, "tls", "server.crt"), []byte("-----BEGIN CERTIFICATE-----\ntruncated"), 0o644)
	gw.hangup(t, "config reload refused", 1)
	refusal := lines(gw.stderr.String(), "config reload refused")
	if len(refusal) != 1 || !strings.Contains(refusal[0], "gateway.yaml:5: gateway.tls.cert_file:") || !strings.Contains(refusal[0], "holds no PEM certificate") {
		t.Errorf("the refused reload's log: %q", refusal)
	}
	if got := servedSerial(t, addr, trust); got.Cmp(renewed) != 0 {
		t.Errorf("after a refused reload a new connection gets serial %s, want %s still", got, renewed)
	}
	// The admin API's reload says so too.
	hc = httpsClient(trust, operatorToken)
	resp, err = hc.Post("https://"+addr+"/admin/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(body), "gateway.tls.cert_file") {
		t.Errorf("POST /admin/reload with a broken certificate: HTTP %d %s", resp.StatusCode, body)
	}
}

const mtlsConfig = `
gateway:
  listen: "{{listen}}"
  tls:
    cert_file: tls/server.crt
    key_file: tls/server.key
    client_ca_file: tls/clients.pem
    client_roles:
      planner-7: [agent, planner]
      ops: [admin]
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_OPERATOR_TOKEN}
policies:
  default: allow
  rules:
    - id: planners-keep-off-the-shelf
      effect: deny
      when: '"planner" in principal.roles && tool == "robot__navigate_to" && args.target == "shelf"'
      reason: planners do not send the robot to the shelf
`

func TestMutualTLSMapsTheCertificateSubjectToThePrincipal(t *testing.T) {
	t.Setenv("E2E_OPERATOR_TOKEN", operatorToken)
	cfg, addr := writeConfig(t, mtlsConfig)
	dir := cfgDir(cfg)
	ca := newPKI(t, "e2e cell CA")
	ca.writeServerCert(t, dir)
	replaceFile(t, filepath.Join(dir, "tls", "clients.pem"), ca.pem(), 0o644)
	gw := startGatewayNoWait(t, cfg, addr)
	ops := ca.client(t, "ops")
	gw.waitReadyTLS(t, tlsClientConfig(ca, ops))

	// The planner's certificate: its subject is the principal, its roles reach policies.
	planner, err := connectHTTPS(t, addr, httpsClient(tlsClientConfig(ca, ca.client(t, "planner-7")), ""))
	if err != nil {
		t.Fatalf("connect with planner-7's certificate: %v", err)
	}
	if res, env := call(t, planner, "robot__get_scene", map[string]any{}); res.IsError || env["success"] != true {
		t.Fatalf("get_scene as planner-7: %s", mustJSON(res))
	}
	if res, env := call(t, planner, "robot__navigate_to", map[string]any{"target": "shelf"}); !res.IsError || env["kind"] != "policy_denied" {
		t.Fatalf("planner-7 to the shelf: %s, want policy_denied by the rule on role planner", mustJSON(res))
	}
	// A bearer token, when sent, is the principal, on a connection with a certificate too.
	both, err := connectHTTPS(t, addr, httpsClient(tlsClientConfig(ca, ca.client(t, "planner-7")), operatorToken))
	if err != nil {
		t.Fatalf("connect with a certificate and a token: %v", err)
	}
	if res, env := call(t, both, "robot__navigate_to", map[string]any{"target": "shelf"}); res.IsError || env["success"] != true {
		t.Fatalf("the operator's token on planner-7's connection to the shelf: %s", mustJSON(res))
	}

	// No connection without a certificate of the CA.
	if _, err := connectHTTPS(t, addr, httpsClient(tlsClientConfig(ca, nil), operatorToken)); err == nil {
		t.Errorf("a client without a certificate connected")
	} else if !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a client without a certificate: %v, want the handshake refused with certificate required", err)
	}
	if _, err := connectHTTPS(t, addr, httpsClient(tlsClientConfig(ca, newPKI(t, "another CA").client(t, "ops")), "")); err == nil {
		t.Errorf("a certificate of another CA was accepted")
	}

	// The audit log, read through the admin API with ops's certificate (role admin by
	// client_roles), names each call's principal.
	resp, err := httpsClient(tlsClientConfig(ca, ops), "").Get("https://" + addr + "/admin/audit?type=call")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/admin/audit with ops's certificate: HTTP %d %s", resp.StatusCode, b)
	}
	var got []string
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var r auditRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %s %s", r.Principal, r.Tool, r.Decision, r.Args))
	}
	want := []string{
		`planner-7 robot__get_scene allow:default {}`,
		`planner-7 robot__navigate_to deny:planners-keep-off-the-shelf {"target":"shelf"}`,
		`operator robot__navigate_to allow:default {"target":"shelf"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit records (principal tool decision args):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestServeRefusesAnOpenAddressWithoutTLS(t *testing.T) {
	t.Setenv("E2E_OPERATOR_TOKEN", operatorToken)
	withTokens := `
gateway: {listen: "0.0.0.0:0"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_OPERATOR_TOKEN}
`
	cfg, _ := writeConfig(t, withTokens)
	_, errOut, code := cli(t, "serve", "-c", cfg)
	for _, want := range []string{"refusing to listen on 0.0.0.0:0 without TLS", "would travel in the clear", "gateway.tls", "--insecure-listen"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("serve on 0.0.0.0:0 with tokens but without TLS: exit %d, output lacks %q:\n%s", code, want, errOut)
		}
	}
	if strings.Contains(errOut, "serving") {
		t.Errorf("the gateway served before refusing:\n%s", errOut)
	}

	// With gateway.tls it serves there (and is reached here on loopback only).
	cfg, addr := writeConfig(t, tlsConfig)
	ca := newPKI(t, "e2e cell CA")
	ca.writeServerCert(t, cfgDir(cfg))
	onEveryInterface(t, cfg, addr)
	gw := startGatewayNoWait(t, cfg, addr)
	gw.waitReadyTLS(t, tlsClientConfig(ca, nil))
	if strings.Contains(gw.stderr.String(), "--insecure-listen") {
		t.Errorf("a TLS listener with tokens is warned about:\n%s", gw.stderr.String())
	}
}

func TestCheckReportsTheProblemsOfTheTLSFiles(t *testing.T) {
	cfg, _ := writeConfig(t, mtlsConfig)
	dir := cfgDir(cfg)
	ca := newPKI(t, "e2e cell CA")
	ca.writeServerCert(t, dir)
	_, otherKey, _ := ca.issue(t, "gateway", false)
	replaceFile(t, filepath.Join(dir, "tls", "server.key"), otherKey, 0o600)
	replaceFile(t, filepath.Join(dir, "tls", "clients.pem"), []byte("# no certificate here\n"), 0o644)
	_, errOut, code := cli(t, "check", "-c", cfg)
	for _, want := range []string{
		cfg + ":6: gateway.tls.key_file: " + filepath.Join(dir, "tls", "server.key") + " holds a private key that does not match the certificate",
		cfg + ":7: gateway.tls.client_ca_file: " + filepath.Join(dir, "tls", "clients.pem") + " holds no PEM certificate",
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("check: exit %d, output lacks %q:\n%s", code, want, errOut)
		}
	}
	os.Remove(filepath.Join(dir, "tls", "server.crt"))
	if _, errOut, code := cli(t, "check", "-c", cfg); code != 1 || !strings.Contains(errOut, cfg+":5: gateway.tls.cert_file: "+filepath.Join(dir, "tls", "server.crt")+" does not exist") {
		t.Errorf("check without the certificate: exit %d\n%s", code, errOut)
	}
}
