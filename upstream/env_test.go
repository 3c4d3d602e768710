package upstream

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// gatewayEnviron is the environment of a gateway on a robot: the base, a ROS setup, the secrets
// the file below names, and things no child needs.
var gatewayEnviron = []string{
	"PATH=/usr/local/bin:/usr/bin",
	"HOME=/var/lib/mcp-gateway",
	"USER=mcp-gateway",
	"LOGNAME=mcp-gateway",
	"SHELL=/bin/sh",
	"LANG=C.UTF-8",
	"LANGUAGE=en",
	"LC_ALL=C.UTF-8",
	"LC_TIME=en_GB.UTF-8",
	"TZ=Europe/Berlin",
	"TMPDIR=/tmp/gw",
	"TERM=xterm",
	"XDG_RUNTIME_DIR=/run/user/990",
	"PWD=/etc/mcp-gateway",
	"ROS_DOMAIN_ID=7",
	"ROS_LOCALHOST_ONLY=1",
	"RMW_IMPLEMENTATION=rmw_cyclonedds_cpp",
	"SSH_AUTH_SOCK=/run/ssh.sock",
	"GW_OPERATOR_TOKEN=operator-secret-0123456789",
	"GW_ADMIN_TOKEN=admin-secret-0123456789",
	"ROS_CLOUD_AUTH=Bearer cloud-secret",
	"MODEL_KEY=sk-model-secret",
	"OTLP_KEY=otlp-secret",
	"HOOK_AUTH=hook-secret",
	"MCP_GATEWAY_ADMIN_TOKEN=cli-secret-0123456789",
	"OTEL_EXPORTER_OTLP_HEADERS=api-key=otel-secret",
	"OTEL_SERVICE_NAME=cell-7",
	"=C:=weird", // no name: never passed on
	"PATH=/second/path",
}

// secretValues are the values of the secret variables above: none may reach a child, under
// whatever name.
var secretValues = []string{"operator-secret", "admin-secret", "cloud-secret", "sk-model-secret", "otlp-secret", "hook-secret", "cli-secret", "otel-secret"}

// baseOf is what every child gets of gatewayEnviron.
var baseOf = []string{
	"PATH=/usr/local/bin:/usr/bin", "HOME=/var/lib/mcp-gateway", "USER=mcp-gateway", "LOGNAME=mcp-gateway", "SHELL=/bin/sh",
	"LANG=C.UTF-8", "LANGUAGE=en", "LC_ALL=C.UTF-8", "LC_TIME=en_GB.UTF-8", "TZ=Europe/Berlin", "TMPDIR=/tmp/gw",
	"TERM=xterm", "XDG_RUNTIME_DIR=/run/user/990",
}

// envServers parses a file whose settings name the secrets of gatewayEnviron, with the servers
// given, and returns them by name.
func envServers(t *testing.T, servers string) map[string]config.Server {
	t.Helper()
	cfg, err := config.Parse("robot.yaml", []byte(`gateway: {admin_token_env: GW_ADMIN_TOKEN}
auth:
  tokens: [{principal: operator, roles: [admin], token_env: GW_OPERATOR_TOKEN}]
approvals:
  use: webhook
  webhook: {url: "http://127.0.0.1:9/hook", headers_env: {Authorization: HOOK_AUTH}}
telemetry: {headers_env: {x-api-key: OTLP_KEY}}
llm: {provider: openai, api_key_env: MODEL_KEY}
servers:
  - {name: cloud, url: "http://127.0.0.1:9000/mcp", headers_env: {Authorization: ROS_CLOUD_AUTH}}
`+servers))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]config.Server{}
	for _, s := range cfg.Servers {
		out[s.Name] = s
	}
	return out
}

// assertNoSecret fails when env holds a secret value of gatewayEnviron.
func assertNoSecret(t *testing.T, server string, env []string) {
	t.Helper()
	for _, kv := range env {
		for _, v := range secretValues {
			if strings.Contains(kv, v) {
				t.Errorf("%s: the child gets %s", server, kv)
			}
		}
	}
}

