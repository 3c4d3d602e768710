package gateway

// TLS on the listener (gateway.tls). The gateway serves HTTP/1.1 over TLS 1.2 or later with Go's
// default cipher suites; HTTP/2 is not offered, so that every bound of limits.go, which counts
// connections, holds as it does without TLS. The certificate and the CA bundle are read at
// start and again at every reload, and a handshake always uses the ones read last: a renewed
// certificate reaches new connections without a restart, and connections open keep theirs.
//
// With client_ca_file (mutual TLS) a verified client certificate authenticates its connection:
// the subject common name (CN) is the principal of every request on it, with the roles
// gateway.tls.client_roles gives that name. A request that carries an Authorization header is
// authenticated by its bearer token instead, as without TLS: a valid token's principal wins,
// and a wrong token is refused even on a connection with a valid certificate.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// ListenerTLS is the TLS of the gateway's HTTP listener: the certificate in force, the client
// CA bundle and the roles of client certificates, replaced whole by a reload. Whether client
// certificates are asked for, and how, is fixed when it is loaded.
type ListenerTLS struct {
	clientAuth string // "" (no client certificates), config.ClientAuthRequire or config.ClientAuthVerifyIfGiven
	cur        atomic.Pointer[tlsState]
	base       *tls.Config
}

// tlsState is what one reading of the files gave.
type tlsState struct {
	config *tls.Config
	leaf   *x509.Certificate
	pool   *x509.CertPool      // the client CA bundle; nil without client_ca_file
	roles  map[string][]string // gateway.tls.client_roles
}

// LoadTLS reads the files of gateway.tls and returns the listener's TLS, or nil when cfg has
// no gateway.tls. Every problem of the files (CheckTLS) is in the error, one a line, each with
// the config file and line; warnings are what the gateway should log and still serves with.
func LoadTLS(cfg *config.Config) (t *ListenerTLS, warnings []string, err error) {
	if cfg.Gateway.TLS == nil {
		return nil, nil, nil
	}
	st, problems, warnings := loadTLS(cfg, time.Now())
	if len(problems) > 0 {
		return nil, warnings, errors.New(strings.Join(problems, "\n"))
	}
	t = &ListenerTLS{clientAuth: cfg.Gateway.TLS.ClientAuth}
	if !cfg.Gateway.TLS.MutualTLS() {
		t.clientAuth = ""
	}
	t.base = &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		// Every handshake takes the config in force, which a reload replaces.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.cur.Load().config, nil },
	}
	t.install(st)
	return t, warnings, nil
}

// CheckTLS reads the files of gateway.tls as LoadTLS does and returns their problems and
// warnings, each "FILE:LINE: gateway.tls.KEY: …" (for mcp-gateway check). Without gateway.tls
// there are none.
func CheckTLS(cfg *config.Config) (problems, warnings []string) {
	if cfg.Gateway.TLS == nil {
		return nil, nil
	}
	_, problems, warnings = loadTLS(cfg, time.Now())
	return problems, warnings
}

// install makes st the state in force, its handshake config built with t's client
// authentication. A state without a client CA bundle keeps the one in force.
func (t *ListenerTLS) install(st *tlsState) {
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
		Certificates: st.config.Certificates,
	}
	if t.clientAuth != "" {
		if st.pool == nil {
			if old := t.cur.Load(); old != nil {
				st.pool = old.pool
			}
		}
		c.ClientCAs = st.pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
		if t.clientAuth == config.ClientAuthVerifyIfGiven {
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
		// A resumed session would skip verifying the certificate against the bundle in force.
		c.SessionTicketsDisabled = true
	}
	st.config = c
	t.cur.Store(st)
}

// Config is the TLS configuration to serve with (tls.NewListener): every handshake uses the
// certificate and client CA bundle in force.
func (t *ListenerTLS) Config() *tls.Config { return t.base }

// ClientCertificates reports whether t asks clients for a certificate (mutual TLS); false for
// a nil t.
func (t *ListenerTLS) ClientCertificates() bool { return t != nil && t.clientAuth != "" }

