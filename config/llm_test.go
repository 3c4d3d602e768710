package config

import (
	"strings"
	"testing"
)

// llmLinesSrc has an llm section with a merged key (the anchor sits in a server's env, a
// mapping of strings the decoder accepts).
const llmLinesSrc = `servers: [{name: robot, command: robot, env: &base {timeout: 30s}}]


llm:
  <<: *base
  provider: scripted
  headers_env:
    Authorization: MODEL_AUTH
  prices:
    gpt-4.1: {input: 2, output: 8}
    claude-x:
      input: 3
      cache_read: 0
  rules:
    - contains: hello
      reply: {text: hi}
    - matches: "(x"
      reply:
        text: there
  replies:
    - text: hello
      chunks: [hel, lo]
`

// TestLLMLine checks the line of each setting of the llm section by its path, as
// agent/model.SettingError keys name them, merged keys and the fallbacks included.
func TestLLMLine(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(llmLinesSrc))
	if err != nil {
		t.Fatal(err)
	}
	l := &cfg.LLM
	for path, want := range map[string]int{
		"":                           4,
		"provider":                   6,
		"timeout":                    1, // merged from the anchor
		"headers_env":                7,
		"headers_env.Authorization":  8,
		"prices.gpt-4.1":             10,
		"prices.gpt-4.1.output":      10,
		"prices.claude-x":            11,
		"prices.claude-x.cache_read": 13,
		"rules[1]":                   17,
		"rules[1].matches":           17,
		"rules[1].reply.text":        19,
		"rules[1].reply.chunks":      18, // not written: its reply's line
		"replies[0].chunks":          22,
		"max_steps":                  4, // not written: the section's line
		"rules[9].matches":           14,
	} {
		if got := l.Line(path); got != want {
			t.Errorf("Line(%q) = %d, want %d", path, got, want)
		}
	}
	if (&LLM{}).Line("provider") != 0 {
		t.Error("a section not read from a file has lines")
	}
	// Prices not given for the cache are the input price; given, they are kept.
	if p := l.Prices["gpt-4.1"]; p.CacheRead != 2 || p.CacheWrite != 2 {
		t.Errorf("gpt-4.1 price %+v, want the cache at the input price", p)
	}
	if p := l.Prices["claude-x"]; p.CacheRead != 0 || p.CacheWrite != 3 {
		t.Errorf("claude-x price %+v, want cache_read 0 as given and cache_write 3", p)
	}
}

// TestLLMRefusesLiteralHeaders checks that a header's value written in the file is refused at
// its line, without repeating it, pointing at headers_env; and that headers_env names headers
// and variables.
func TestLLMRefusesLiteralHeaders(t *testing.T) {
	errs := parseErrors(t, `servers: [{name: robot, command: robot}]
llm:
  provider: openai
  headers:
    Authorization: Bearer sk-live-123
  headers_env:
    X Team: TEAM
    X-Cell: "Bearer sk-live-456"
`)
	assertReported(t, errs, []want{
		{5, "llm.headers.Authorization: a header's value is never written in the file, where whoever reads the file reads it (like api_key); put it in an environment variable and name that in headers_env instead (headers_env: {Authorization: VARIABLE})"},
		{7, `llm.headers_env: "X Team" is not an HTTP header name`},
		{8, "llm.headers_env.X-Cell: must name the environment variable holding the header's value"},
	})
	if strings.Contains(errs.Error(), "sk-live") {
		t.Errorf("a header's value is repeated: %v", errs)
	}
}

// TestLLMHeadersEnvIsASecret checks that the variables of llm.headers_env are among the secrets
// a server's env_inherit may not pass on.
func TestLLMHeadersEnvIsASecret(t *testing.T) {
	errs := parseErrors(t, `llm:
  provider: openai
  headers_env: {Authorization: MODEL_GATEWAY_AUTH}
servers:
  - name: arm
    command: arm
    env_inherit: [MODEL_GATEWAY_AUTH]
`)
	assertReported(t, errs, []want{{7, "MODEL_GATEWAY_AUTH holds a secret the gateway reads (llm.headers_env.Authorization, line 3)"}})
}

