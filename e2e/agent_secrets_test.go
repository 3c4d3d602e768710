package e2e

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// secretsConfig runs the agent over the simulated robot with an OpenAI-compatible provider at
// {{provider}}, its key and a team header taken from the environment.
const secretsConfig = `
gateway: {listen: ""}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    call_timeout_sec: 1
llm:
  provider: openai
  base_url: "{{provider}}"
  api_key_env: E2E_MODEL_KEY
  headers_env: {X-Team: E2E_MODEL_TEAM}
`

// TestAgentKeepsNoModelSecret plants an API key and a header value and lets a hostile provider
// echo both back: in the request id of an answer that asks for a tool call (which goes into
// that call's audit record) and in an error object of a 200 answer. The run ends with an error
// (exit 1), and neither secret is anywhere the agent writes: stdout, stderr, the transcript, or
// any file under the config's folder (the state file, the audit write-ahead file). The provider
// is the witness that both were sent.
func TestAgentKeepsNoModelSecret(t *testing.T) {
	const key, team = "sk-E2EPLANTEDKEY-7f3a9c2e41d8b6", "team-E2EPLANTEDHDR-5b8e1d"
	t.Setenv("E2E_MODEL_KEY", key)
	t.Setenv("E2E_MODEL_TEAM", team)
	var mu sync.Mutex
	var requests int
	var sentKey, sentTeam bool
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		n := requests
		sentKey = sentKey || r.Header.Get("Authorization") == "Bearer "+key
		sentTeam = sentTeam || r.Header.Get("X-Team") == team
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n == 1 {
			w.Header().Set("x-request-id", "req-"+team)
			w.Write([]byte(`{"id":"c1","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
				`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"robot__navigate_to","arguments":"{\"target\":\"table\"}"}}]},` +
				`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":9}}`))
			return
		}
		w.Write([]byte(`{"error":{"message":"invalid key ` + key + ` for team ` + team + `"}}`))
	}))
	defer provider.Close()

	cfg, _ := writeConfig(t, strings.ReplaceAll(secretsConfig, "{{provider}}", provider.URL))
	dir := filepath.Dir(cfg)
	transcript := filepath.Join(dir, "transcript.jsonl")
	stdout, stderr, code := cli(t, "agent", "-c", cfg, "--task", "go to the table", "--transcript", transcript)
	if code != 1 || !strings.Contains(stdout+stderr, "[REDACTED]") {
		t.Fatalf("exit %d, want 1 with the provider's error redacted:\n%s%s", code, stdout, stderr)
	}
	mu.Lock()
	if requests != 2 || !sentKey || !sentTeam {
		t.Fatalf("the provider got %d requests (key sent %v, header sent %v), want 2 with both", requests, sentKey, sentTeam)
	}
	mu.Unlock()
	if calls := agentCalls(t, cfg); len(calls) != 1 {
		t.Fatalf("audited agent calls = %+v, want the one the model asked for", calls)
	}
	audit, _ := cliOK(t, "audit", "-c", cfg, "-o", "jsonl")
	for _, where := range []struct{ name, text string }{{"stdout", stdout}, {"stderr", stderr}, {"the audit export", audit}} {
		for _, secret := range []string{key, team} {
			if strings.Contains(where.text, secret) {
				t.Errorf("%s holds %q:\n%s", where.name, secret, where.text)
			}
		}
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, secret := range []string{key, team} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds %q", strings.TrimPrefix(path, dir), secret)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
