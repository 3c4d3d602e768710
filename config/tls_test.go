package config

import (
	"path/filepath"
	"slices"
	"testing"
)

const tlsServers = `servers:
  - name: robot
    command: sim-robot
`

func TestTLSSection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "robot.yaml")
	cfg, err := Parse(path, []byte(tlsServers+`gateway:
  tls:
    cert_file: tls/gateway.crt
    key_file: /etc/keys/gateway.key
    client_ca_file: tls/clients.pem
    client_roles:
      planner-7: [agent, planner]
      "Ops Console": [admin]
`))
	if err != nil {
		t.Fatal(err)
	}
	tls := cfg.Gateway.TLS
	if tls == nil {
		t.Fatal("gateway.tls not decoded")
	}
	if tls.CertFile != filepath.Join(dir, "tls/gateway.crt") || tls.KeyFile != "/etc/keys/gateway.key" || tls.ClientCAFile != filepath.Join(dir, "tls/clients.pem") {
		t.Errorf("paths not resolved against the file's directory: %+v", tls)
	}
	if tls.CertLine != 6 || tls.KeyLine != 7 || tls.ClientCALine != 8 {
		t.Errorf("lines %d %d %d, want 6 7 8", tls.CertLine, tls.KeyLine, tls.ClientCALine)
	}
	if tls.ClientAuth != ClientAuthRequire || !tls.MutualTLS() {
		t.Errorf("client_auth = %q, want the default require with client_ca_file", tls.ClientAuth)
	}
	if !slices.Equal(tls.ClientRoles["planner-7"], []string{"agent", "planner"}) || !slices.Equal(tls.ClientRoles["Ops Console"], []string{"admin"}) {
		t.Errorf("client_roles = %v", tls.ClientRoles)
	}

	cfg, err = Parse(path, []byte(tlsServers+"gateway:\n  tls: {cert_file: a.crt, key_file: a.key}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tls := cfg.Gateway.TLS; tls.MutualTLS() || tls.ClientAuth != "" {
		t.Errorf("without client_ca_file: %+v", tls)
	}
	cfg, err = Parse(path, []byte(tlsServers+"gateway:\n  tls: {cert_file: a.crt, key_file: a.key, client_ca_file: ca.pem, client_auth: verify_if_given}\n"))
	if err != nil || cfg.Gateway.TLS.ClientAuth != ClientAuthVerifyIfGiven {
		t.Errorf("client_auth verify_if_given: %+v, %v", cfg, err)
	}
	if cfg, err := Parse(path, []byte(tlsServers)); err != nil || cfg.Gateway.TLS != nil || cfg.Gateway.TLS.MutualTLS() {
		t.Errorf("without gateway.tls: %+v, %v", cfg.Gateway.TLS, err)
	}
}

func TestTLSProblems(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want []want
	}{
		{"  tls:\n", []want{{5, "gateway.tls: is empty; give cert_file and key_file"}}},
		{"  tls: {key_file: a.key}\n", []want{{5, "gateway.tls: cert_file is missing"}}},
		{"  tls: {cert_file: a.crt}\n", []want{{5, "gateway.tls: key_file is missing"}}},
		{"  tls:\n    cert_file: \"\"\n    key_file: a.key\n", []want{{6, "gateway.tls.cert_file: is empty"}}},
		{"  tls:\n    cert_file: a.crt\n    key_file: a.key\n    client_ca_file: \" \"\n", []want{{8, "gateway.tls.client_ca_file: is empty"}}},
		{"  tls:\n    cert_file: a.crt\n    key_file: a.key\n    client_auth: require\n", []want{{8, "gateway.tls: client_auth needs client_ca_file"}}},
		{"  tls:\n    cert_file: a.crt\n    key_file: a.key\n    client_ca_file: ca.pem\n    client_auth: optional\n",
			[]want{{9, `gateway.tls.client_auth: "optional" is not valid; use one of: require, verify_if_given`}}},
		{"  tls:\n    cert_file: a.crt\n    key_file: a.key\n    client_roles: {planner: [agent]}\n", []want{{8, "gateway.tls: client_roles needs client_ca_file"}}},
		{"  tls:\n    cert_file: a.crt\n    key_file: a.key\n    client_ca_file: ca.pem\n    client_roles:\n      planner: [agent, agent]\n      ops: [\"two words\"]\n      \" ops\": [admin]\n",
			[]want{
				{10, `gateway.tls.client_roles.planner[1]: role "agent" is listed twice`},
				{11, `gateway.tls.client_roles.ops[0]: "two words" is not a role name`},
				{12, `gateway.tls.client_roles: " ops" starts or ends with a space`},
			}},
		{"  tls:\n    cert_file: [a.crt]\n    key_file: a.key\n", []want{{6, "gateway.tls.cert_file: expected a string"}}},
		{"  tls:\n    cert_file: a.crt\n    key_file: a.key\n    ca_file: ca.pem\n", []want{{8, `unknown key "ca_file"`}}},
	} {
		errs := parseErrors(t, tlsServers+"gateway:\n"+c.yaml)
		assertReported(t, errs, c.want)
	}
}

func TestValidCertificateName(t *testing.T) {
	for name, ok := range map[string]bool{
		"planner-7": true, "Ops Console": true, "robot.cell-7.example": true, "Zoë": true,
		"": false, " ops": false, "ops ": false, "a\nb": false, "a\x00b": false, "\xff": false,
		string(make([]byte, MaxCertificateName+1)): false,
	} {
		if got := ValidCertificateName(name); got != ok {
			t.Errorf("ValidCertificateName(%q) = %v, want %v", name, got, ok)
		}
	}
}