func TestChildEnv(t *testing.T) {
	servers := envServers(t, `  - {name: plain, command: a}
  - {name: ros, command: a, env_inherit: [ROS_DOMAIN_ID, "RMW_*", NOT_SET_ANYWHERE]}
  - {name: globs, command: a, env_inherit: ["ROS_*", "GW_*", "OTEL_*", "MODEL_*"]}
  - {name: legacy, command: a, env_inherit: all}
  - {name: none, command: a, env_inherit: []}
`)
	for _, c := range []struct {
		server string
		want   []string
	}{
		// The base, with PATH's first value, as os.Getenv reads it: nothing else, not even PWD,
		// which would be wrong in the child's cwd.
		{"plain", baseOf},
		{"none", baseOf},
		// Exact names are exact: ROS_LOCALHOST_ONLY is not listed. A listed variable that is
		// not set is not made up.
		{"ros", append(slices.Clone(baseOf), "ROS_DOMAIN_ID=7", "RMW_IMPLEMENTATION=rmw_cyclonedds_cpp")},
		// A prefix takes every variable it begins but the secret ones (ROS_CLOUD_AUTH,
		// GW_OPERATOR_TOKEN, GW_ADMIN_TOKEN, MODEL_KEY, OTEL_EXPORTER_OTLP_HEADERS).
		{"globs", append(slices.Clone(baseOf), "ROS_DOMAIN_ID=7", "ROS_LOCALHOST_ONLY=1", "OTEL_SERVICE_NAME=cell-7")},
		// all is the whole environment, in its order, but for the secrets and the nameless.
		{"legacy", []string{
			"PATH=/usr/local/bin:/usr/bin", "HOME=/var/lib/mcp-gateway", "USER=mcp-gateway", "LOGNAME=mcp-gateway", "SHELL=/bin/sh",
			"LANG=C.UTF-8", "LANGUAGE=en", "LC_ALL=C.UTF-8", "LC_TIME=en_GB.UTF-8", "TZ=Europe/Berlin", "TMPDIR=/tmp/gw",
			"TERM=xterm", "XDG_RUNTIME_DIR=/run/user/990", "PWD=/etc/mcp-gateway", "ROS_DOMAIN_ID=7", "ROS_LOCALHOST_ONLY=1",
			"RMW_IMPLEMENTATION=rmw_cyclonedds_cpp", "SSH_AUTH_SOCK=/run/ssh.sock", "OTEL_SERVICE_NAME=cell-7",
		}},
	} {
		got := childEnv(servers[c.server], gatewayEnviron)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: child environment\n%s\nwant\n%s", c.server, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
		assertNoSecret(t, c.server, got)
	}
}

