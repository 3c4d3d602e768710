package main

import (
	"os"
	"strings"
	"text/template"
)

// gatewayConfig is one gateway's configuration: the echo server over stdio behind it
// (passthrough contract, so its schema validation is the automatic one), and with Full the whole
// governance of issue 17: 10 CEL rules and all six guards on arguments and on results (the audit
// is always on). The session and connection caps are raised above their defaults (256 and 512)
// so that the 1000-session run fits; the CEL rule r4 caps the message at 2,000,000 bytes instead
// of 100,000 so that the 1 MB run is allowed (it is still evaluated on every call).
type gatewayConfig struct {
	Name, Listen, StateDir, Echo string
	MaxSessions, MaxConnections  int
	Full                         bool
	// TokenEnv, when set, turns the profiler on behind the admin token read from that variable
	// (adminTokenEnv; the critical-path run's trace).
	TokenEnv string
	// Revision is the MCP revision the gateway asks the echo server for (servers[].protocol_version);
	// empty for the gateway's default, the newest it speaks.
	Revision string
}

// adminTokenEnv is the variable the gateway of the critical-path run reads its admin token from.
const adminTokenEnv = "BENCHPEERS_ADMIN_TOKEN"

var gatewayTemplate = template.Must(template.New("gateway").Funcs(template.FuncMap{"q": quote}).Parse(`gateway:
  name: {{q .Name}}
  listen: {{q .Listen}}
  state_dir: {{q .StateDir}}
  tool_names: prefixed
  max_sessions: {{.MaxSessions}}
  max_connections: {{.MaxConnections}}
{{- with .TokenEnv}}
  pprof: true
  admin_token_env: {{q .}}
{{- end}}
servers:
  - name: echo
    command: {{q .Echo}}
    contract: passthrough
{{- with .Revision}}
    protocol_version: {{q .}}
{{- end}}
{{- if .Full}}
policies:
  default: deny
  rules:
    - {id: r1, effect: allow, when: 'server == "echo"'}
    - {id: r2, effect: deny, when: 'tool == "echo__nothing"'}
    - {id: r3, effect: deny, when: '"banned" in principal.roles'}
    - {id: r4, effect: deny, when: 'has(args.message) && size(args.message) > 2000000'}
    - {id: r5, effect: require_approval, when: 'has(args.message) && args.message == "approve-me"'}
    - {id: r6, effect: deny, when: 'has(args.target) && args.target == "outside"'}
    - {id: r7, effect: allow, when: 'tool.startsWith("echo__")'}
    - {id: r8, effect: deny, when: 'has(args.speed) && args.speed > 2.0'}
    - {id: r9, effect: deny, when: 'tool_meta.physical && "planner" in principal.roles'}
    - {id: r10, effect: deny, when: 'has(args.message) && args.message.contains("rm -rf /")'}
guardrails:
  tool_call:
    - {id: a1, use: secrets.scan}
    - {id: a2, use: pii.regex}
    - {id: a3, use: injection.heuristic}
    - {id: a4, use: regex.deny, patterns: ['rm\s+-rf']}
    - {id: a5, use: size.limit, max_bytes: 2097152}
    - {id: a6, use: topic.deny, topics: {weapons: [weapon, firearm]}}
  tool_result:
    - {id: b1, use: secrets.scan, action: redact}
    - {id: b2, use: pii.regex}
    - {id: b3, use: injection.heuristic}
    - {id: b4, use: regex.deny, patterns: ['rm\s+-rf']}
    - {id: b5, use: size.limit, max_bytes: 2097152}
    - {id: b6, use: topic.deny, topics: {weapons: [weapon, firearm]}}
{{- end}}
`))

// tbxarkConfig is TBXark's mcp-proxy configuration: the same echo server over stdio, served
// over streamable HTTP at /echo/mcp.
type tbxarkConfig struct {
	Addr, Echo string
}

var tbxarkTemplate = template.Must(template.New("tbxark").Funcs(template.FuncMap{"q": quote}).Parse(`{
  "mcpProxy": {
    "baseURL": {{q (print "http://" .Addr)}},
    "addr": {{q .Addr}},
    "name": "p",
    "version": "1",
    "type": "streamable-http",
    "options": {"logEnabled": false}
  },
  "mcpServers": {
    "echo": {"command": {{q .Echo}}}
  }
}
`))

// quote makes a double-quoted string that YAML and JSON both read back as s.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func writeTemplate(path string, t *template.Template, data any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Execute(f, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