// ClientAuth is gateway.tls.client_auth in force: "require", "verify_if_given", or "" without
// client_ca_file.
func (t *ListenerTLS) ClientAuth() string { return t.clientAuth }

// Describe names the certificate in force, for logs and reload reports: its subject, serial
// number and expiry.
func (t *ListenerTLS) Describe() string {
	return describeCertificate(t.cur.Load().leaf)
}

func describeCertificate(c *x509.Certificate) string {
	return fmt.Sprintf("certificate %s, serial %s, valid until %s", c.Subject, c.SerialNumber.Text(16), c.NotAfter.UTC().Format(time.RFC3339))
}

// loadTLS reads and checks the files of cfg's gateway.tls, which must be set. now decides
// whether the certificate has expired.
func loadTLS(cfg *config.Config, now time.Time) (st *tlsState, problems, warnings []string) {
	t := cfg.Gateway.TLS
	at := func(line int, key string) string { return fmt.Sprintf("%s:%d: gateway.tls.%s", cfg.Path, line, key) }
	certAt, keyAt, caAt := at(t.CertLine, "cert_file"), at(t.KeyLine, "key_file"), at(t.ClientCALine, "client_ca_file")

	certPEM, problem := readPEM(certAt, t.CertFile, "the gateway's certificate")
	if problem != "" {
		problems = append(problems, problem)
	}
	keyPEM, problem := readPEM(keyAt, t.KeyFile, "the certificate's private key")
	if problem != "" {
		problems = append(problems, problem)
	} else if fi, err := os.Stat(t.KeyFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		warnings = append(warnings, fmt.Sprintf("%s: warning: %s can be read by other users (mode %04o); let only the gateway's user read it (chmod 600)",
			keyAt, t.KeyFile, fi.Mode().Perm()))
	}
	st = &tlsState{roles: t.ClientRoles}
	if certPEM != nil {
		certs, problem := pemCertificates(certPEM)
		switch {
		case problem != "":
			problems = append(problems, fmt.Sprintf("%s: %s %s", certAt, t.CertFile, problem))
		case len(certs) == 0:
			problems = append(problems, fmt.Sprintf("%s: %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)%s",
				certAt, t.CertFile, swapped(certPEM, "PRIVATE KEY", "a private key")))
		default:
			st.leaf = certs[0]
			problems, warnings = checkServerCertificate(certAt, t.CertFile, st.leaf, now, problems, warnings)
		}
	}
	if st.leaf != nil && keyPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s %s", keyAt, t.KeyFile, keyProblem(keyPEM, err, t.CertFile, t.CertLine)))
		} else {
			st.config = &tls.Config{Certificates: []tls.Certificate{pair}}
		}
	}
	if t.MutualTLS() {
		if caPEM, problem := readPEM(caAt, t.ClientCAFile, "the CA certificates that sign client certificates"); problem != "" {
			problems = append(problems, problem)
		} else {
			certs, problem := pemCertificates(caPEM)
			switch {
			case problem != "":
				problems = append(problems, fmt.Sprintf("%s: %s %s", caAt, t.ClientCAFile, problem))
			case len(certs) == 0:
				problems = append(problems, fmt.Sprintf("%s: %s holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the bundle of the CA certificates that sign the clients' certificates",
					caAt, t.ClientCAFile))
			default:
				st.pool = x509.NewCertPool()
				for _, c := range certs {
					st.pool.AddCert(c)
					if !c.NotAfter.After(now) {
						warnings = append(warnings, fmt.Sprintf("%s: warning: the CA certificate %s in %s expired at %s: no certificate it signed verifies any more",
							caAt, c.Subject, t.ClientCAFile, c.NotAfter.UTC().Format(time.RFC3339)))
					}
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems, warnings
	}
	return st, nil, warnings
}

// readPEM reads one of the files of gateway.tls; the problem says why it cannot, at where.
func readPEM(where, path, what string) ([]byte, string) {
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		return data, ""
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("%s: %s does not exist; name the PEM file of %s (a relative path is relative to the config file)", where, path, what)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Sprintf("%s: %s cannot be read by this user: the gateway's user must be able to read it", where, path)
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Sprintf("%s: %s cannot be read: %v", where, path, err)
	}
}

// pemCertificates parses the CERTIFICATE blocks of a PEM file, skipping any other block; the
// problem names the first one that does not parse.
func pemCertificates(data []byte) ([]*x509.Certificate, string) {
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return certs, ""
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Sprintf("holds a PEM block %d that is not a valid certificate: %v", n, err)
		}
		certs = append(certs, c)
	}
}