// TestParseWithCheckLLM checks Options.CheckLLM: its problems are listed with the file's, at the
// line of their setting, whatever the other sections' problems; it is not called without an llm
// section or when the section is not a mapping; and a problem about a setting Parse already
// found a problem with is left out.
func TestParseWithCheckLLM(t *testing.T) {
	calls := 0
	check := Options{CheckLLM: func(l *LLM) []LLMProblem {
		calls++
		return []LLMProblem{
			{Key: "provider", Msg: "is misspelled"},
			{Key: "rules[0].matches", Msg: "is not a regular expression"},
			{Key: "temperature", Msg: "is out of range"},
			{Key: "", Msg: "is wrong as a whole"},
		}
	}}
	src := `servers:
  - {name: robot, command: robot, queue_size: 0}
llm:
  provider: anthropc
  temperature: hot
  colour: red
  rules:
    - matches: "(x"
      reply: {text: hi}
`
	_, err := ParseWith("robot.yaml", []byte(src), check)
	if calls != 1 {
		t.Fatalf("the hook was called %d times, want once", calls)
	}
	wantProblems(t, err, []string{
		"robot.yaml:2: servers[0] (robot): queue_size: must be at least 1, got 0",
		"robot.yaml:3: llm: is wrong as a whole",
		"robot.yaml:4: llm.provider: is misspelled",
		`robot.yaml:5: llm.temperature: expected a number, got "hot"`,
		`robot.yaml:6: llm: unknown key "colour" in the llm section`,
		"robot.yaml:8: llm.rules[0].matches: is not a regular expression",
	})

	calls = 0
	for _, src := range []string{"servers: [{name: robot, command: robot}]\n", "servers: [{name: robot, command: robot}]\nllm: scripted\n", "servers: [{name: robot, command: robot}]\nllm:\n"} {
		if _, err := ParseWith("robot.yaml", []byte(src), check); calls != 0 || (err == nil) != !strings.Contains(src, "scripted") {
			t.Errorf("%q: %d calls, %v", src, calls, err)
		}
	}
	cfg, err := ParseWith("robot.yaml", []byte("servers: [{name: robot, command: robot}]\nllm: {provider: openai}\n"),
		Options{CheckLLM: func(l *LLM) []LLMProblem { calls++; return nil }})
	if err != nil || calls != 1 || cfg.LLM.Provider != "openai" {
		t.Errorf("a good section: %v after %d calls", err, calls)
	}
}

// TestLLMRefusesWhatWouldNotWork checks the llm settings refused at load: an api_key_env that is
// the key itself (never repeated), a base_url that is not an http or https URL with a host, and
// numbers that are not finite (max_cost_usd: .nan would disable the budget).
func TestLLMRefusesWhatWouldNotWork(t *testing.T) {
	errs := parseErrors(t, `servers: [{name: robot, command: robot}]
llm:
  provider: openai
  api_key_env: sk-proj-PLANTED-123
  base_url: "litellm:4000"
  max_cost_usd: .nan
  temperature: .inf
  prices:
    gpt-x: {input: .nan, output: 1}
  replies:
    - text: hi
      cost_usd: .inf
`)
	assertReported(t, errs, []want{
		{4, "llm.api_key_env: does not look like an environment variable name (letters, digits and _, not starting with a digit, and not shaped like a key); the API key belongs in the environment"},
		{5, "llm.base_url: must start with http:// or https://"},
		{6, "llm.max_cost_usd: must be a finite number, got NaN"},
		{7, "llm.temperature: must be a finite number, got +Inf"},
		{9, "llm.prices.gpt-x.input: must be a finite number, got NaN"},
		{12, "llm.replies[0].cost_usd: must be a finite number, got +Inf"},
	})
	if strings.Contains(errs.Error(), "PLANTED") {
		t.Errorf("the key is repeated: %v", errs)
	}
	for _, tc := range []struct{ url, want string }{
		{"ftp://x", "must start with http:// or https://"},
		{"http://[::1", "is not a valid URL"},
		{"https://user:pw@gw.example.com/v1", "must not carry credentials"},
		{"http:///v1", "has no host"},
	} {
		errs := parseErrors(t, "servers: [{name: robot, command: robot}]\nllm:\n  provider: openai\n  base_url: \""+tc.url+"\"\n")
		assertReported(t, errs, []want{{4, "llm.base_url: " + tc.want}})
		if strings.Contains(errs.Error(), "pw@") {
			t.Errorf("credentials repeated: %v", errs)
		}
	}
	if _, err := Parse("robot.yaml", []byte("servers: [{name: robot, command: robot}]\nllm:\n  provider: openai\n  base_url: http://localhost:4000/v1\n  api_key_env: LITELLM_KEY\n  max_cost_usd: 0.5\n")); err != nil {
		t.Errorf("a good section: %v", err)
	}
}
