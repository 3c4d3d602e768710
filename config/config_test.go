package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// want is one problem Parse must report: its line and a part of its message.
type want struct {
	line int
	text string
}

// parseErrors parses src as robot.yaml and returns its problems, failing the test when there
// are none or they do not come as *Errors.
func parseErrors(t *testing.T, src string) *Errors {
	t.Helper()
	cfg, err := Parse("robot.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded, want an error; got %+v", cfg)
	}
	if cfg != nil {
		t.Errorf("Parse returned a config along with the error")
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want *Errors: %v", err, err)
	}
	if len(errs.List) == 0 {
		t.Fatal("*Errors is empty")
	}
	return errs
}

// assertReported checks that every wanted problem is reported at its line, formatted as
// "robot.yaml:LINE: ...".
func assertReported(t *testing.T, errs *Errors, wants []want) {
	t.Helper()
	for _, w := range wants {
		prefix := "robot.yaml:"
		if w.line > 0 {
			prefix += strconv.Itoa(w.line) + ":"
		}
		found := false
		for _, e := range errs.List {
			if e.Line == w.line && strings.HasPrefix(e.Error(), prefix) && strings.Contains(e.Error(), w.text) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no problem at line %d containing %q; got:\n%v", w.line, w.text, errs)
		}
	}
}