// swapped says, when data holds a PEM block whose type ends in suffix, that the file holds
// what the other file should: the two names may be swapped.
func swapped(data []byte, suffix, what string) string {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return ""
		}
		if strings.HasSuffix(b.Type, suffix) {
			return fmt.Sprintf(" but %s: are cert_file and key_file swapped?", what)
		}
	}
}

// checkServerCertificate adds what keeps leaf, the certificate of cert_file, from being served:
// it has expired, or is not for a server. One not valid yet is a warning: a clock a little
// behind the CA's is common.
func checkServerCertificate(where, file string, leaf *x509.Certificate, now time.Time, problems, warnings []string) ([]string, []string) {
	switch {
	case !leaf.NotAfter.After(now):
		problems = append(problems, fmt.Sprintf("%s: the certificate in %s (%s, serial %s) expired at %s, and clients refuse it: renew it, then reload the gateway (SIGHUP)",
			where, file, leaf.Subject, leaf.SerialNumber.Text(16), leaf.NotAfter.UTC().Format(time.RFC3339)))
	case leaf.NotBefore.After(now):
		warnings = append(warnings, fmt.Sprintf("%s: warning: the certificate in %s (%s) is valid only from %s; until then clients refuse it (is this machine's clock right?)",
			where, file, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	if len(leaf.ExtKeyUsage) > 0 && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		problems = append(problems, fmt.Sprintf("%s: the certificate in %s (%s) is not for a server: its extended key usage lacks serverAuth, and clients refuse it",
			where, file, leaf.Subject))
	}
	return problems, warnings
}

// keyProblem says why the key file cannot be used with the certificate, given the error of
// tls.X509KeyPair (which never holds the key's bytes).
func keyProblem(keyPEM []byte, err error, certFile string, certLine int) string {
	var types []string
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		types = append(types, b.Type)
		if b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "" {
			return "holds an encrypted private key; the gateway reads it unencrypted, so keep it readable by the gateway's user alone instead (chmod 600)"
		}
	}
	switch {
	case len(types) == 0:
		return "holds no PEM data; name the PEM file of the private key (-----BEGIN PRIVATE KEY-----)"
	case !slices.ContainsFunc(types, func(t string) bool { return strings.HasSuffix(t, "PRIVATE KEY") }):
		if slices.Contains(types, "CERTIFICATE") {
			return "holds a certificate, not a private key: are cert_file and key_file swapped?"
		}
		return fmt.Sprintf("holds no private key (its PEM blocks are %s)", strings.Join(types, ", "))
	case strings.Contains(err.Error(), "does not match"):
		return fmt.Sprintf("holds a private key that does not match the certificate in %s (line %d): give the key the certificate was issued for", certFile, certLine)
	default:
		return "cannot be used as the certificate's private key: " + strings.TrimPrefix(err.Error(), "tls: ")
	}
}

// reloadTLS reads the files of gateway.tls for a reload to cfg. When they have a problem, it
// returns them and the reload is refused: the certificate in force stays. Otherwise apply
// installs what was read, once the reload is decided, and says so in the report. Turning TLS
// or client certificates on or off, or changing client_auth, waits for a restart.
func (g *Gateway) reloadTLS(cfg *config.Config) (apply func(*ReloadReport), problems []string) {
	t, next := g.opts.TLS, cfg.Gateway.TLS
	restart := func(key string) func(*ReloadReport) {
		return func(rep *ReloadReport) {
			if !slices.Contains(rep.NeedsRestart, key) {
				rep.NeedsRestart = append(rep.NeedsRestart, key)
			}
		}
	}
	switch {
	case t == nil:
		// No TLS listener (plain HTTP, or none at all): a changed gateway.tls waits.
		if !sameJSON(g.cfg.Gateway.TLS, next) {
			return restart("gateway.tls"), nil
		}
		return func(*ReloadReport) {}, nil
	case next == nil:
		// The listener keeps serving TLS with the certificate it has.
		return restart("gateway.tls"), nil
	}
	st, problems, warnings := loadTLS(cfg, time.Now())
	if len(problems) > 0 {
		return nil, problems
	}
	return func(rep *ReloadReport) {
		mode := ""
		if next.MutualTLS() {
			mode = next.ClientAuth
		}
		switch {
		case (mode == "") != (t.clientAuth == ""):
			restart("gateway.tls.client_ca_file")(rep)
		case mode != t.clientAuth:
			restart("gateway.tls.client_auth")(rep)
		}
		t.install(st)
		rep.TLS = t.Describe()
		rep.Warnings = append(rep.Warnings, warnings...)
		g.log.Info("TLS: serving to new connections", "certificate", rep.TLS)
	}, nil
}

// sameJSON reports whether a and b are the same settings.
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// certificatePrincipal is the principal of a verified client certificate: its subject common
// name, with the roles client_roles gives it. Nil when the connection has none, or its name
// cannot be a principal.
func (t *ListenerTLS) certificatePrincipal(cs *tls.ConnectionState) *Principal {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return nil
	}
	name := cs.PeerCertificates[0].Subject.CommonName
	if !config.ValidCertificateName(name) {
		return nil
	}
	return &Principal{ID: name, Roles: slices.Clone(t.cur.Load().roles[name])}
}