func TestChildEnvFileWins(t *testing.T) {
	// The server's env is set over everything, also under the name of a secret variable: its
	// value is the file's, not the gateway's secret.
	servers := envServers(t, `  - name: arm
    command: a
    env_inherit: [ROS_DOMAIN_ID]
    env: {ROS_DOMAIN_ID: "3", PATH: /opt/robot/bin, MODEL_KEY: from-the-file, EXTRA: "1"}
  - name: legacy
    command: a
    env_inherit: all
    env: {GW_ADMIN_TOKEN: not-a-secret, ROS_LOCALHOST_ONLY: "0"}
`)
	got := childEnv(servers["arm"], gatewayEnviron)
	want := []string{
		"HOME=/var/lib/mcp-gateway", "USER=mcp-gateway", "LOGNAME=mcp-gateway", "SHELL=/bin/sh",
		"LANG=C.UTF-8", "LANGUAGE=en", "LC_ALL=C.UTF-8", "LC_TIME=en_GB.UTF-8", "TZ=Europe/Berlin", "TMPDIR=/tmp/gw",
		"TERM=xterm", "XDG_RUNTIME_DIR=/run/user/990",
		"EXTRA=1", "MODEL_KEY=from-the-file", "PATH=/opt/robot/bin", "ROS_DOMAIN_ID=3", // env, sorted, each name once
	}
	if !slices.Equal(got, want) {
		t.Errorf("child environment\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	assertNoSecret(t, "arm", got)

	got = childEnv(servers["legacy"], gatewayEnviron)
	if !slices.Contains(got, "GW_ADMIN_TOKEN=not-a-secret") || !slices.Contains(got, "ROS_LOCALHOST_ONLY=0") || slices.Contains(got, "ROS_LOCALHOST_ONLY=1") {
		t.Errorf("legacy: env is not set over the inherited environment:\n%s", strings.Join(got, "\n"))
	}
	assertNoSecret(t, "legacy", got)
}

func TestChildEnvNeverNil(t *testing.T) {
	// exec passes the gateway's whole environment for a nil Env: an empty one must stay empty.
	servers := envServers(t, "  - {name: arm, command: a, env_inherit: [ROS_DOMAIN_ID]}\n")
	if got := childEnv(servers["arm"], nil); got == nil || len(got) != 0 {
		t.Errorf("childEnv of an empty environment = %#v, want an empty, non-nil slice", got)
	}
	if got := childEnv(servers["arm"], []string{"GW_OPERATOR_TOKEN=operator-secret-0123456789", "SSH_AUTH_SOCK=/x"}); got == nil || len(got) != 0 {
		t.Errorf("childEnv = %#v, want an empty, non-nil slice", got)
	}
}

func TestSameEnv(t *testing.T) {
	t.Setenv("ROS_DOMAIN_ID", "7")
	t.Setenv("E2E_LEFT_ALONE", "x")
	parse := func(head, server string) config.Server {
		t.Helper()
		cfg, err := config.Parse("robot.yaml", []byte(head+"servers:\n  - "+server+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Servers[0]
	}
	const arm = "{name: arm, command: a, env_inherit: [ROS_DOMAIN_ID]}"
	const legacy = "{name: arm, command: a, env_inherit: all}"
	const token = "auth: {tokens: [{principal: p, token_env: E2E_LEFT_ALONE}]}\n"
	for _, c := range []struct {
		why  string
		a, b config.Server
		same bool
	}{
		{"nothing changed", parse("", arm), parse("", arm), true},
		{"env_inherit names another variable", parse("", arm), parse("", "{name: arm, command: a, env_inherit: [ROS_LOCALHOST_ONLY]}"), false},
		{"env_inherit names one that is not set", parse("", arm), parse("", "{name: arm, command: a, env_inherit: [ROS_DOMAIN_ID, NOT_SET_ANYWHERE]}"), true},
		{"env gives what env_inherit gave", parse("", arm), parse("", `{name: arm, command: a, env: {ROS_DOMAIN_ID: "7"}}`), true},
		{"env changed", parse("", arm), parse("", `{name: arm, command: a, env: {ROS_DOMAIN_ID: "8"}}`), false},
		// A new secret variable the child does not get anyway changes nothing for it...
		{"a secret the child never got", parse("", arm), parse(token, arm), true},
		// ...but one it got under all is taken away: the server restarts.
		{"a secret the child got", parse("", legacy), parse(token, legacy), false},
		{"http servers", parse("", "{name: arm, url: 'http://127.0.0.1:1/mcp'}"), parse(token, "{name: arm, url: 'http://127.0.0.1:1/mcp'}"), true},
	} {
		if got := sameEnv(c.a, c.b); got != c.same {
			t.Errorf("%s: sameEnv = %v, want %v", c.why, got, c.same)
		}
		if got := sameLaunch(c.a, c.b); got != c.same {
			t.Errorf("%s: sameLaunch = %v, want %v", c.why, got, c.same)
		}
	}
}