func TestParseReportsEachProblemWithItsLine(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		wants []want
	}{
		{
			name: "unknown key in gateway",
			src: `gateway:
  lisen: 127.0.0.1:9000
servers:
  - {name: arm, command: arm}
`,
			wants: []want{{2, `gateway: unknown key "lisen" in the gateway section (did you mean "listen"?); known keys: name, listen,`}},
		},
		{
			name: "misspelled key in a server",
			src: `servers:
  - name: arm
    comand: python
`,
			wants: []want{
				{3, `servers[0] (arm): unknown key "comand" in a server (did you mean "command"?); known keys: name, command, args`},
				{2, `needs command`},
			},
		},
		{
			name: "key in another spelling",
			src: `servers:
  - name: arm
    command: arm
    callTimeoutSec: 3
`,
			wants: []want{{4, `unknown key "callTimeoutSec" in a server (did you mean "call_timeout_sec"?)`}},
		},
		{
			name: "unknown key without a close match",
			src: `servers:
  - name: arm
    command: arm
    banana: 3
`,
			wants: []want{{4, `unknown key "banana" in a server; known keys:`}},
		},
		{
			name: "unknown key in tools",
			src: `servers:
  - name: arm
    command: arm
    tools:
      inclde: ["*"]
`,
			wants: []want{{5, `servers[0] (arm): tools: unknown key "inclde" in tools (did you mean "include"?)`}},
		},
		{
			name: "unknown key in an override",
			src: `servers:
  - name: arm
    command: arm
    tools:
      overrides:
        pick_object:
          evaluted: true
`,
			wants: []want{{7, `servers[0] (arm): tools.overrides.pick_object: unknown key "evaluted" in a tool override (did you mean "evaluated"?)`}},
		},
		{
			name: "misspelled top-level key",
			src: `sever:
  - {name: arm, command: arm}
`,
			wants: []want{{1, `unknown key "sever" at the top level (did you mean "servers"?); known keys: gateway, servers`}, {0, "servers is missing"}},
		},
		{
			name:  "unknown top-level key",
			src:   "servers: [{name: arm, command: arm}]\nplanner:\n  provider: scripted\n",
			wants: []want{{2, `unknown key "planner" at the top level; known keys: gateway, servers`}},
		},
		{
			name: "agent options out of range",
			src: `servers: [{name: arm, command: arm}]
llm:
  max_steps: 0
  max_cost_usd: -1
  replies:
    - tool_calls: [{name: robot__navigate_to, arguments: {target: table}, colour: red}]
experience:
  robot__pick_object: ""
`,
			wants: []want{
				{3, `llm.max_steps: must be at least 1`},
				{4, `llm.max_cost_usd: must not be negative`},
				{6, `unknown key "colour" in a scripted tool call`},
				{7, `experience: tool "robot__pick_object": the text is empty`},
			},
		},
		{
			name: "number expected",
			src: `servers:
  - name: arm
    command: arm
    call_timeout_sec: fast
`,
			wants: []want{{4, `servers[0] (arm): call_timeout_sec: expected a number, got "fast"`}},
		},
		{
			name: "list expected",
			src: `servers:
  - name: arm
    command: arm
    args: "x"
`,
			wants: []want{{4, `servers[0] (arm): args: expected a list of strings, got "x"`}},
		},
		{
			name: "wrong types elsewhere",
			src: `gateway: [a]
servers:
  - name: arm
    command: arm
    physical: maybe
    queue_size: 1.5
    env: [A]
    tools:
      include:
        - ok
        - [nested]
`,
			wants: []want{
				{1, `gateway: expected a mapping, got a list`},
				{5, `physical: expected true or false, got "maybe"`},
				{6, `queue_size: expected a whole number, got "1.5"`},
				{7, `env: expected a mapping of names to strings, got a list`},
				{11, `tools.include[1]: expected a string, got a list`},
			},
		},
		{
			name:  "servers not a list",
			src:   "servers:\n  arm: {command: arm}\n",
			wants: []want{{2, `servers: expected a list, got a mapping`}},
		},
		{
			name:  "a server without anything",
			src:   "servers:\n  - {name: arm, command: arm}\n  -\n",
			wants: []want{{3, `servers[1]: expected a mapping, got no value`}},
		},
		{
			name:  "a server not a mapping",
			src:   "servers:\n  - arm\n",
			wants: []want{{2, `servers[0]: expected a mapping, got "arm"`}},
		},
		{
			name: "scalar without a value",
			src: `gateway:
  listen:
servers: [{name: arm, command: arm}]
`,
			wants: []want{{2, `gateway.listen: no value; give a string, or remove the key to get the default`}},
		},
		{
			name: "duplicate key in a server",
			src: `servers:
  - name: arm
    command: a
    command: b
`,
			wants: []want{{4, `servers[0] (arm): duplicate key "command"; it is already given at line 3`}},
		},
		{
			name: "duplicate key at the top and in gateway",
			src: `gateway:
  name: a
  name: b
servers: [{name: arm, command: arm}]
gateway: {}
`,
			wants: []want{
				{3, `gateway: duplicate key "name"; it is already given at line 2`},
				{5, `duplicate key "gateway"; it is already given at line 1`},
			},
		},
		{
			name: "duplicate key in env and overrides",
			src: `servers:
  - name: arm
    command: arm
    env:
      A: "1"
      A: "2"
    tools:
      overrides:
        pick: {}
        pick: {}
`,
			wants: []want{
				{6, `servers[0] (arm): env: duplicate key "A"; it is already given at line 5`},
				{10, `servers[0] (arm): tools.overrides: duplicate key "pick"; it is already given at line 9`},
			},
		},
		{
			name: "duplicate server name",
			src: `servers:
  - name: arm
    command: a
  - name: cam
    command: c
  - name: arm
    command: b
`,
			wants: []want{{6, `servers[2] (arm): duplicate server name "arm"; servers[0] at line 2 has it too`}},
		},
		{
			name: "bad server names",
			src: `servers:
  - command: a
  - name: ""
    command: a
  - name: -arm
    command: a
  - name: my arm
    command: a
  - name: arm__left
    command: a
`,
			wants: []want{
				{2, `servers[0]: name is missing`},
				{3, `servers[1]: name is empty`},
				{5, `servers[2] (-arm): name "-arm" is not valid: use letters, digits, - and _`},
				{7, `servers[3] (my arm): name "my arm" is not valid`},
				{9, `servers[4] (arm__left): name "arm__left" must not contain "__"`},
			},
		},
		{
			name: "neither command nor url",
			src: `servers:
  - name: arm
    physical: true
`,
			wants: []want{{2, `servers[0] (arm): needs command (a stdio server the gateway launches) or url (a streamable HTTP server)`}},
		},
		{
			name: "both command and url",
			src: `servers:
  - name: arm
    command: arm
    url: http://127.0.0.1:9000/mcp
`,
			wants: []want{{4, `servers[0] (arm): has both command (line 3) and url`}},
		},
		{
			name: "urls",
			src: `servers:
  - name: a
    url: ftp://host/mcp
  - name: b
    url: localhost:9000
  - name: c
    url: http:///mcp
  - name: d
    url: "http://[::1"
`,
			wants: []want{
				{3, `servers[0] (a): url: must start with http:// or https://`},
				{5, `servers[1] (b): url: must start with http:// or https://`},
				{7, `servers[2] (c): url: has no host`},
				{9, `servers[3] (d): url: is not a valid URL`},
			},
		},
		{
			name: "stdio settings with url",
			src: `servers:
  - name: cloud
    url: https://planner.example/mcp
    cwd: /srv
    env: {A: "1"}
    args: [x]
`,
			wants: []want{
				{4, `servers[0] (cloud): cwd is only for a command (stdio) server`},
				{5, `servers[0] (cloud): env is only for a command (stdio) server`},
				{6, `servers[0] (cloud): args is only for a command (stdio) server`},
			},
		},
		{
			name: "headers_env with command",
			src: `servers:
  - name: arm
    command: arm
    headers_env: {Authorization: TOKEN}
`,
			wants: []want{{4, `servers[0] (arm): headers_env is only for a url (HTTP) server`}},
		},
		{
			name: "bad headers_env",
			src: `servers:
  - name: cloud
    url: https://planner.example/mcp
    headers_env:
      Bad Header: TOKEN
      Authorization: Bearer abc
`,
			wants: []want{
				{5, `headers_env: "Bad Header" is not an HTTP header name`},
				{6, `headers_env.Authorization: must name the environment variable holding the header's value`},
			},
		},
		{
			name: "bad env names",
			src: `servers:
  - name: arm
    command: arm
    env:
      "A=B": x
      "": y
`,
			wants: []want{
				{5, `env: "A=B" is not an environment variable name`},
				{6, `env: an environment variable needs a name`},
			},
		},
		{
			name: "enumerations",
			src: `gateway:
  tool_names: prefix
  lockout_scope: cell
  log_format: yaml
  log_level: INFO
  http_mode: statefull
servers:
  - name: arm
    command: arm
    contract: strict
    protocol_version: "2025-11-26"
`,
			wants: []want{
				{2, `gateway.tool_names: "prefix" is not valid (did you mean "prefixed"?); use one of: prefixed, bare`},
				{3, `gateway.lockout_scope: "cell" is not valid; use one of: global, server`},
				{4, `gateway.log_format: "yaml" is not valid; use one of: text, json`},
				{5, `gateway.log_level: "INFO" is not valid (did you mean "info"?); use one of: debug, info, warn, error`},
				{6, `gateway.http_mode: "statefull" is not valid (did you mean "stateful"?); use one of: auto, stateful, stateless`},
				{10, `servers[0] (arm): contract: "strict" is not valid; use one of: envelope, passthrough`},
				{11, `protocol_version: "2025-11-26" is not valid (did you mean "2025-11-25"?); use one of: 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05`},
			},
		},
		{
			name: "timeouts and queue",
			src: `servers:
  - name: arm
    command: arm
    call_timeout_sec: 0
    startup_timeout_sec: -1
    restart_backoff_max_sec: .inf
    timeout_argument_margin_sec: -0.5
    queue_size: 0
  - name: cam
    command: cam
    call_timeout_sec: .nan
    max_result_bytes: 1023
`,
			wants: []want{
				{4, `servers[0] (arm): call_timeout_sec: must be a number of seconds above 0, got 0`},
				{5, `startup_timeout_sec: must be a number of seconds above 0, got -1`},
				{6, `restart_backoff_max_sec: must be a number of seconds above 0, got +Inf`},
				{7, `timeout_argument_margin_sec: must be 0 or more seconds, got -0.5`},
				{8, `queue_size: must be at least 1, got 0`},
				{11, `servers[1] (cam): call_timeout_sec: must be a number of seconds above 0, got NaN`},
				{12, `max_result_bytes: must be at least 1024 bytes, got 1023; an MCP initialize result alone takes several hundred`},
			},
		},
		{
			name: "malformed globs",
			src: `servers:
  - name: arm
    command: arm
    tools:
      include: ["move_*", "[a-"]
      exclude:
        - debug_*
        - "x\\"
        - ""
`,
			wants: []want{
				{5, `servers[0] (arm): tools.include[1]: "[a-" is not a valid glob`},
				{8, `servers[0] (arm): tools.exclude[1]: "x\\" is not a valid glob`},
				{9, `servers[0] (arm): tools.exclude[2]: is empty; it matches no tool`},
			},
		},
		{
			name: "empty include and hidden name",
			src: `servers:
  - name: arm
    command: arm
    tools:
      include: []
      hidden: [""]
`,
			wants: []want{
				{5, `tools.include: is empty, which lists no tool; remove it to list every tool`},
				{6, `tools.hidden[0]: is empty; name an upstream tool`},
			},
		},
		{
			name: "bad listen and empty settings",
			src: `gateway:
  name: ""
  listen: localhost
  state_dir: ""
servers:
  - name: arm
    command: ""
    cwd: ""
  - name: cam
    command: cam
    tools: {overrides: {"": {}}}
`,
			wants: []want{
				{2, `gateway.name: is empty`},
				{3, `gateway.listen: "localhost" is not host:port`},
				{4, `gateway.state_dir: is empty`},
				{7, `servers[0] (arm): command: is empty`},
				{8, `servers[0] (arm): cwd: is empty`},
				{11, `servers[1] (cam): tools.overrides: an override needs the name of an upstream tool`},
			},
		},
		{
			name:  "listen port out of range",
			src:   "gateway: {listen: \"127.0.0.1:70000\"}\nservers: [{name: arm, command: arm}]\n",
			wants: []want{{1, `gateway.listen: "127.0.0.1:70000" has no port number from 0 to 65535`}},
		},
		{
			name:  "syntax error",
			src:   "servers:\n  - name: arm\n    command: [arm\n",
			wants: []want{{3, `invalid YAML: did not find expected ',' or ']'`}},
		},
		{
			name:  "syntax error of a block mapping",
			src:   "servers:\n  - name: arm\n command: arm\n",
			wants: []want{{3, `invalid YAML: did not find expected key`}},
		},
		{
			name:  "syntax error in a scalar",
			src:   "servers:\n  - name: arm\n    command: \"arm\n",
			wants: []want{{3, `invalid YAML: found unexpected end of stream`}},
		},
		{
			name:  "unknown anchor",
			src:   "servers:\n  - name: arm\n    command: *cmd\n",
			wants: []want{{3, `invalid YAML: unknown anchor 'cmd' referenced`}},
		},
		{
			name:  "tab indentation",
			src:   "servers:\n\t- name: arm\n",
			wants: []want{{2, `invalid YAML: found character that cannot start any token`}},
		},
		{
			name:  "second document",
			src:   "servers: [{name: arm, command: arm}]\n---\nservers: []\n",
			wants: []want{{2, `a second YAML document starts here`}},
		},
		{
			name:  "empty file",
			src:   "# nothing yet\n",
			wants: []want{{0, `the file is empty; it needs at least a servers list`}},
		},
		{
			name:  "null document",
			src:   "~\n",
			wants: []want{{1, `the file holds no configuration`}},
		},
		{
			name:  "not a mapping",
			src:   "- arm\n",
			wants: []want{{1, `the file must be a mapping with the keys gateway and servers, not a list`}},
		},
		{
			name:  "servers missing",
			src:   "gateway: {name: x}\n",
			wants: []want{{0, `servers is missing`}},
		},
		{
			name:  "servers empty",
			src:   "gateway: {name: x}\nservers: []\n",
			wants: []want{{2, `servers is empty; list at least one upstream MCP server`}},
		},
		{
			name:  "key not a name",
			src:   "servers: [{name: arm, command: arm}]\n[a]: 1\n",
			wants: []want{{2, `a key must be a plain name, not a list`}},
		},
		{
			name: "merge of a scalar",
			src: `servers:
  - name: arm
    command: arm
    <<: 3
`,
			wants: []want{{4, `<< merges a mapping or a list of mappings, not "3"`}},
		},
		{
			name: "a mapping merging itself",
			src: `servers:
  - &arm
    name: arm
    command: arm
    <<: *arm
`,
			wants: []want{{5, `<< merges are nested more than 16 deep`}},
		},
		{
			name: "unknown key through a merge",
			src: `servers:
  - &base
    name: arm
    command: arm
    physcal: true
  - <<: *base
    name: cam
`,
			wants: []want{
				{5, `servers[0] (arm): unknown key "physcal" in a server (did you mean "physical"?)`},
				{5, `servers[1] (cam): unknown key "physcal"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertReported(t, parseErrors(t, tt.src), tt.wants)
		})
	}
}

func TestParseNeverRepeatsSecrets(t *testing.T) {
	tests := []struct {
		src   string
		wants []want
	}{
		{
			src: `servers:
  - name: cloud
    url: https://robot:hunter2@planner.example/mcp
    headers_env: {Authorization: "Bearer hunter2"}
`,
			wants: []want{
				{3, `url: must not carry credentials`},
				{4, `headers_env.Authorization: must name the environment variable`},
			},
		},
		{
			src: `servers:
  - name: cloud
    url: https://planner.example/mcp
    headers_env: "Bearer hunter2"
`,
			wants: []want{{4, `headers_env: expected a mapping of names to strings, got a single value`}},
		},
	}
	for _, tt := range tests {
		errs := parseErrors(t, tt.src)
		assertReported(t, errs, tt.wants)
		if strings.Contains(errs.Error(), "hunter2") {
			t.Errorf("a message repeats the secret:\n%v", errs)
		}
	}
}

func TestParseCollectsEveryProblemSortedByLine(t *testing.T) {
	errs := parseErrors(t, `gateway:
  lisen: x
  log_level: loud
servers:
  - name: arm
    comand: python
    call_timeout_sec: fast
    args: "x"
  - name: arm
    url: ftp://x
llm: {max_steps: -2}
`)
	assertReported(t, errs, []want{
		{2, `unknown key "lisen"`},
		{3, `log_level: "loud" is not valid`},
		{5, `needs command`},
		{6, `unknown key "comand"`},
		{7, `call_timeout_sec: expected a number`},
		{8, `args: expected a list of strings`},
		{9, `duplicate server name "arm"; servers[0] at line 5`},
		{10, `url: must start with http://`},
		{11, `llm.max_steps: must be at least 1`},
	})
	if len(errs.List) != 9 {
		t.Errorf("got %d problems, want 9:\n%v", len(errs.List), errs)
	}
	lines := make([]int, len(errs.List))
	for i, e := range errs.List {
		lines[i] = e.Line
	}
	if !slices.IsSorted(lines) {
		t.Errorf("problems not sorted by line: %v", lines)
	}
	if got := strings.Count(errs.Error(), "\n"); got != len(errs.List)-1 {
		t.Errorf("Error() has %d line breaks, want one problem per line:\n%v", got, errs)
	}
	var one Error
	if !errors.As(error(errs), &one) || one.Line != 2 || one.File != "robot.yaml" {
		t.Errorf("errors.As(Error) = %+v, want the first problem", one)
	}
}

func TestParseAppliesDefaultsToAbsentKeys(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`servers:
  - name: arm
    command: arm
`))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Gateway
	if g.Name != DefaultName || g.Listen != DefaultListen || g.ToolNames != ToolNamesPrefixed ||
		g.LockoutScope != LockoutGlobal || g.LogFormat != LogFormatText || g.LogLevel != LogLevelInfo {
		t.Errorf("gateway defaults not applied: %+v", g)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, DefaultStateDir); g.StateDir != want {
		t.Errorf("StateDir = %q, want %q", g.StateDir, want)
	}
	s := cfg.Servers[0]
	if s.CallTimeoutSec != DefaultCallTimeoutSec || s.TimeoutArgumentMarginSec != DefaultTimeoutMarginSec ||
		s.StartupTimeoutSec != DefaultStartupTimeoutSec || s.RestartBackoffMaxSec != DefaultRestartBackoffMaxSec ||
		s.QueueSize != DefaultQueueSize || s.Contract != ContractEnvelope || s.MaxResultBytes != DefaultMaxResultBytes {
		t.Errorf("server defaults not applied: %+v", s)
	}
	if !slices.Equal(s.Tools.Include, []string{"*"}) {
		t.Errorf("Include = %q, want [*]", s.Tools.Include)
	}
	if s.Line != 2 || cfg.Path != "robot.yaml" {
		t.Errorf("Line = %d, Path = %q; want 2, robot.yaml", s.Line, cfg.Path)
	}
}