// identifyClient puts the principal of the connection's verified client certificate in the
// context of each request that carries no Authorization header, as identify does for a bearer
// token; it refuses nothing. Without client certificates it is next.
func (t *ListenerTLS) identifyClient(next http.Handler) http.Handler {
	if !t.ClientCertificates() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if p := t.certificatePrincipal(r.TLS); p != nil {
				r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// certificateBearer stands in for a bearer token on a request that a client certificate
// authenticated. It holds a DEL character, which no token of auth.tokens may (LoadCredentials),
// so it never matches one; it is only ever seen by carryPrincipal, after identify.
const certificateBearer = "\x7fclient-certificate"

// carryCertificate lets carryPrincipal hand a client certificate's principal to the MCP SDK,
// whose middleware needs an Authorization header to attach it: a request with a principal and
// no such header gets certificateBearer.
func carryCertificate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && PrincipalFromContext(r.Context()) != nil {
			r2 := *r
			r2.Header = r.Header.Clone()
			r2.Header.Set("Authorization", "Bearer "+certificateBearer)
			r = &r2
		}
		next.ServeHTTP(w, r)
	})
}

// ListenerClientTLS is the TLS configuration with which a client on this machine (the operator
// commands) reaches the listener of a gateway serving cfg, at host: it trusts the certificate
// of gateway.tls.cert_file itself, whatever name or address it is reached at, and otherwise a
// certificate this machine's roots (SSL_CERT_FILE) verify for host.
func ListenerClientTLS(cfg *config.Config, host string) (*tls.Config, error) {
	t := cfg.Gateway.TLS
	data, err := os.ReadFile(t.CertFile)
	if err != nil {
		return nil, fmt.Errorf("reading gateway.tls.cert_file to trust the gateway's certificate: %w", err)
	}
	certs, problem := pemCertificates(data)
	if problem != "" || len(certs) == 0 {
		return nil, fmt.Errorf("gateway.tls.cert_file %s holds no valid certificate to trust the gateway by (mcp-gateway check says more)", t.CertFile)
	}
	pinned := certs[0]
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// VerifyConnection verifies instead: the gateway's own certificate, or the roots.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the gateway presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			if bytes.Equal(leaf.Raw, pinned.Raw) {
				return nil
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host}); err == nil {
				return nil
			}
			return fmt.Errorf("the gateway serves a certificate (serial %s) other than the one in gateway.tls.cert_file %s (serial %s), and none this machine trusts for %s: "+
				"if the file was renewed, reload the gateway (SIGHUP) so that it serves the new one", leaf.SerialNumber.Text(16), t.CertFile, pinned.SerialNumber.Text(16), host)
		},
	}, nil
}
