package config

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// TLS serves the gateway's HTTP listener (gateway.listen) over TLS, and optionally asks its
// clients for a certificate (mutual TLS). The files are read when serve starts and again at
// every reload (SIGHUP, POST /admin/reload); check reads them too (gateway.CheckTLS), this
// package only checks what the file says.
type TLS struct {
	// CertFile is the PEM file of the gateway's certificate, followed by its intermediate CA
	// certificates, if any, in the order a client needs them.
	CertFile string `yaml:"cert_file" json:"cert_file" jsonschema:"required,description=PEM file of the gateway's certificate followed by its intermediate CA certificates; relative to this file."`
	// KeyFile is the PEM file of the certificate's private key (PKCS #8, PKCS #1 or SEC 1).
	KeyFile string `yaml:"key_file" json:"key_file" jsonschema:"required,description=PEM file of the certificate's private key; relative to this file. Only the gateway's user should be able to read it."`
	// ClientCAFile turns on mutual TLS: the PEM bundle of the CA certificates that sign the
	// clients' certificates. A client certificate's subject common name (CN) is then a principal.
	ClientCAFile string `yaml:"client_ca_file" json:"client_ca_file,omitempty" jsonschema:"description=PEM bundle of the CA certificates that sign client certificates: turns on mutual TLS\\, the subject CN of a verified client certificate is the principal; relative to this file."`
	// ClientAuth is how a client certificate is asked for, with ClientCAFile: "require" (the
	// default: a connection without a valid certificate is refused in the handshake) or
	// "verify_if_given" (a connection may come without one and then needs a bearer token on
	// /mcp; one it does present must be valid).
	ClientAuth string `yaml:"client_auth" json:"client_auth,omitempty" jsonschema:"enum=require,enum=verify_if_given,description=With client_ca_file: require (default): no connection without a valid client certificate; verify_if_given: a client without one authenticates with a bearer token instead."`
	// ClientRoles maps a client certificate's subject common name to its roles (principal.roles);
	// a certificate whose name is not listed has none.
	ClientRoles map[string][]string `yaml:"client_roles" json:"client_roles,omitempty" jsonschema:"description=Subject CN of a client certificate to its roles (principal.roles) such as {planner-7: [agent]}; admin opens the /admin API. A CN not listed has no roles."`

	// CertLine, KeyLine and ClientCALine are the lines of the files' names, for messages.
	CertLine     int `yaml:"-" json:"-"`
	KeyLine      int `yaml:"-" json:"-"`
	ClientCALine int `yaml:"-" json:"-"`
}

// The values of gateway.tls.client_auth.
const (
	ClientAuthRequire       = "require"
	ClientAuthVerifyIfGiven = "verify_if_given"
)

// MutualTLS reports whether t asks clients for a certificate: client_ca_file is given.
func (t *TLS) MutualTLS() bool { return t != nil && t.ClientCAFile != "" }

// checkTLS checks gateway.tls and resolves its files against dir, the directory of the file.
// Whether the files exist and hold what they should is for gateway.CheckTLS: the operator
// commands load this file too, and the private key is readable by the gateway's user alone.
func (d *decoder) checkTLS(g *Gateway, dir string) {
	gsrc := d.src[g]
	if gsrc == nil {
		return
	}
	loc := location{path: "gateway.tls"}
	if g.TLS == nil {
		if gsrc.has("tls") && gsrc.keys["tls"].null {
			d.errorf(gsrc.lineOf("tls"), loc, "is empty; give cert_file and key_file to serve over TLS, or remove it to serve plain HTTP")
		}
		return
	}
	t := g.TLS
	src := d.src[t]
	if src == nil {
		return
	}
	file := func(key string, v *string, line *int, missing string) {
		switch {
		case !src.has(key):
			if missing != "" {
				d.errorf(src.line, loc, "%s is missing; %s", key, missing)
			}
		case !src.valid(key):
		case strings.TrimSpace(*v) == "":
			d.errorf(src.valueLine(key), loc.field(key), "is empty; name a PEM file (relative to this file)")
		default:
			*line = src.valueLine(key)
			*v = resolve(dir, *v)
		}
	}
	file("cert_file", &t.CertFile, &t.CertLine, "name the PEM file of the gateway's certificate (and its intermediate CA certificates)")
	file("key_file", &t.KeyFile, &t.KeyLine, "name the PEM file of the certificate's private key")
	file("client_ca_file", &t.ClientCAFile, &t.ClientCALine, "")

	mutual := src.valid("client_ca_file") && t.ClientCAFile != ""
	switch {
	case !src.has("client_auth"):
		if mutual {
			t.ClientAuth = ClientAuthRequire
		}
	case !mutual && src.valid("client_auth") && !src.has("client_ca_file"):
		d.errorf(src.lineOf("client_auth"), loc, "client_auth needs client_ca_file, the PEM bundle of the CA certificates that client certificates are verified against")
	default:
		d.enum(src, loc, "client_auth", &t.ClientAuth, ClientAuthRequire, ClientAuthRequire, ClientAuthVerifyIfGiven)
	}

	roles := d.src[&t.ClientRoles]
	if roles == nil {
		return
	}
	if !src.has("client_ca_file") {
		d.errorf(src.lineOf("client_roles"), loc, "client_roles needs client_ca_file: without mutual TLS no client presents a certificate")
	}
	rloc := loc.field("client_roles")
	for name, e := range roles.keys {
		if msg := checkCertificateName(name); msg != "" {
			d.errorf(e.line, rloc, "%q %s", truncate(name), msg)
		}
		list := t.ClientRoles[name]
		seen := map[string]bool{}
		for j, r := range list {
			switch {
			case !roleRE.MatchString(r):
				d.errorf(e.line, rloc.field(truncate(name)).index(j, ""), "%q is not a role name: use one word of letters, digits, _ . and - (such as %s, operator, agent)", truncate(r), RoleAdmin)
			case seen[r]:
				d.errorf(e.line, rloc.field(truncate(name)).index(j, ""), "role %q is listed twice", r)
			}
			seen[r] = true
		}
	}
}

// MaxCertificateName is the longest subject common name of a client certificate that the
// gateway takes as a principal.
const MaxCertificateName = 128

// checkCertificateName returns what keeps name, a subject common name, from being a principal,
// or "".
func checkCertificateName(name string) string {
	switch {
	case name == "":
		return "is empty; a client certificate's subject common name (CN) is the key"
	case len(name) > MaxCertificateName:
		return "is longer than a principal may be"
	case strings.TrimSpace(name) != name:
		return "starts or ends with a space, which a certificate's name never matches"
	case !ValidCertificateName(name):
		return "holds control characters or invalid UTF-8, which no principal may"
	}
	return ""
}

// ValidCertificateName reports whether name, the subject common name of a client certificate,
// can be a principal: 1 to MaxCertificateName bytes of UTF-8 without control characters, and
// not starting or ending with a space.
func ValidCertificateName(name string) bool {
	if name == "" || len(name) > MaxCertificateName || !utf8.ValidString(name) || strings.TrimSpace(name) != name {
		return false
	}
	return !strings.ContainsFunc(name, unicode.IsControl)
}