func TestParseReadsTheAgentSections(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`servers: [{name: robot, command: robot}]
llm:
  provider: scripted
  timeout: 30s
  one_tool_per_turn: true
  rules:
    - contains: timed out
      reply: {text: stopping, finish_reason: stop}
  replies:
    - text: looking
      tool_calls: [{name: robot__navigate_to, arguments: {target: table, speed: 0.5}}]
      usage: {input_tokens: 10, output_tokens: 2}
  repeat_last: false
experience:
  robot__pick_object: Grasp cups by the handle.
`))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.LLM
	if l.Provider != "scripted" || time.Duration(l.Timeout) != 30*time.Second || !l.OneToolPerTurn ||
		l.MaxSteps != DefaultMaxSteps || l.HaltOnUnknownOutcome == nil || !*l.HaltOnUnknownOutcome ||
		l.RepeatLast == nil || *l.RepeatLast {
		t.Errorf("llm = %+v", l)
	}
	if len(l.Rules) != 1 || l.Rules[0].Contains != "timed out" || l.Rules[0].Reply.FinishReason != "stop" {
		t.Errorf("rules = %+v", l.Rules)
	}
	if len(l.Replies) != 1 || len(l.Replies[0].ToolCalls) != 1 || l.Replies[0].Usage == nil || l.Replies[0].Usage.InputTokens != 10 {
		t.Fatalf("replies = %+v", l.Replies)
	}
	var args map[string]any
	if err := l.Replies[0].ToolCalls[0].Arguments.Decode(&args); err != nil || args["target"] != "table" || args["speed"] != 0.5 {
		t.Errorf("arguments = %v (%v)", args, err)
	}
	if cfg.Experience["robot__pick_object"] != "Grasp cups by the handle." {
		t.Errorf("experience = %v", cfg.Experience)
	}
}

