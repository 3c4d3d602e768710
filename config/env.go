package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/invopop/jsonschema"
	"go.yaml.in/yaml/v3"
)

// EnvInherit is a stdio server's env_inherit: which variables of the gateway's own environment
// its child gets beside the small base every child gets (PATH, HOME, LANG…; package upstream)
// and the server's env. It is written as a list of names, where a name ending in * stands for
// every variable it begins (ROS_*), or as the word all: the whole environment, as before
// env_inherit existed. Either way the child never gets a variable the gateway reads a secret
// from (Secret), and the server's env is set over all of it.
type EnvInherit struct {
	// All is env_inherit: all.
	All bool
	// Names are the names and prefixes listed, as written.
	Names []string
	// Secret are the variables the gateway reads secrets from under the configuration this
	// server was loaded with (SecretEnv): the child gets none of them from the gateway's
	// environment. Parse fills it in for every server; a Server built in code has none.
	Secret []string
	// Line is the line of env_inherit's value in the file; 0 when it was not given.
	Line int
}

// EnvInheritAll is the value of env_inherit that passes the whole environment.
const EnvInheritAll = "all"

// Inherits reports whether a child of the server gets the gateway's variable name: all is set,
// or name is listed, or it begins with a listed prefix. The secret variables and the base are
// not its business (package upstream applies them).
func (e *EnvInherit) Inherits(name string) bool {
	if e.All {
		return true
	}
	for _, n := range e.Names {
		if prefix, ok := strings.CutSuffix(n, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if n == name {
			return true
		}
	}
	return false
}

// IsSecret reports whether name is one of the variables the gateway reads secrets from.
func (e *EnvInherit) IsSecret(name string) bool {
	_, found := slices.BinarySearch(e.Secret, name)
	return found
}

// IsZero reports whether env_inherit says nothing: no list and not all. Secret and Line do not
// count, so that the effective configuration leaves out an env_inherit never written.
func (e EnvInherit) IsZero() bool { return !e.All && e.Names == nil }

// MarshalJSON writes env_inherit as it is written in the file: "all" or the list.
func (e EnvInherit) MarshalJSON() ([]byte, error) {
	if e.All {
		return json.Marshal(EnvInheritAll)
	}
	if e.Names == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(e.Names)
}

// JSONSchema describes env_inherit in the configuration's schema: all, or a list of names.
func (EnvInherit) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", Enum: []any{EnvInheritAll}},
		{Type: "array", Items: &jsonschema.Schema{Type: "string", Pattern: envInheritPattern}},
	}}
}

// envInheritPattern is one name of an env_inherit list: a variable name, or the beginning of
// one followed by *.
const envInheritPattern = `^[A-Za-z_][A-Za-z0-9_]*\*?$`

// decodeNode reads env_inherit: the word all or a list of strings. A null is the same as no
// env_inherit.
func (e *EnvInherit) decodeNode(d *decoder, n *yaml.Node, loc location) bool {
	switch {
	case isNull(n):
		return true
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == EnvInheritAll:
		e.All, e.Line = true, n.Line
		return true
	case n.Kind == yaml.SequenceNode:
		e.Line = n.Line
		ok := d.value(n, reflect.ValueOf(&e.Names).Elem(), loc)
		if e.Names == nil {
			e.Names = []string{} // written, if empty: the base only
		}
		return ok
	case n.Kind == yaml.ScalarNode && envNameRE.MatchString(strings.TrimSuffix(n.Value, "*")):
		d.errorf(n.Line, loc, "expected a list of variable names or all, got one name; write [%s]", n.Value)
	default:
		d.errorf(n.Line, loc, "expected a list of environment variable names such as [ROS_DOMAIN_ID, \"ROS_*\"], or all, got %s", describe(n))
	}
	return false
}

// A SecretVar is a variable of the gateway's environment that holds a secret the gateway (or one
// of its commands) reads: a child never inherits it.
type SecretVar struct {
	// Name is the variable's name.
	Name string
	// Setting says what reads it, such as auth.tokens[0].token_env.
	Setting string
	// Line is the line of the setting in the file; 0 when the variable is read without one.
	Line int
}

