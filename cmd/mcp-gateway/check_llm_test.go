package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeLLMConfig writes a config of one server with the llm section llm (its lines, indented
// by two spaces, start at line 5) and returns its path. servers replaces the server's line.
func writeLLMConfig(t *testing.T, server, llm string) string {
	t.Helper()
	if server == "" {
		server = "{name: robot, command: /bin/true}"
	}
	path := filepath.Join(t.TempDir(), "cell.yaml")
	yaml := "gateway: {name: cell, state_dir: state, listen: \"\"}\n" +
		"servers:\n  - " + server + "\n" +
		"llm:\n" + llm
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckFindsLLMMistakes checks that check builds the model provider as agent does and
// reports each kind of llm mistake at its line, exit 1, where it used to print ok.
func TestCheckFindsLLMMistakes(t *testing.T) {
	cases := []struct {
		name, llm string
		line      int
		want      string
	}{
		{"misspelled provider", "  provider: anthropc\n", 5,
			`llm.provider: "anthropc" is not a model provider (did you mean "anthropic"?); use one of: anthropic, deepseek, mimo, mock, ollama, openai, openai.responses, openrouter, qwen, scripted`},
		{"anthropic setting on openai", "  provider: openai\n  model: gpt-4.1\n  thinking: adaptive\n", 7,
			"llm.thinking: is a setting of provider anthropic only; provider openai (Chat Completions) does not take it"},
		{"max_tokens_param on anthropic", "  provider: anthropic\n  max_tokens_param: max_completion_tokens\n", 6,
			"llm.max_tokens_param: is a setting of the Chat Completions providers only (deepseek, mimo, ollama, openai, openrouter, qwen); provider anthropic (Messages) does not take it"},
		{"invalid scripted regex", "  provider: scripted\n  rules:\n    - contains: hi\n      reply: {text: hello}\n    - matches: \"(unclosed\"\n      reply: {text: hello}\n", 9,
			"llm.rules[1].matches: not a Go regular expression: error parsing regexp: missing closing ): `(unclosed`"},
		{"literal headers", "  provider: openai\n  headers:\n    Authorization: Bearer sk-live-1\n", 7,
			"llm.headers.Authorization: a header's value is never written in the file"},
		{"temperature without sampling on anthropic", "  provider: anthropic\n  temperature: 0.3\n", 6,
			"llm.temperature: is sent to provider anthropic only with sampling: true, since current models reject sampling parameters; set sampling: true (older models only), or remove temperature"},
		{"negative price", "  provider: openai\n  prices:\n    gpt-4.1:\n      input: 2\n      output: -8\n", 9,
			"llm.prices.gpt-4.1.output: must be 0 or more USD per million tokens, got -8"},
		{"stream on openai.responses", "  provider: openai.responses\n  stream: true\n", 6,
			"llm.stream: is a setting of the Chat Completions providers (deepseek, mimo, ollama, openai, openrouter, qwen) and anthropic only; provider openai.responses (Responses) does not take it"},
		{"enum value", "  provider: anthropic\n  effort: extreme\n", 6, `llm.effort: "extreme" is not valid; use one of: low, medium, high, xhigh, max`},
		{"default not an alias", "  provider: anthropic\n  aliases: {strong: claude-opus-5-5}\n  default: stronk\n", 7, `llm.default: "stronk" is not one of the aliases (did you mean "strong"?)`},
		{"scripted chunks", "  provider: scripted\n  replies:\n    - text: hello\n      chunks: [he, lo]\n", 8, `llm.replies[0].chunks: the chunks join to "helo"`},
		{"no provider", "  max_steps: 5\n", 4, "llm.provider: is not set; choose one of anthropic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeLLMConfig(t, "", tc.llm)
			stdout, stderr, code := runCLI(t, "check", "-c", path)
			want := path + ":" + itoa(tc.line) + ": " + tc.want
			if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stdout, "ok") {
				t.Fatalf("exit %d\nstderr: %s\nstdout: %s\nwant in stderr: %s", code, stderr, stdout, want)
			}
			if strings.Contains(stderr, "sk-live") {
				t.Errorf("a header's value is printed: %s", stderr)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestCheckListsEverySectionsProblems checks that one pass reports a servers problem and the
// llm problems together, each at its line.
func TestCheckListsEverySectionsProblems(t *testing.T) {
	path := writeLLMConfig(t, "{name: robot, command: /bin/true, queue_size: 0}",
		"  provider: openai\n  effort: high\n  max_retries: -1\n  rules:\n    - matches: \"[\"\n      reply: {text: x}\n")
	stdout, _, code := runCLI(t, "check", "-o", "json", "-c", path)
	var rep checkReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 1 || rep.OK {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	want := []string{
		path + ":3: servers[0] (robot): queue_size: must be at least 1",
		path + ":6: llm.effort: is a setting of provider anthropic only; provider openai (Chat Completions) does not take it",
		path + ":7: llm.max_retries: must be 0 (no retries: behind a gateway that retries) or more, got -1",
		path + ":9: llm.rules[0].matches: not a Go regular expression",
	}
	if len(rep.Problems) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(rep.Problems, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(rep.Problems[i], w) {
			t.Errorf("problem %d: %s\nwant: %s", i, rep.Problems[i], w)
		}
	}
}

// TestCheckWarnsOfAnUnsetModelHeader checks that a headers_env variable that is not set is a
// warning in check naming the variable, never its value, while agent refuses to start at the
// same line; and that a good llm section is summarised.
func TestCheckWarnsOfAnUnsetModelHeader(t *testing.T) {
	t.Setenv("TEST_CHECK_MODEL_AUTH", "")
	path := writeLLMConfig(t, "", "  provider: openai\n  model: gpt-4.1\n  headers_env:\n    Authorization: TEST_CHECK_MODEL_AUTH\n")
	stdout, stderr, code := runCLI(t, "check", "-c", path)
	want := path + ":8: llm.headers_env.Authorization: warning: names the environment variable TEST_CHECK_MODEL_AUTH, which is not set here; mcp-gateway agent would not start without it"
	if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stdout, "agent model: provider openai, model gpt-4.1") {
		t.Fatalf("exit %d\nstderr: %s\nstdout: %s", code, stderr, stdout)
	}

	_, stderr, code = runCLI(t, "agent", "--task", "go", "-c", path)
	want = path + ":8: llm.headers_env.Authorization: names the environment variable TEST_CHECK_MODEL_AUTH, which is not set; set it, or remove the header"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("agent: exit %d\nstderr: %s", code, stderr)
	}

	t.Setenv("TEST_CHECK_MODEL_AUTH", "Bearer sk-live-2")
	stdout, stderr, code = runCLI(t, "check", "-c", path)
	if code != 0 || strings.Contains(stderr, "warning") || strings.Contains(stdout+stderr, "sk-live") {
		t.Fatalf("set: exit %d\nstderr: %s\nstdout: %s", code, stderr, stdout)
	}
}

// TestAgentReportsLLMProblemsWithLines checks that agent refuses the same problems check
// reports, at their lines, before starting anything.
func TestAgentReportsLLMProblemsWithLines(t *testing.T) {
	path := writeLLMConfig(t, "", "  provider: anthropic\n  max_tokens_param: max_tokens\n  temperature: 0.5\n")
	_, stderr, code := runCLI(t, "agent", "--task", "go", "-c", path)
	for _, want := range []string{
		path + ":6: llm.max_tokens_param: is a setting of the Chat Completions providers only",
		path + ":7: llm.temperature: is sent to provider anthropic only with sampling: true",
	} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, want %q in\n%s", code, want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "state")); err == nil {
		t.Error("agent started (it made its state directory) despite the problems")
	}
}

// TestCheckFindsWhatUsedToPrintOK checks the llm mistakes check used to print ok for, each at
// its line and none repeating a secret: a key in api_key_env, a base_url that is not an http
// URL, max_cost_usd: .nan, a scripted rule without a reply; and a headers_env value that is not
// a variable name is one problem, not also a warning that the "variable" is not set.
func TestCheckFindsWhatUsedToPrintOK(t *testing.T) {
	cases := []struct {
		name, llm string
		line      int
		want      string
	}{
		{"key in api_key_env", "  provider: openai\n  api_key_env: sk-proj-PLANTED-1\n", 6,
			"llm.api_key_env: does not look like an environment variable name"},
		{"key shaped like a variable name in api_key_env", "  provider: openai\n  api_key_env: gsk_PLANTEDLITERAL0123456789abcdefXYZ\n", 6,
			"llm.api_key_env: does not look like an environment variable name"},
		{"key shaped like a variable name in headers_env", "  provider: openai\n  headers_env: {X-Team: hf_PLANTEDaBcDeFgHiJkLmNoPqRsT012345}\n", 6,
			"llm.headers_env.X-Team: must name the environment variable holding the header's value"},
		{"base_url without a scheme", "  provider: openai\n  base_url: litellm:4000\n", 6, "llm.base_url: must start with http:// or https://"},
		{"base_url ftp", "  provider: openai\n  base_url: ftp://x\n", 6, "llm.base_url: must start with http:// or https://"},
		{"base_url unparsable", "  provider: openai\n  base_url: \"http://[::1\"\n", 6, "llm.base_url: is not a valid URL"},
		{"max_cost_usd nan", "  provider: openai\n  max_cost_usd: .nan\n", 6, "llm.max_cost_usd: must be a finite number, got NaN"},
		{"temperature nan on scripted", "  provider: scripted\n  temperature: .nan\n  replies: [{text: hi}]\n", 6, "llm.temperature: must be a finite number, got NaN"},
		{"rule without a reply", "  provider: scripted\n  rules:\n    - contains: x\n", 7, "llm.rules[0].reply: is missing or empty"},
		{"headers_env value not a variable", "  provider: openai\n  headers_env: {X-Team: \"team PLANTED\"}\n", 6,
			"llm.headers_env.X-Team: must name the environment variable holding the header's value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeLLMConfig(t, "", tc.llm)
			stdout, stderr, code := runCLI(t, "check", "-c", path)
			want := path + ":" + itoa(tc.line) + ": " + tc.want
			if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stdout, "ok") {
				t.Fatalf("exit %d\nstderr: %s\nstdout: %s\nwant in stderr: %s", code, stderr, stdout, want)
			}
			if strings.Contains(stderr, "PLANTED") || strings.Contains(stderr, "warning") {
				t.Errorf("a secret or a warning is printed: %s", stderr)
			}
		})
	}
}

// TestAgentReportsGuardAndLLMProblemsInOnePass checks that agent, like check, lists a guard's
// problems with the llm section's in one pass: an llm.judge guard naming an alias llm.aliases
// does not define and a misspelled effort are both printed at their lines, and the agent does
// not start.
func TestAgentReportsGuardAndLLMProblemsInOnePass(t *testing.T) {
	path := writeLLMConfig(t, "", "  provider: anthropic\n  effort: hgih\n  aliases: {fast: claude-haiku-5-5}\n"+
		"guardrails:\n  output:\n    - {id: answer-judge, use: llm.judge, criteria: \"no secrets\", model: strong}\n")
	_, stderr, code := runCLI(t, "agent", "--task", "go", "-c", path)
	for _, want := range []string{path + ":6: llm.effort:", path + ":10:"} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, want %q in\n%s", code, want, stderr)
		}
	}
	if !strings.Contains(stderr, "strong") {
		t.Errorf("the judge's unknown alias is not reported:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "state")); err == nil {
		t.Error("agent started (it made its state directory) despite the problems")
	}
}
