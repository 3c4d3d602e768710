package e2e

// What an upstream process sees (docs/operations.md): a stdio child gets a small base of the
// gateway's environment, what its env_inherit names and its env, and never a variable the
// gateway reads a secret from, whatever env_inherit says.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// envServerBuild is e2e/envserver, built once per test run.
var envServerBuild struct {
	once sync.Once
	path string
	err  error
}

// envServerBin is the path of the upstream that answers with its environment (e2e/envserver).
func envServerBin(t *testing.T) string {
	t.Helper()
	envServerBuild.once.Do(func() {
		envServerBuild.path = filepath.Join(binDir, "envserver")
		out, err := exec.Command("go", "build", "-o", envServerBuild.path, "./envserver").CombinedOutput()
		if err != nil {
			envServerBuild.err = err
			envServerBuild.path = string(out)
		}
	})
	if envServerBuild.err != nil {
		t.Fatalf("building e2e/envserver: %v\n%s", envServerBuild.err, envServerBuild.path)
	}
	return envServerBuild.path
}

// The secrets of the gateway's environment in these tests, by the variable holding each: every
// kind of setting that makes the gateway read one, and the variables it reads without a setting.
var childEnvSecrets = map[string]string{
	"E2E_ENV_OPERATOR_TOKEN":     "operator-token-0123456789abcdef", // auth.tokens[].token_env
	"E2E_ENV_ADMIN_TOKEN":        "admin-token-0123456789abcdef",    // gateway.admin_token_env
	"E2E_ENV_MODEL_KEY":          "sk-model-key-0123456789",         // llm.api_key_env
	"E2E_ENV_CLOUD_AUTH":         "Bearer cloud-secret-0123456789",  // servers[].headers_env
	"E2E_ENV_HOOK_AUTH":          "Bearer hook-secret-0123456789",   // approvals.webhook.headers_env
	"E2E_ENV_OTLP_KEY":           "otlp-key-0123456789",             // telemetry.headers_env
	"MCP_GATEWAY_ADMIN_TOKEN":    "cli-admin-token-0123456789",      // the admin CLI's
	"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=otel-secret-0123456789",
}

// childEnvConfig runs three envservers, one per kind of env_inherit, beside an HTTP server
// reached with a header from the environment. {{envserver}} and {{cloud}} are filled in by the
// test; {{extra_token}} is where the reload adds a token.
const childEnvConfig = `gateway:
  listen: "{{listen}}"
  admin_token_env: E2E_ENV_ADMIN_TOKEN
auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_ENV_OPERATOR_TOKEN}
{{extra_token}}approvals:
  use: webhook
  webhook: {url: "http://127.0.0.1:9/hook", headers_env: {Authorization: E2E_ENV_HOOK_AUTH}}
telemetry:
  headers_env: {x-api-key: E2E_ENV_OTLP_KEY}
llm: {provider: openai, api_key_env: E2E_ENV_MODEL_KEY}
servers:
  - name: cloud
    url: "{{cloud}}"
    headers_env: {Authorization: E2E_ENV_CLOUD_AUTH}
    contract: passthrough
  - name: base
    command: "{{envserver}}"
    args: ["-name", "{{marker}}-base"]
    contract: passthrough
    env: {E2E_ENV_MODEL_KEY: from-the-file, FROM_THE_FILE: "yes"}
  - name: ros
    command: "{{envserver}}"
    args: ["-name", "{{marker}}-ros"]
    contract: passthrough
    env_inherit: [ROS_DOMAIN_ID, "E2E_ENV_*"]
  - name: legacy
    command: "{{envserver}}"
    args: ["-name", "{{marker}}-legacy"]
    contract: passthrough
    env_inherit: all
`