// fixedSecretVars are read for secrets whatever the file says: by the OTLP exporters of the
// telemetry (request headers, which is where a hosted backend's key goes) and by the commands
// of mcp-gateway that talk to a gateway (mcp-gateway connect's token and the admin CLI's).
var fixedSecretVars = []SecretVar{
	{Name: "MCP_GATEWAY_ADMIN_TOKEN", Setting: "the admin token of mcp-gateway's commands"},
	{Name: "MCP_GATEWAY_TOKEN", Setting: "the bearer token of mcp-gateway connect"},
	{Name: "OTEL_EXPORTER_OTLP_HEADERS", Setting: "the OTLP exporters' request headers"},
	{Name: "OTEL_EXPORTER_OTLP_LOGS_HEADERS", Setting: "the OTLP log exporter's request headers"},
	{Name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", Setting: "the OTLP trace exporter's request headers"},
}

// providerKeyEnv is the variable each model provider's API key is read from when llm.api_key_env
// does not name another: agent/model's defaults, which a test of this package compares with.
var providerKeyEnv = map[string]string{
	"anthropic":        "ANTHROPIC_API_KEY",
	"openai":           "OPENAI_API_KEY",
	"openai.responses": "OPENAI_API_KEY",
	"openrouter":       "OPENROUTER_API_KEY",
	"mimo":             "MIMO_API_KEY",
	"qwen":             "DASHSCOPE_API_KEY",
	"deepseek":         "DEEPSEEK_API_KEY",
}

// SecretEnv lists the variables that hold the secrets cfg makes the gateway read, in this
// order: gateway.admin_token_env, every auth.tokens[].token_env, every headers_env value
// (of the telemetry, the approval webhook and the servers, each server's with its
// oauth.client_secret_env, then the model's), the model's API key (llm.api_key_env,
// or the default variable of llm.provider), then the variables read without a setting
// (fixedSecretVars). A name may come more than once, from several settings.
func SecretEnv(cfg *Config) []SecretVar {
	return newDecoder(cfg.Path).secretEnv(cfg)
}

// secretEnv is SecretEnv, with the lines of the settings when d decoded cfg.
func (d *decoder) secretEnv(cfg *Config) []SecretVar {
	var out []SecretVar
	add := func(name, setting string, line int) {
		if name != "" {
			out = append(out, SecretVar{Name: name, Setting: setting, Line: line})
		}
	}
	lineOf := func(v any, key string) int {
		if src := d.src[v]; src != nil {
			return src.valueLine(key)
		}
		return 0
	}
	headers := func(m *map[string]string, setting string) {
		src := d.src[m] // the record of a map is kept under the address of its field
		for _, h := range slices.Sorted(maps.Keys(*m)) {
			line := 0
			if src != nil && src.keys[h].value != nil {
				line = src.keys[h].value.Line
			}
			add((*m)[h], setting+"."+h, line)
		}
	}
	add(cfg.Gateway.AdminTokenEnv, "gateway.admin_token_env", lineOf(&cfg.Gateway, "admin_token_env"))
	for i := range cfg.Auth.Tokens {
		add(cfg.Auth.Tokens[i].TokenEnv, fmt.Sprintf("auth.tokens[%d].token_env", i), lineOf(&cfg.Auth.Tokens[i], "token_env"))
	}
	headers(&cfg.Telemetry.HeadersEnv, "telemetry.headers_env")
	headers(&cfg.Approvals.Webhook.HeadersEnv, "approvals.webhook.headers_env")
	for i := range cfg.Servers {
		headers(&cfg.Servers[i].HeadersEnv, fmt.Sprintf("servers[%d].headers_env", i))
		if o := cfg.Servers[i].OAuth; o != nil {
			add(o.ClientSecretEnv, fmt.Sprintf("servers[%d].oauth.client_secret_env", i), lineOf(o, "client_secret_env"))
		}
	}
	headers(&cfg.LLM.HeadersEnv, "llm.headers_env")
	switch l := &cfg.LLM; {
	case l.APIKeyEnv != "":
		add(l.APIKeyEnv, "llm.api_key_env", lineOf(l, "api_key_env"))
	case providerKeyEnv[l.Provider] != "":
		add(providerKeyEnv[l.Provider], "the API key of llm.provider "+l.Provider, lineOf(l, "provider"))
	}
	// A new setting that names a secret's variable belongs here, and in docs/operations.md
	// ("What an upstream process sees").
	return append(out, fixedSecretVars...)
}

// checkEnv checks every server's env_inherit against the secret variables of cfg and gives each
// server the list of those variables (EnvInherit.Secret). It runs after every section was
// checked, since the secrets come from all of them.
func (d *decoder) checkEnv(cfg *Config) {
	secrets := d.secretEnv(cfg)
	names := make([]string, 0, len(secrets))
	for _, s := range secrets {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		src := d.src[s]
		if src == nil {
			continue // not a mapping, reported when decoding
		}
		s.EnvInherit.Secret = names
		loc := location{path: "servers"}.index(i, truncate(s.Name))
		if !src.has("env_inherit") {
			continue
		}
		if s.Transport() == TransportHTTP {
			d.errorf(src.lineOf("env_inherit"), loc, "env_inherit is only for a command (stdio) server; this server is reached at its url")
			continue
		}
		d.checkEnvInherit(&s.EnvInherit, secrets, loc.field("env_inherit"))
	}
}

func (d *decoder) checkEnvInherit(e *EnvInherit, secrets []SecretVar, loc location) {
	items := d.src[&e.Names]
	seen := map[string]int{} // name -> line of its first mention
	for j, name := range e.Names {
		if !items.itemOK(j) {
			continue
		}
		at, where := items.itemLine(j, e.Line), loc.index(j, "")
		prefix, glob := strings.CutSuffix(name, "*")
		switch {
		case name == "":
			d.errorf(at, where, "is empty; name an environment variable of the gateway's, such as ROS_DOMAIN_ID")
			continue
		case name == EnvInheritAll:
			d.errorf(at, where, "%q in a list names a variable called all; to pass the whole environment write env_inherit: all, without brackets", name)
			continue
		case name == "*":
			d.errorf(at, where, "a lone * would pass the whole environment; write env_inherit: all if that is meant, or name the variables")
			continue
		case strings.Contains(name, "*") && (!glob || !envNameRE.MatchString(prefix)):
			d.errorf(at, where, "%q is not a variable name or the beginning of one followed by *: only a * at the end stands for other characters (such as ROS_*)", truncate(name))
			continue
		case !glob && !envNameRE.MatchString(name):
			d.errorf(at, where, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", truncate(name))
			continue
		}
		if first, dup := seen[name]; dup {
			d.errorf(at, where, "%s is listed twice; it is already at line %d", name, first)
			continue
		}
		seen[name] = at
		if glob {
			continue // the secret variables it covers are left out, as documented
		}
		for _, s := range secrets {
			if s.Name != name {
				continue
			}
			from := s.Setting
			if s.Line > 0 {
				from = fmt.Sprintf("%s, line %d", s.Setting, s.Line)
			}
			d.errorf(at, where, "%s holds a secret the gateway reads (%s), which no child ever gets; remove it, and if the server needs a credential of its own, give it one in another variable and name that one",
				name, from)
			break
		}
	}
}

// EnvWarnings are what `mcp-gateway check` warns of in the servers' environments, one line each
// in the form "file:line: servers[i] (name): env_inherit: warning: …": a server with
// env_inherit: all.
func EnvWarnings(cfg *Config) []string {
	var out []string
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		if !s.EnvInherit.All || s.Transport() != TransportStdio {
			continue
		}
		out = append(out, fmt.Sprintf("%s:%d: servers[%d] (%s): env_inherit: warning: all passes the gateway's whole environment to the server's process (all but the %d variables the gateway reads secrets from); "+
			"list the variables it needs instead, such as [ROS_DOMAIN_ID, \"ROS_*\"]",
			cfg.Path, s.EnvInherit.Line, i, s.Name, len(s.EnvInherit.Secret)))
	}
	return out
}
