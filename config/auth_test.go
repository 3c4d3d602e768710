package config

import (
	"slices"
	"strings"
	"testing"
)

const authServers = "servers: [{name: arm, command: arm}]\n"

func TestAuthTokens(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(authServers+`auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: GW_OPERATOR_TOKEN}
    - principal: planner
      roles: [agent, planner]
      token_env: GW_PLANNER_TOKEN
    - {principal: ci@cell-7, token_env: GW_CI_TOKEN}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Auth.Tokens
	if len(got) != 3 || got[0].Principal != "operator" || !slices.Equal(got[0].Roles, []string{RoleAdmin}) ||
		got[1].TokenEnv != "GW_PLANNER_TOKEN" || !slices.Equal(got[1].Roles, []string{"agent", "planner"}) ||
		got[2].Principal != "ci@cell-7" || len(got[2].Roles) != 0 {
		t.Fatalf("tokens: %+v", got)
	}
	if got[0].Line != 4 || got[1].Line != 5 || got[2].Line != 8 {
		t.Errorf("lines: %d %d %d, want 4 5 8", got[0].Line, got[1].Line, got[2].Line)
	}
}

func TestAuthTokenProblems(t *testing.T) {
	errs := parseErrors(t, authServers+`auth:
  tokens:
    - {roles: [admin], token_env: A_TOKEN}
    - {principal: "has space", token_env: B_TOKEN}
    - {principal: planner, roles: [agent, "", "two words", agent], token_env: C_TOKEN}
    - {principal: planner, token_env: D_TOKEN}
    - {principal: runner}
    - {principal: leaker, token_env: "s3cr3t-t0ken-value!"}
    - {principal: twin, token_env: C_TOKEN}
    - {principal: typo, token: x, token_env: E_TOKEN}
`)
	assertReported(t, errs, []want{
		{4, `auth.tokens[0]: principal is missing`},
		{5, `auth.tokens[1] (has space): principal "has space" is not valid`},
		{6, `auth.tokens[2] (planner): roles[1]: "" is not a role name`},
		{6, `auth.tokens[2] (planner): roles[2]: "two words" is not a role name`},
		{6, `auth.tokens[2] (planner): roles[3]: role "agent" is listed twice`},
		{7, `auth.tokens[3] (planner): duplicate principal "planner"; auth.tokens[2] at line 6 has it too`},
		{8, `auth.tokens[4] (runner): token_env is missing`},
		{9, `auth.tokens[5] (leaker): token_env: must name the environment variable holding the token`},
		{10, `auth.tokens[6] (twin): token_env: C_TOKEN is read by auth.tokens[2] at line 6 too`},
		{11, `unknown key "token"`},
	})
	if strings.Contains(errs.Error(), "s3cr3t") {
		t.Errorf("a token written in place of its variable is repeated:\n%v", errs)
	}
}

func TestAuthAbsentOrEmpty(t *testing.T) {
	for _, src := range []string{authServers, authServers + "auth: {}\n", authServers + "auth:\n  tokens: []\n"} {
		cfg, err := Parse("robot.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if len(cfg.Auth.Tokens) != 0 {
			t.Errorf("%q: tokens %+v", src, cfg.Auth.Tokens)
		}
	}
}

func TestHTTPAccessDefaults(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(authServers))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.MaxBodyBytes != DefaultMaxBodyBytes || !slices.Equal(cfg.Gateway.AllowedOrigins, DefaultAllowedOrigins) {
		t.Errorf("defaults: max_body_bytes %d, allowed_origins %v", cfg.Gateway.MaxBodyBytes, cfg.Gateway.AllowedOrigins)
	}
	cfg, err = Parse("robot.yaml", []byte("gateway:\n  allowed_origins: []\n  max_body_bytes: 65536\n"+authServers))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.MaxBodyBytes != 65536 || cfg.Gateway.AllowedOrigins == nil || len(cfg.Gateway.AllowedOrigins) != 0 {
		t.Errorf("explicit: max_body_bytes %d, allowed_origins %#v (an empty list allows no browser page)",
			cfg.Gateway.MaxBodyBytes, cfg.Gateway.AllowedOrigins)
	}
}

func TestHTTPAccessProblems(t *testing.T) {
	errs := parseErrors(t, `gateway:
  allowed_origins:
    - http://localhost:6274
    - localhost:6274
    - http://localhost:6274/
    - http://localhost:99999
    - https://[::1
    - "http://:80"
  max_body_bytes: 10
`+authServers)
	assertReported(t, errs, []want{
		{4, `gateway.allowed_origins[1]: "localhost:6274" is not an origin: write scheme://host[:port]`},
		{5, `gateway.allowed_origins[2]: "http://localhost:6274/" is not an origin: an origin is scheme://host[:port], with no path`},
		{6, `allowed_origins[3]: "http://localhost:99999" is not an origin: the port must be a number from 1 to 65535, or *`},
		{7, `allowed_origins[4]: "https://[::1" is not an origin: the IPv6 address has no closing ]`},
		{8, `allowed_origins[5]: "http://:80" is not an origin: it has no host`},
		{9, `gateway.max_body_bytes: must be at least 1024 bytes, got 10`},
	})
	if len(errs.List) != 6 {
		t.Errorf("got %d problems, want 6:\n%v", len(errs.List), errs)
	}
}

func TestOriginAllows(t *testing.T) {
	tests := []struct {
		allowed, origin string
		want            bool
	}{
		{"http://localhost:6274", "http://localhost:6274", true},
		{"http://localhost:6274", "http://LOCALHOST:6274", true},
		{"http://localhost:6274", "http://localhost:6275", false},
		{"http://localhost:6274", "https://localhost:6274", false},
		{"http://localhost:*", "http://localhost:1", true},
		{"http://localhost:*", "http://localhost", true},
		{"http://localhost:*", "http://localhost.evil.example", false},
		{"http://localhost:*", "http://evil.example:6274", false},
		{"https://cell.example", "https://cell.example:443", true},
		{"https://cell.example:443", "https://cell.example", true},
		{"http://[::1]:*", "http://[::1]:8080", true},
		{"http://127.0.0.1:*", "http://127.0.0.2:8080", false},
	}
	for _, tc := range tests {
		p, err := ParseOrigin(tc.allowed)
		if err != nil {
			t.Fatalf("%s: %v", tc.allowed, err)
		}
		o, err := ParseOrigin(tc.origin)
		if err != nil {
			t.Fatalf("%s: %v", tc.origin, err)
		}
		if got := p.Allows(o); got != tc.want {
			t.Errorf("%s allows %s = %v, want %v", tc.allowed, tc.origin, got, tc.want)
		}
	}
	for _, o := range DefaultAllowedOrigins {
		if _, err := ParseOrigin(o); err != nil {
			t.Errorf("default %s: %v", o, err)
		}
	}
}