func TestParseKeepsExplicitValues(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`gateway:
  listen: ""
servers:
  - name: arm
    command: arm
    timeout_argument_margin_sec: 0
    call_timeout_sec: 0.5
    queue_size: 1
    max_result_bytes: 16777216
    tools:
      include: [move_*]
  - name: cam
    command: cam
    tools:
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.Listen != "" {
		t.Errorf(`listen: "" became %q; it must stay empty (no HTTP)`, cfg.Gateway.Listen)
	}
	arm := cfg.Server("arm")
	if arm.TimeoutArgumentMarginSec != 0 || arm.CallTimeoutSec != 0.5 || arm.QueueSize != 1 || arm.MaxResultBytes != 16<<20 {
		t.Errorf("explicit values replaced: %+v", arm)
	}
	if !slices.Equal(arm.Tools.Include, []string{"move_*"}) {
		t.Errorf("Include = %q", arm.Tools.Include)
	}
	if cam := cfg.Server("cam"); !slices.Equal(cam.Tools.Include, []string{"*"}) {
		t.Errorf(`"tools:" with no value: Include = %q, want [*]`, cam.Tools.Include)
	}
}

func TestLoadResolvesRelativePathsAgainstTheFile(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "elsewhere")
	path := filepath.Join(dir, "robot.yaml")
	src := `gateway:
  state_dir: state
servers:
  - name: a
    command: ./bin/sim-robot
    cwd: work
  - name: b
    command: bin/sim-robot
    cwd: ` + abs + `
  - name: c
    command: node
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{cfg.Gateway.StateDir, filepath.Join(dir, "state")},
		{cfg.Server("a").Command, filepath.Join(dir, "bin", "sim-robot")},
		{cfg.Server("a").Cwd, filepath.Join(dir, "work")},
		{cfg.Server("b").Command, filepath.Join(dir, "bin", "sim-robot")},
		{cfg.Server("b").Cwd, abs},
		{cfg.Server("c").Command, "node"},
		{cfg.Path, path},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestParseResolvesAgainstARelativeFilePath(t *testing.T) {
	cfg, err := Parse(filepath.Join("conf", "robot.yaml"), []byte("servers: [{name: a, command: ./run}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "conf", "run"); cfg.Servers[0].Command != want {
		t.Errorf("Command = %q, want %q", cfg.Servers[0].Command, want)
	}
}

func TestLoadExample(t *testing.T) {
	path := filepath.Join("testdata", "robot.yaml")
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.Name != "cell-7" || cfg.Gateway.Listen != "127.0.0.1:8081" || cfg.Gateway.LockoutScope != LockoutServer ||
		cfg.Gateway.LogFormat != LogFormatJSON || cfg.Gateway.LogLevel != LogLevelDebug || cfg.Gateway.StateDir != filepath.Join(dir, "state") {
		t.Errorf("gateway = %+v", cfg.Gateway)
	}
	arm := cfg.Server("arm")
	if arm == nil || arm.Transport() != TransportStdio || !arm.Physical || arm.QueueSize != 4 || arm.Line != 11 ||
		arm.TimeoutArgumentMarginSec != 0 || arm.Env["ROS_DOMAIN_ID"] != "3" || !slices.Equal(arm.Args, []string{"--speed", "0.5"}) {
		t.Fatalf("arm = %+v", arm)
	}
	if o := arm.Tools.Overrides["pick_object"]; !o.Evaluated || o.Description != "Pick an object by name." {
		t.Errorf("override = %+v", o)
	}
	if !slices.Equal(arm.Tools.Hidden, []string{"evaluate_run"}) || arm.Tools.Overrides["evaluate_run"].Description == "" {
		t.Errorf("a hidden tool with an override must load: %+v", arm.Tools)
	}
	cloud := cfg.Server("cloud")
	if cloud == nil || cloud.Transport() != TransportHTTP || cloud.HeadersEnv["Authorization"] != "CLOUD_MCP_AUTH" ||
		cloud.Contract != ContractPassthrough || cloud.Line != 33 {
		t.Errorf("cloud = %+v", cloud)
	}
	if cfg.Server("nope") != nil {
		t.Error(`Server("nope") != nil`)
	}
	if cfg.Server("arm") != &cfg.Servers[0] {
		t.Error("Server does not point into Servers")
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestParseAnchorsAndMerges(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`servers:
  - &base
    name: arm
    command: arm
    env: &env {ROS_DOMAIN_ID: "3"}
    call_timeout_sec: 10
  - <<: *base
    name: cam
    call_timeout_sec: 20
  - name: lidar
    command: lidar
    env: *env
`))
	if err != nil {
		t.Fatal(err)
	}
	cam := cfg.Server("cam")
	if cam.Command != "arm" || cam.CallTimeoutSec != 20 || cam.Env["ROS_DOMAIN_ID"] != "3" || cam.Line != 7 {
		t.Errorf("cam = %+v; want command merged, call_timeout_sec overridden", cam)
	}
	if cfg.Server("lidar").Env["ROS_DOMAIN_ID"] != "3" {
		t.Errorf("alias not followed: %+v", cfg.Server("lidar"))
	}
}

func TestParseBoundsAliasExpansion(t *testing.T) {
	// 1000 servers that each name a list of 1000 arguments: a million values from 5 kB.
	src := "x: &args [" + strings.Repeat("a, ", 999) + "a]\nservers:\n  - &s {name: a, command: a, args: *args}\n" +
		strings.Repeat("  - *s\n", 999)
	errs := parseErrors(t, src)
	assertReported(t, errs, []want{{0, "the file expands to more than 200000 values through aliases"}})
}

func TestJSONSchema(t *testing.T) {
	out, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(out, &schema); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("\n  \"")) {
		t.Error("schema is not indented")
	}
	if schema["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", schema["$schema"])
	}
	if !slices.Equal(toStrings(schema["required"]), []string{"servers"}) {
		t.Errorf("required = %v, want [servers]", schema["required"])
	}
	defs, _ := schema["$defs"].(map[string]any)
	objects := map[string]map[string]any{"Config": schema}
	for name, def := range defs {
		objects[name], _ = def.(map[string]any)
	}
	for name, typ := range map[string]any{"Config": Config{}, "Gateway": Gateway{}, "Server": Server{}, "Tools": Tools{}, "ToolOverride": ToolOverride{}} {
		obj := objects[name]
		if obj == nil {
			t.Errorf("no schema for %s", name)
			continue
		}
		if obj["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties = %v, want false", name, obj["additionalProperties"])
		}
		props, _ := obj["properties"].(map[string]any)
		var keys []string
		for k := range props {
			keys = append(keys, k)
		}
		wantKeys := slices.Clone(yamlFields(reflect.TypeOf(typ)).names)
		slices.Sort(keys)
		slices.Sort(wantKeys)
		if !slices.Equal(keys, wantKeys) {
			t.Errorf("%s: schema properties %v, want the yaml keys %v", name, keys, wantKeys)
		}
	}
	server := objects["Server"]
	if oneOf, _ := server["oneOf"].([]any); len(oneOf) != 2 {
		t.Errorf("Server.oneOf = %v, want command xor url", server["oneOf"])
	}
	serverProps, _ := server["properties"].(map[string]any)
	contract, _ := serverProps["contract"].(map[string]any)
	if !slices.Equal(toStrings(contract["enum"]), []string{ContractEnvelope, ContractPassthrough}) {
		t.Errorf("contract enum = %v", contract["enum"])
	}

	// The schema's name pattern must agree with the loader.
	name, _ := serverProps["name"].(map[string]any)
	pattern, _ := name["pattern"].(string)
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("name pattern %q: %v", pattern, err)
	}
	for _, n := range []string{"arm", "arm-2", "arm_left", "a_", "a-_b", "9", "a__b", "_a", "-a", "a b", "", "a___", "a-__-b"} {
		_, err := Parse("robot.yaml", []byte("servers: [{name: \""+n+"\", command: x}]\n"))
		if re.MatchString(n) != (err == nil) {
			t.Errorf("name %q: schema pattern says %v, loader says %v", n, re.MatchString(n), err)
		}
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"servers: [{name: arm, command: arm}]\n",
		"gateway: {listen: \"\"}\nservers:\n  - name: arm\n    command: ./bin/sim\n    timeout_argument_margin_sec: 0\n",
		"servers:\n  - &b {name: a, command: a}\n  - <<: *b\n    name: b\n",
		"servers:\n  - name: a\n    url: http://127.0.0.1:9000/mcp\n    headers_env: {Authorization: TOKEN}\n",
		"servers:\n  - name: a\n    command: a\n    tools: {include: [\"[\"], overrides: {x: {evaluated: true}}}\n",
		"a: &a [*a]\n",
		"servers: &s [*s]\n",
		"servers:\n  - &m {<<: *m}\n",
		"gateway: {name: a, name: b}\npolicies: {}\n",
		"servers:\n\t- x\n",
		"---\n---\n",
		"servers: [{name: a, command: a, call_timeout_sec: .nan, queue_size: -1}]\n",
	} {
		f.Add([]byte(seed))
	}
	example, err := os.ReadFile(filepath.Join("testdata", "robot.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("robot.yaml", data)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v; want exactly one", cfg != nil, err != nil)
		}
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(errs.List) == 0 {
				t.Fatalf("error %T %v is not a non-empty *Errors", err, err)
			}
			lines := countLines(data) + 1
			for _, e := range errs.List {
				if e.Line < 0 || e.Line > lines || e.File != "robot.yaml" || e.Msg == "" {
					t.Fatalf("bad problem %+v in a file of %d lines", e, lines)
				}
			}
			return
		}
		// What Parse accepts, the strict yaml.v3 decoder accepts too.
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		var strict Config
		if err := dec.Decode(&strict); err != nil && !strings.Contains(err.Error(), "excessive aliasing") {
			t.Fatalf("Parse accepted what KnownFields(true) refuses: %v", err)
		}
		names := map[string]bool{}
		for _, s := range cfg.Servers {
			if names[s.Name] || s.Name == "" || (s.Command == "") == (s.URL == "") {
				t.Fatalf("invalid server accepted: %+v", s)
			}
			names[s.Name] = true
			if !(s.CallTimeoutSec > 0) || !(s.StartupTimeoutSec > 0) || !(s.RestartBackoffMaxSec > 0) ||
				!(s.TimeoutArgumentMarginSec >= 0) || s.QueueSize < 1 || len(s.Tools.Include) == 0 {
				t.Fatalf("server settings out of range: %+v", s)
			}
		}
	})
}

