package config

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// envSecrets is a file that makes the gateway read a secret from every kind of setting that
// names one.
const envSecrets = `gateway:
  admin_token_env: GW_ADMIN_TOKEN
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: GW_OPERATOR_TOKEN}
    - {principal: planner, token_env: GW_PLANNER_TOKEN}
approvals:
  use: webhook
  webhook: {url: "http://127.0.0.1:9/hook", headers_env: {Authorization: HOOK_AUTH}}
telemetry:
  headers_env: {x-api-key: OTLP_KEY}
llm:
  provider: anthropic
  api_key_env: MODEL_KEY
servers:
  - name: cloud
    url: http://127.0.0.1:9000/mcp
    headers_env: {Authorization: CLOUD_AUTH, X-Extra: CLOUD_EXTRA}
`

func TestSecretEnv(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(envSecrets+"  - {name: arm, command: arm}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range SecretEnv(cfg) {
		got = append(got, s.Name+" "+s.Setting)
	}
	want := []string{
		"GW_ADMIN_TOKEN gateway.admin_token_env",
		"GW_OPERATOR_TOKEN auth.tokens[0].token_env",
		"GW_PLANNER_TOKEN auth.tokens[1].token_env",
		"OTLP_KEY telemetry.headers_env.x-api-key",
		"HOOK_AUTH approvals.webhook.headers_env.Authorization",
		"CLOUD_AUTH servers[0].headers_env.Authorization",
		"CLOUD_EXTRA servers[0].headers_env.X-Extra",
		"MODEL_KEY llm.api_key_env",
		"MCP_GATEWAY_ADMIN_TOKEN the admin token of mcp-gateway's commands",
		"MCP_GATEWAY_TOKEN the bearer token of mcp-gateway connect",
		"OTEL_EXPORTER_OTLP_HEADERS the OTLP exporters' request headers",
		"OTEL_EXPORTER_OTLP_LOGS_HEADERS the OTLP log exporter's request headers",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS the OTLP trace exporter's request headers",
	}
	if !slices.Equal(got, want) {
		t.Errorf("SecretEnv =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every server gets the set, sorted and without repeats, for its children.
	wantNames := []string{"CLOUD_AUTH", "CLOUD_EXTRA", "GW_ADMIN_TOKEN", "GW_OPERATOR_TOKEN", "GW_PLANNER_TOKEN", "HOOK_AUTH",
		"MCP_GATEWAY_ADMIN_TOKEN", "MCP_GATEWAY_TOKEN", "MODEL_KEY", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTLP_KEY"}
	for _, s := range cfg.Servers {
		if !slices.Equal(s.EnvInherit.Secret, wantNames) {
			t.Errorf("%s: Secret = %v\nwant %v", s.Name, s.EnvInherit.Secret, wantNames)
		}
	}
	arm := cfg.Server("arm")
	for _, name := range wantNames {
		if !arm.EnvInherit.IsSecret(name) {
			t.Errorf("IsSecret(%s) = false", name)
		}
	}
	if arm.EnvInherit.IsSecret("PATH") || arm.EnvInherit.IsSecret("GW_ADMIN") {
		t.Error("IsSecret is true for a variable no setting names")
	}
}

func TestSecretEnvModelDefaultKey(t *testing.T) {
	for provider, want := range map[string]string{"anthropic": "ANTHROPIC_API_KEY", "qwen": "DASHSCOPE_API_KEY", "ollama": "", "scripted": ""} {
		cfg, err := Parse("robot.yaml", []byte("llm: {provider: "+provider+"}\nservers: [{name: arm, command: arm}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, s := range SecretEnv(cfg) {
			if strings.HasPrefix(s.Setting, "the API key of llm.provider") {
				keys = append(keys, s.Name)
			}
		}
		if (want == "" && len(keys) != 0) || (want != "" && !slices.Equal(keys, []string{want})) {
			t.Errorf("provider %s: key variables %v, want %q", provider, keys, want)
		}
	}
}

// TestProviderKeyEnvMatchesModel holds providerKeyEnv to what agent/model reads: with every key
// variable unset, each provider's first request fails naming the variable it wanted.
func TestProviderKeyEnvMatchesModel(t *testing.T) {
	for _, name := range providerKeyEnv {
		t.Setenv(name, "")
	}
	notSet := regexp.MustCompile(`environment variable (\S+) is not set`)
	for _, provider := range model.Providers() {
		if provider == "scripted" || provider == "mock" {
			continue
		}
		m, err := model.New(model.Settings{Provider: provider, BaseURL: "http://127.0.0.1:1", MaxRetries: new(int)})
		if err != nil {
			t.Fatalf("%s: %v", provider, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = m.Generate(ctx, &model.Call{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}})
		cancel()
		read := ""
		if m := notSet.FindStringSubmatch(errString(err)); m != nil {
			read = m[1]
		}
		if read != providerKeyEnv[provider] {
			t.Errorf("provider %s reads its key from %q, config says %q (error: %v)", provider, read, providerKeyEnv[provider], err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEnvInheritParse(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`servers:
  - name: plain
    command: a
  - name: ros
    command: a
    env_inherit: [ROS_DOMAIN_ID, "RMW_*", AMENT_PREFIX_PATH]
  - name: legacy
    command: a
    env_inherit: all
  - name: none
    command: a
    env_inherit: []
  - name: nulled
    command: a
    env_inherit:
`))
	if err != nil {
		t.Fatal(err)
	}
	plain, ros, legacy, none, nulled := cfg.Server("plain"), cfg.Server("ros"), cfg.Server("legacy"), cfg.Server("none"), cfg.Server("nulled")
	if !plain.EnvInherit.IsZero() || plain.EnvInherit.Line != 0 || !nulled.EnvInherit.IsZero() {
		t.Errorf("absent or null env_inherit: %+v %+v", plain.EnvInherit, nulled.EnvInherit)
	}
	if ros.EnvInherit.All || !slices.Equal(ros.EnvInherit.Names, []string{"ROS_DOMAIN_ID", "RMW_*", "AMENT_PREFIX_PATH"}) || ros.EnvInherit.Line != 6 {
		t.Errorf("ros: %+v", ros.EnvInherit)
	}
	if !legacy.EnvInherit.All || legacy.EnvInherit.Line != 9 {
		t.Errorf("legacy: %+v", legacy.EnvInherit)
	}
	if none.EnvInherit.All || none.EnvInherit.Names == nil || len(none.EnvInherit.Names) != 0 || none.EnvInherit.IsZero() {
		t.Errorf("none: %+v", none.EnvInherit)
	}
	for _, c := range []struct {
		e    *EnvInherit
		name string
		want bool
	}{
		{&ros.EnvInherit, "ROS_DOMAIN_ID", true},
		{&ros.EnvInherit, "ROS_DOMAIN_ID2", false}, // an exact name is exact
		{&ros.EnvInherit, "ROS_LOCALHOST_ONLY", false},
		{&ros.EnvInherit, "RMW_IMPLEMENTATION", true},
		{&ros.EnvInherit, "RMW_", true},
		{&ros.EnvInherit, "rmw_implementation", false}, // names are case-sensitive
		{&ros.EnvInherit, "XRMW_X", false},
		{&legacy.EnvInherit, "ANYTHING", true},
		{&plain.EnvInherit, "ROS_DOMAIN_ID", false},
		{&none.EnvInherit, "ROS_DOMAIN_ID", false},
	} {
		if got := c.e.Inherits(c.name); got != c.want {
			t.Errorf("%v Inherits(%s) = %v, want %v", c.e.Names, c.name, got, c.want)
		}
	}

	// The effective configuration shows env_inherit as written, and leaves it out when absent.
	b, err := json.Marshal(cfg.Servers)
	if err != nil {
		t.Fatal(err)
	}
	var servers []map[string]any
	if err := json.Unmarshal(b, &servers); err != nil {
		t.Fatal(err)
	}
	got := []any{}
	for _, s := range servers {
		got = append(got, s["env_inherit"])
	}
	if want := `[null,["ROS_DOMAIN_ID","RMW_*","AMENT_PREFIX_PATH"],"all",[],null]`; mustMarshal(t, got) != want {
		t.Errorf("env_inherit as JSON: %s, want %s", mustMarshal(t, got), want)
	}
	if strings.Contains(string(b), "MCP_GATEWAY_TOKEN") {
		t.Errorf("the secret variables are in the JSON: %s", b)
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEnvInheritProblems(t *testing.T) {
	errs := parseErrors(t, envSecrets+`    env_inherit: [ROS_DOMAIN_ID]
  - name: one
    command: a
    env_inherit: ROS_DOMAIN_ID
  - name: word
    command: a
    env_inherit: yes please
  - name: map
    command: a
    env_inherit: {ROS_DOMAIN_ID: "1"}
  - name: items
    command: a
    env_inherit:
      - ""
      - all
      - "*"
      - "ROS_*_ID"
      - 1ROS
      - ROS_DOMAIN_ID
      - ROS_DOMAIN_ID
      - [nested]
  - name: leaks
    command: a
    env_inherit: [GW_OPERATOR_TOKEN, HOOK_AUTH, MODEL_KEY, MCP_GATEWAY_ADMIN_TOKEN, CLOUD_AUTH, "GW_*"]
`)
	assertReported(t, errs, []want{
		{19, `servers[0] (cloud): env_inherit is only for a command (stdio) server`},
		{22, `servers[1] (one): env_inherit: expected a list of variable names or all, got one name; write [ROS_DOMAIN_ID]`},
		{25, `servers[2] (word): env_inherit: expected a list of environment variable names such as [ROS_DOMAIN_ID, "ROS_*"], or all, got "yes please"`},
		{28, `servers[3] (map): env_inherit: expected a list of environment variable names such as [ROS_DOMAIN_ID, "ROS_*"], or all, got a mapping`},
		{32, `servers[4] (items): env_inherit[0]: is empty`},
		{33, `servers[4] (items): env_inherit[1]: "all" in a list names a variable called all; to pass the whole environment write env_inherit: all, without brackets`},
		{34, `servers[4] (items): env_inherit[2]: a lone * would pass the whole environment; write env_inherit: all`},
		{35, `servers[4] (items): env_inherit[3]: "ROS_*_ID" is not a variable name or the beginning of one followed by *`},
		{36, `servers[4] (items): env_inherit[4]: "1ROS" is not an environment variable name`},
		{38, `servers[4] (items): env_inherit[6]: ROS_DOMAIN_ID is listed twice; it is already at line 37`},
		{39, `servers[4] (items): env_inherit[7]: expected a string, got a list`},
		{42, `servers[5] (leaks): env_inherit[0]: GW_OPERATOR_TOKEN holds a secret the gateway reads (auth.tokens[0].token_env, line 5), which no child ever gets; remove it`},
		{42, `servers[5] (leaks): env_inherit[1]: HOOK_AUTH holds a secret the gateway reads (approvals.webhook.headers_env.Authorization, line 9)`},
		{42, `servers[5] (leaks): env_inherit[2]: MODEL_KEY holds a secret the gateway reads (llm.api_key_env, line 14)`},
		{42, `servers[5] (leaks): env_inherit[3]: MCP_GATEWAY_ADMIN_TOKEN holds a secret the gateway reads (the admin token of mcp-gateway's commands)`},
		{42, `servers[5] (leaks): env_inherit[4]: CLOUD_AUTH holds a secret the gateway reads (servers[0].headers_env.Authorization, line 18)`},
	})
	if n := len(errs.List); n != 16 {
		t.Errorf("%d problems, want 16 (a prefix covering secret variables is no problem):\n%v", n, errs)
	}
}

func TestEnvInheritSecretOnlyUnderItsConfig(t *testing.T) {
	// Without the llm section, ANTHROPIC_API_KEY is nobody's secret and may be passed on; with
	// provider anthropic and no api_key_env, it is the gateway's.
	const server = "servers:\n  - name: vision\n    command: a\n    env_inherit: [ANTHROPIC_API_KEY]\n"
	if _, err := Parse("robot.yaml", []byte(server)); err != nil {
		t.Errorf("without llm: %v", err)
	}
	errs := parseErrors(t, "llm: {provider: anthropic}\n"+server)
	assertReported(t, errs, []want{{5, `servers[0] (vision): env_inherit[0]: ANTHROPIC_API_KEY holds a secret the gateway reads (the API key of llm.provider anthropic, line 1)`}})
}

func TestEnvWarnings(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`auth:
  tokens: [{principal: operator, token_env: GW_OPERATOR_TOKEN}]
servers:
  - {name: ros, command: a, env_inherit: [ROS_DOMAIN_ID]}
  - name: legacy
    command: a
    env_inherit: all
  - {name: plain, command: a}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := EnvWarnings(cfg)
	want := `robot.yaml:7: servers[1] (legacy): env_inherit: warning: all passes the gateway's whole environment to the server's process (all but the 6 variables the gateway reads secrets from); list the variables it needs instead`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("EnvWarnings = %q\nwant one starting %q", got, want)
	}
}