// childBase is the base every child gets of the gateway's environment, when set.
var childBase = []string{"HOME", "LANG", "LANGUAGE", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER", "XDG_RUNTIME_DIR"}

// cloudServer is a streamable HTTP MCP server with one tool; it keeps the Authorization header
// of the last request.
func cloudServer(t *testing.T) (url string, auth func() string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "cloud", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping", Description: "Answers pong."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var mu sync.Mutex
	last := ""
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Get("Authorization")
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", func() string { mu.Lock(); defer mu.Unlock(); return last }
}

// writeChildEnvConfig writes childEnvConfig into a new file, or over the file cfg of the
// gateway listening on addr.
func writeChildEnvConfig(t *testing.T, cfg, addr, cloud, extraToken string) (path, listen string) {
	t.Helper()
	text := strings.NewReplacer("{{envserver}}", envServerBin(t), "{{cloud}}", cloud, "{{extra_token}}", extraToken).Replace(childEnvConfig)
	if cfg == "" {
		return writeConfig(t, text)
	}
	text = strings.NewReplacer("{{listen}}", addr, "{{marker}}", marker(t)).Replace(text)
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, addr
}

// childEnviron calls the environ tool of server and returns the child's environment.
func childEnviron(t *testing.T, cs *mcp.ClientSession, server string) map[string]string {
	t.Helper()
	res, _ := call(t, cs, server+"__environ", nil)
	if res.IsError {
		t.Fatalf("%s__environ: %s", server, textOf(res))
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(textOf(res)), &env); err != nil {
		t.Fatalf("%s__environ: %v: %s", server, err, textOf(res))
	}
	return env
}

// assertNoGatewaySecret fails when env has a secret variable of the gateway's or holds a
// secret's value under any name. allowed are names env may have with the file's own value.
func assertNoGatewaySecret(t *testing.T, server string, env map[string]string, allowed ...string) {
	t.Helper()
	for name, secret := range childEnvSecrets {
		if v, ok := env[name]; ok && !slices.Contains(allowed, name) {
			t.Errorf("%s: the child has the gateway's secret variable %s", server, name)
		} else if ok && v == secret {
			t.Errorf("%s: the child has the gateway's value of %s", server, name)
		}
		for k, v := range env {
			if strings.Contains(v, secret) {
				t.Errorf("%s: the child's %s holds the secret of %s", server, k, name)
			}
		}
	}
}

func TestChildEnvironmentHoldsNoSecretOfTheGateway(t *testing.T) {
	for name, value := range childEnvSecrets {
		t.Setenv(name, value)
	}
	t.Setenv("ROS_DOMAIN_ID", "42")
	t.Setenv("E2E_ENV_PLAIN", "visible-to-children-0123")
	t.Setenv("E2E_UNLISTED", "only-under-all")
	t.Setenv("LC_TIME", "C")
	if os.Getenv("HOME") == "" {
		t.Setenv("HOME", t.TempDir())
	}
	cloud, cloudAuth := cloudServer(t)
	cfg, addr := writeChildEnvConfig(t, "", "", cloud, "")

	// check warns of env_inherit: all, with its line, and passes.
	_, errOut, code := cli(t, "check", "-c", cfg)
	if want := cfg + ":32: servers[3] (legacy): env_inherit: warning: all passes the gateway's whole environment"; code != 0 || !strings.Contains(errOut, want) {
		t.Fatalf("check: exit %d, want 0 with %q:\n%s", code, want, errOut)
	}

	startGateway(t, cfg, addr)
	cs := connectHTTPAs(t, addr, childEnvSecrets["E2E_ENV_OPERATOR_TOKEN"], nil)
	// The gateway did read the secrets: the token let the client in, and the HTTP upstream got
	// its header.
	if res, _ := call(t, cs, "cloud__ping", nil); textOf(res) != "pong" || cloudAuth() != childEnvSecrets["E2E_ENV_CLOUD_AUTH"] {
		t.Fatalf("cloud__ping: %q, with Authorization %q", textOf(res), cloudAuth())
	}

	// No env_inherit: the base and the file's env, nothing else. The file may set a variable
	// of a secret's name: the child gets the file's value.
	base := childEnviron(t, cs, "base")
	assertNoGatewaySecret(t, "base", base, "E2E_ENV_MODEL_KEY")
	if base["PATH"] != os.Getenv("PATH") || base["HOME"] != os.Getenv("HOME") || base["LC_TIME"] != "C" {
		t.Errorf("base: PATH %q HOME %q LC_TIME %q, want the gateway's", base["PATH"], base["HOME"], base["LC_TIME"])
	}
	if base["E2E_ENV_MODEL_KEY"] != "from-the-file" || base["FROM_THE_FILE"] != "yes" {
		t.Errorf("base: the file's env is not set: %v", base)
	}
	for name := range base {
		if !slices.Contains(childBase, name) && !strings.HasPrefix(name, "LC_") && name != "E2E_ENV_MODEL_KEY" && name != "FROM_THE_FILE" {
			t.Errorf("base: the child has %s, which is neither in the base nor in its env", name)
		}
	}

	// A name and a prefix: ROS_DOMAIN_ID and E2E_ENV_PLAIN, but none of the secret variables
	// the prefix E2E_ENV_* covers.
	ros := childEnviron(t, cs, "ros")
	assertNoGatewaySecret(t, "ros", ros)
	if ros["ROS_DOMAIN_ID"] != "42" || ros["E2E_ENV_PLAIN"] != "visible-to-children-0123" || ros["PATH"] != os.Getenv("PATH") {
		t.Errorf("ros: ROS_DOMAIN_ID %q E2E_ENV_PLAIN %q PATH %q", ros["ROS_DOMAIN_ID"], ros["E2E_ENV_PLAIN"], ros["PATH"])
	}
	if _, ok := ros["E2E_UNLISTED"]; ok {
		t.Error("ros: the child has E2E_UNLISTED, which its env_inherit does not name")
	}
	if _, ok := base["ROS_DOMAIN_ID"]; ok {
		t.Error("base: the child has ROS_DOMAIN_ID, which it does not inherit")
	}

	// all: the rest of the environment, still without the secrets.
	legacy := childEnviron(t, cs, "legacy")
	assertNoGatewaySecret(t, "legacy", legacy)
	for _, name := range []string{"ROS_DOMAIN_ID", "E2E_ENV_PLAIN", "E2E_UNLISTED", "PATH", "HOME"} {
		if legacy[name] != os.Getenv(name) {
			t.Errorf("legacy: %s = %q, want the gateway's %q", name, legacy[name], os.Getenv(name))
		}
	}

	// A reload that makes E2E_ENV_PLAIN a secret (a new token's variable) applies to the
	// children started after it: ros and legacy, whose children had it, are restarted without
	// it; base, whose child's environment does not change, keeps running.
	writeChildEnvConfig(t, cfg, addr, cloud, "    - {principal: planner, token_env: E2E_ENV_PLAIN}\n")
	code, body := postReload(t, addr, childEnvSecrets["E2E_ENV_ADMIN_TOKEN"])
	var rep struct{ Restarted, Started, Stopped []string }
	if err := json.Unmarshal([]byte(body), &rep); code != http.StatusOK || err != nil {
		t.Fatalf("POST /admin/reload: %d %s", code, body)
	}
	if !slices.Equal(rep.Restarted, []string{"ros", "legacy"}) || len(rep.Started)+len(rep.Stopped) != 0 {
		t.Fatalf("reload report: %s; want ros and legacy restarted", body)
	}
	for _, server := range []string{"ros", "legacy"} {
		env := childEnviron(t, cs, server)
		assertNoGatewaySecret(t, server, env)
		if _, ok := env["E2E_ENV_PLAIN"]; ok {
			t.Errorf("%s after the reload: the child still has E2E_ENV_PLAIN, now a token's variable", server)
		}
		if env["ROS_DOMAIN_ID"] != "42" {
			t.Errorf("%s after the reload: ROS_DOMAIN_ID = %q", server, env["ROS_DOMAIN_ID"])
		}
	}
}

func TestCheckRefusesInheritingASecretVariable(t *testing.T) {
	cfg, _ := writeConfig(t, `auth:
  tokens:
    - {principal: operator, roles: [admin], token_env: E2E_ENV_OPERATOR_TOKEN}
servers:
  - name: robot
    command: "{{sim}}"
    env_inherit: [ROS_DOMAIN_ID, E2E_ENV_OPERATOR_TOKEN]
`)
	out, errOut, code := cli(t, "check", "-c", cfg)
	want := cfg + ":7: servers[0] (robot): env_inherit[1]: E2E_ENV_OPERATOR_TOKEN holds a secret the gateway reads (auth.tokens[0].token_env, line 3), which no child ever gets"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("check: exit %d, want 1 with %q:\n%s%s", code, want, out, errOut)
	}
}