func TestGuardSettingsAreKeptForTheGuard(t *testing.T) {
	cfg, err := Parse("g.yaml", []byte(`servers: [{name: arm, command: arm}]
guardrails:
  tool_result:
    - id: secrets
      use: secrets.scan
      action: redact
      kinds: [aws_access_key]
      replacement: "[KEY]"
`))
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Guardrails.ToolResult[0]
	if g.ID != "secrets" || g.Action != "redact" || g.Settings == nil || g.Line != 4 || g.File != "g.yaml" {
		t.Fatalf("guard = %+v", g)
	}
	var settings struct {
		Kinds       []string
		Replacement string
	}
	if err := g.Settings.Decode(&settings); err != nil || settings.Replacement != "[KEY]" || len(settings.Kinds) != 1 {
		t.Fatalf("settings = %+v, %v", settings, err)
	}
}

// TestUnknownKeyMessageOfASectionWithoutANoun checks the unknown-key message of a section whose
// type has no noun (guardrails): one space before the hint, none doubled.
func TestUnknownKeyMessageOfASectionWithoutANoun(t *testing.T) {
	_, err := Parse("cell.yaml", []byte("servers:\n  - name: robot\n    command: robot\nguardrails:\n  outptu: []\n"))
	if err == nil || !strings.Contains(err.Error(), `guardrails: unknown key "outptu" (did you mean "output"?)`) || strings.Contains(err.Error(), "  ") {
		t.Fatalf("err = %v", err)
	}
}
