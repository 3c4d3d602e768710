package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/internal/envname"
	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
)

var (
	serverNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// headerNameRE is an HTTP field name (RFC 9110 token).
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// check validates what decoding cannot (names, keys that exclude each other, enumerations,
// ranges, globs), fills in the defaults of absent keys and resolves relative paths. It runs on a
// partly decoded cfg too, so one Parse reports every problem; a value that failed to decode was
// reported then and is skipped here.
func (d *decoder) check(cfg *Config) {
	top := d.src[cfg]
	if top == nil {
		return
	}
	dir, err := filepath.Abs(filepath.Dir(cfg.Path))
	if err != nil {
		d.errorf(0, location{}, "cannot resolve the directory of the file: %v", err)
		return
	}
	d.checkGateway(&cfg.Gateway, dir)
	d.checkTLS(&cfg.Gateway, dir)

	switch {
	case !top.has("servers"):
		d.errorf(0, location{}, "servers is missing; list the upstream MCP servers the gateway fronts")
	case top.valid("servers") && len(cfg.Servers) == 0:
		d.errorf(top.lineOf("servers"), location{}, "servers is empty; list at least one upstream MCP server")
	}
	d.checkAudit(&cfg.Audit)
	d.checkPolicies(cfg, dir)
	d.checkApprovals(&cfg.Approvals)
	d.checkGuardrails(cfg)
	d.checkAuth(cfg)
	d.checkLLM(cfg)
	d.checkTelemetry(&cfg.Telemetry)
	d.checkLimits(cfg)
	seen := map[string]int{} // server name -> index of its first server
	for i := range cfg.Servers {
		d.checkServer(cfg, i, dir, seen)
	}
	d.checkEnv(cfg) // after every section: the secret variables come from all of them
}

func (d *decoder) checkGateway(g *Gateway, dir string) {
	src := d.src[g]
	if src == nil {
		src = &source{}
	}
	loc := location{path: "gateway"}

	switch {
	case !src.has("name"):
		g.Name = DefaultName
	case src.valid("name") && strings.TrimSpace(g.Name) == "":
		d.errorf(src.valueLine("name"), loc.field("name"), "is empty; remove it to announce %q", DefaultName)
	}

	switch {
	case !src.has("listen"):
		g.Listen = DefaultListen
	case src.valid("listen") && g.Listen != "":
		if msg := checkListen(g.Listen); msg != "" {
			d.errorf(src.valueLine("listen"), loc.field("listen"), "%q %s; write \"\" for no HTTP endpoint", truncate(g.Listen), msg)
		}
	}

	switch {
	case !src.has("state_dir"):
		g.StateDir = DefaultStateDir
	case src.valid("state_dir") && g.StateDir == "":
		d.errorf(src.valueLine("state_dir"), loc.field("state_dir"), "is empty; remove it to use %q beside the file", DefaultStateDir)
	}
	g.StateDir = resolve(dir, g.StateDir)

	d.enum(src, loc, "tool_names", &g.ToolNames, ToolNamesPrefixed, ToolNamesPrefixed, ToolNamesBare)
	d.enum(src, loc, "http_mode", &g.HTTPMode, HTTPModeAuto, HTTPModeAuto, HTTPModeStateful, HTTPModeStateless)
	d.enum(src, loc, "lockout_scope", &g.LockoutScope, LockoutGlobal, LockoutGlobal, LockoutServer)
	d.enum(src, loc, "log_format", &g.LogFormat, LogFormatText, LogFormatText, LogFormatJSON)
	d.enum(src, loc, "log_level", &g.LogLevel, LogLevelInfo, LogLevelDebug, LogLevelInfo, LogLevelWarn, LogLevelError)

	switch {
	case !src.has("shutdown_grace"):
		g.ShutdownGrace = Duration(DefaultShutdownGrace)
	case src.valid("shutdown_grace") && g.ShutdownGrace < 0:
		d.errorf(src.valueLine("shutdown_grace"), loc.field("shutdown_grace"), "must not be negative; write 0s to cancel calls in flight at once")
	}

	switch {
	case !src.has("body_read_timeout"):
		g.BodyReadTimeout = Duration(DefaultBodyReadTimeout)
	case src.valid("body_read_timeout") && g.BodyReadTimeout <= 0:
		d.errorf(src.valueLine("body_read_timeout"), loc.field("body_read_timeout"),
			"must be positive, such as 10s: every request body must arrive within a bound; remove it for the default %s", DefaultBodyReadTimeout)
	}

	switch {
	case !src.has("max_sessions"):
		g.MaxSessions = DefaultMaxSessions
	case src.valid("max_sessions") && g.MaxSessions < 1:
		d.errorf(src.valueLine("max_sessions"), loc.field("max_sessions"), "must be at least 1, got %d", g.MaxSessions)
	}
	switch {
	case !src.has("session_idle_timeout"):
		g.SessionIdleTimeout = Duration(DefaultSessionIdleTimeout)
	case src.valid("session_idle_timeout") && g.SessionIdleTimeout < Duration(time.Second):
		d.errorf(src.valueLine("session_idle_timeout"), loc.field("session_idle_timeout"),
			"must be at least 1s, such as 5m: idle sessions must end, or they are held forever")
	}

	switch {
	case !src.has("max_connections"):
		g.MaxConnections = DefaultMaxConnections
	case src.valid("max_connections") && g.MaxConnections < minConnections:
		d.errorf(src.valueLine("max_connections"), loc.field("max_connections"),
			"must be at least %d, got %d: one MCP session alone can hold two (a call and its stream), and /metrics and /admin need theirs", minConnections, g.MaxConnections)
	}
}

func (d *decoder) checkAudit(a *Audit) {
	src := d.src[a]
	if src == nil {
		src = &source{}
	}
	loc := location{path: "audit"}
	switch {
	case !src.has("commit_timeout"):
		a.CommitTimeout = Duration(DefaultCommitTimeout)
	case src.valid("commit_timeout") && (a.CommitTimeout < Duration(100*time.Millisecond) || a.CommitTimeout > Duration(time.Minute)):
		d.errorf(src.valueLine("commit_timeout"), loc.field("commit_timeout"), "must be from 100ms to 1m, got %s; a caller is held this long when the disk does not answer", time.Duration(a.CommitTimeout))
	}
	switch {
	case !src.has("min_free_bytes"):
		a.MinFreeBytes = DefaultMinFreeBytes
	case src.valid("min_free_bytes") && a.MinFreeBytes < 0:
		d.errorf(src.valueLine("min_free_bytes"), loc.field("min_free_bytes"), "must not be negative; write 0 to turn the free-space check off")
	}
	d.checkAuditBounds(a, src)
	if !src.given("redact_keys") {
		a.RedactKeys = append([]string(nil), DefaultRedactKeys...)
		return
	}
	keys := d.src[&a.RedactKeys]
	for i, k := range a.RedactKeys {
		if strings.TrimSpace(k) == "" && keys.itemOK(i) {
			d.errorf(keys.itemLine(i, 0), location{path: "audit.redact_keys"}.index(i, ""), "is empty; it would redact every argument")
		}
	}
}

// minConnections is the smallest gateway.max_connections.
const minConnections = 4

// checkListen returns what is wrong with a listen address, or "".
func checkListen(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "is not host:port (like 127.0.0.1:8080)"
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "has no port number from 0 to 65535"
	}
	return ""
}

func (d *decoder) checkServer(cfg *Config, i int, dir string, seen map[string]int) {
	s := &cfg.Servers[i]
	src := d.src[s]
	if src == nil {
		return // not a mapping, reported when decoding
	}
	s.Line = src.line
	loc := location{path: "servers"}.index(i, truncate(s.Name))

	switch {
	case !src.has("name"):
		d.errorf(src.line, loc, "name is missing; every server needs a unique name")
	case !src.valid("name"):
	case s.Name == "":
		d.errorf(src.valueLine("name"), loc, "name is empty; every server needs a unique name")
	case !serverNameRE.MatchString(s.Name):
		d.errorf(src.valueLine("name"), loc, "name %q is not valid: use letters, digits, - and _, starting with a letter or digit", truncate(s.Name))
	case strings.Contains(s.Name, PrefixSeparator):
		d.errorf(src.valueLine("name"), loc, "name %q must not contain %q, which separates server and tool in public tool names", s.Name, PrefixSeparator)
	default:
		if first, dup := seen[s.Name]; dup {
			d.errorf(src.valueLine("name"), loc, "duplicate server name %q; servers[%d] at line %d has it too",
				s.Name, first, cfg.Servers[first].Line)
		} else {
			seen[s.Name] = i
		}
	}

	hasCommand, hasURL := src.has("command"), src.has("url")
	switch {
	case !hasCommand && !hasURL:
		d.errorf(src.line, loc, "needs command (a stdio server the gateway launches) or url (a streamable HTTP server)")
	case hasCommand && hasURL:
		d.errorf(src.lineOf("url"), loc, "has both command (line %d) and url; a server is either a stdio command or an HTTP url",
			src.lineOf("command"))
	case hasCommand:
		d.checkCommand(s, src, loc, dir)
	case hasURL:
		if src.valid("url") {
			if msg := checkURL(s.URL); msg != "" {
				d.errorf(src.valueLine("url"), loc.field("url"), "%s", msg)
			}
		}
		for _, key := range []string{"args", "cwd", "env"} {
			if src.has(key) {
				d.errorf(src.lineOf(key), loc, "%s is only for a command (stdio) server; this server is reached at its url", key)
			}
		}
		d.checkHeaders(s, loc)
	}
	d.checkUpstreamOAuth(s, src, loc)

	d.positive(src, loc, "call_timeout_sec", &s.CallTimeoutSec, DefaultCallTimeoutSec)
	d.positive(src, loc, "startup_timeout_sec", &s.StartupTimeoutSec, DefaultStartupTimeoutSec)
	d.positive(src, loc, "restart_backoff_max_sec", &s.RestartBackoffMaxSec, DefaultRestartBackoffMaxSec)
	switch v := s.TimeoutArgumentMarginSec; {
	case !src.has("timeout_argument_margin_sec"):
		s.TimeoutArgumentMarginSec = DefaultTimeoutMarginSec
	case src.valid("timeout_argument_margin_sec") && (!(v >= 0) || math.IsInf(v, 1)):
		d.errorf(src.valueLine("timeout_argument_margin_sec"), loc.field("timeout_argument_margin_sec"),
			"must be 0 or more seconds, got %s", formatNumber(v))
	}
	switch {
	case !src.has("queue_size"):
		s.QueueSize = DefaultQueueSize
	case src.valid("queue_size") && s.QueueSize < 1:
		d.errorf(src.valueLine("queue_size"), loc.field("queue_size"), "must be at least 1, got %d", s.QueueSize)
	}
	switch {
	case !src.has("max_result_bytes"):
		s.MaxResultBytes = DefaultMaxResultBytes
	case src.valid("max_result_bytes") && s.MaxResultBytes < MinResultBytes:
		d.errorf(src.valueLine("max_result_bytes"), loc.field("max_result_bytes"),
			"must be at least %d bytes, got %d; an MCP initialize result alone takes several hundred", MinResultBytes, s.MaxResultBytes)
	}
	d.enum(src, loc, "contract", &s.Contract, ContractEnvelope, ContractEnvelope, ContractPassthrough)
	d.enum(src, loc, "protocol_version", &s.ProtocolVersion, "", mcp.SupportedProtocolVersions()...)
	d.checkTools(s, loc)
}

// checkCommand checks a stdio server's launch settings and resolves its relative paths against
// dir, the directory of the file, so the server starts the same wherever the gateway is run from.
func (d *decoder) checkCommand(s *Server, src *source, loc location, dir string) {
	if src.valid("command") {
		s.CommandLine = src.valueLine("command")
		if strings.TrimSpace(s.Command) == "" {
			d.errorf(src.valueLine("command"), loc.field("command"), "is empty; name the executable of the server")
		} else if strings.ContainsRune(s.Command, '/') || strings.ContainsRune(s.Command, filepath.Separator) {
			// A bare name like node stays for the PATH lookup at launch.
			s.Command = resolve(dir, s.Command)
		}
	}
	if src.valid("cwd") {
		if s.Cwd == "" {
			d.errorf(src.valueLine("cwd"), loc.field("cwd"), "is empty; remove it to run the server in the gateway's working directory")
		} else {
			s.Cwd = resolve(dir, s.Cwd)
		}
	}
	if src.has("headers_env") {
		d.errorf(src.lineOf("headers_env"), loc, "headers_env is only for a url (HTTP) server; this server runs a command")
	}
	if env := d.src[&s.Env]; env != nil {
		for name, e := range env.keys {
			switch {
			case name == "":
				d.errorf(e.line, loc.field("env"), "an environment variable needs a name")
			case strings.ContainsAny(name, "=\x00"):
				d.errorf(e.line, loc.field("env"), "%q is not an environment variable name: it holds = or NUL", truncate(name))
			}
		}
	}
}

// checkHeaders checks that headers_env maps HTTP header names to environment variable names.
func (d *decoder) checkHeaders(s *Server, loc location) {
	d.checkHeadersEnv(s.HeadersEnv, d.src[&s.HeadersEnv], loc.field("headers_env"))
}

// checkHeadersEnv checks a headers_env mapping m, written as src, at loc.
func (d *decoder) checkHeadersEnv(m map[string]string, headers *source, loc location) {
	if headers == nil {
		return
	}
	for name, e := range headers.keys {
		if !headerNameRE.MatchString(name) {
			d.errorf(e.line, loc, "%q is not an HTTP header name", truncate(name))
		}
		if v := m[name]; e.ok && !envname.Valid(v) {
			// The value is not repeated: it may be the secret itself, written here by mistake.
			d.errorf(e.value.Line, loc.field(name), "must name the environment variable holding the header's value (letters, digits and _, not starting with a digit, and not shaped like a key), never the value itself")
		}
	}
}

// unwrapURLError is err without the url.Error around it, which repeats the URL.
func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// checkURL returns what is wrong with a server url, or "". It never repeats the url, which
// might carry a password.
func checkURL(raw string) string {
	_, problem := webURL(raw, "must start with http:// or https://",
		"must not carry credentials; name the environment variable holding them in headers_env")
	return problem
}

// webURL parses raw as an http:// or https:// URL with a host and no credentials, or says what
// is wrong with it: badScheme and withCredentials are the caller's words for those two, the
// rest is common. No problem repeats raw, which might carry a password. The caller checks what
// else its kind of URL needs (https only, no query).
func webURL(raw, badScheme, withCredentials string) (*url.URL, string) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Sprintf("is not a valid URL: %v", unwrapURLError(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, badScheme
	case u.Host == "":
		return nil, "has no host"
	case u.User != nil:
		return nil, withCredentials
	}
	return u, ""
}

func (d *decoder) checkTools(s *Server, loc location) {
	t := d.src[&s.Tools]
	if t == nil {
		t = &source{}
	}
	loc = loc.field("tools")

	if !t.given("include") {
		s.Tools.Include = []string{"*"}
	} else if t.valid("include") && len(s.Tools.Include) == 0 {
		d.errorf(t.lineOf("include"), loc.field("include"), "is empty, which lists no tool; remove it to list every tool")
	}
	d.globs(s.Tools.Include, d.src[&s.Tools.Include], loc.field("include"))
	d.globs(s.Tools.Exclude, d.src[&s.Tools.Exclude], loc.field("exclude"))

	d.enum(t, loc, "on_invalid_schema", &s.Tools.OnInvalidSchema, OnInvalidSchemaExclude, OnInvalidSchemaExclude, OnInvalidSchemaUnvalidated)

	hidden := d.src[&s.Tools.Hidden]
	for i, name := range s.Tools.Hidden {
		if name == "" && hidden.itemOK(i) {
			d.errorf(hidden.itemLine(i, 0), loc.field("hidden").index(i, ""), "is empty; name an upstream tool")
		}
	}
	if overrides := d.src[&s.Tools.Overrides]; overrides != nil {
		if e, ok := overrides.keys[""]; ok {
			d.errorf(e.line, loc.field("overrides"), "an override needs the name of an upstream tool as its key")
		}
		for name, o := range s.Tools.Overrides {
			o.Line = overrides.keys[name].line
			s.Tools.Overrides[name] = o
		}
		d.checkStopTools(s, overrides, loc.field("overrides"))
	}
}

// checkStopTools checks the overrides that mark a stop tool. A stop tool is the action that
// stops the robot, called by models, clients and mcp-gateway halt while the server is locked
// out: so only a physical server has one, at most one, and it must be served (neither hidden
// nor filtered out). allow_while_locked on a server that is not physical is left alone: such a
// server is never locked out, so it changes nothing.
func (d *decoder) checkStopTools(s *Server, overrides *source, loc location) {
	names := make([]string, 0, len(s.Tools.Overrides))
	for name := range s.Tools.Overrides {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return s.Tools.Overrides[a].Line - s.Tools.Overrides[b].Line })
	first := ""
	for _, name := range names {
		o := s.Tools.Overrides[name]
		if !o.Stop || name == "" {
			continue
		}
		at := d.keyLine(overrides.keys[name].value, "stop", o.Line)
		where := loc.field(name).field("stop")
		if !s.Physical {
			d.errorf(at, where, "only a physical server (physical: true) has a stop tool: it is the action that stops the robot while the server is locked out or halted; remove it, or mark the server physical")
			continue
		}
		if o.AllowWhileLocked {
			d.errorf(d.keyLine(overrides.keys[name].value, "allow_while_locked", o.Line), loc.field(name).field("allow_while_locked"),
				"cannot be set on the stop tool, which is always callable, also during a lockout; remove allow_while_locked")
		}
		if why := unservedBy(&s.Tools, name, d.src[&s.Tools.Hidden], d.src[&s.Tools.Include], d.src[&s.Tools.Exclude]); why != "" {
			d.errorf(at, where, "the stop tool must reach the robot from a model or an MCP client too, but %s", why)
		}
		if first != "" {
			d.errorf(at, where, "a server has one stop tool, and tools.overrides.%s (line %d) is already this server's; remove one of them", first, s.Tools.Overrides[first].Line)
			continue
		}
		first = name
	}
}

// unservedBy says which filter keeps tool name from models and clients ("" when none does):
// tools.hidden, or include and exclude. hidden, include and exclude are where those lists were
// written (nil when they were not).
func unservedBy(t *Tools, name string, hidden, include, exclude *source) string {
	for i, p := range t.Hidden {
		if ok, _ := path.Match(p, name); ok {
			return fmt.Sprintf("tools.hidden[%d] (line %d) hides it", i, hidden.itemLine(i, 0))
		}
	}
	for i, p := range t.Exclude {
		if ok, _ := path.Match(p, name); ok {
			return fmt.Sprintf("tools.exclude[%d] (line %d) leaves it out", i, exclude.itemLine(i, 0))
		}
	}
	for _, p := range t.Include {
		if ok, _ := path.Match(p, name); ok {
			return ""
		}
	}
	line := 0
	if include != nil {
		line = include.line
	}
	return fmt.Sprintf("no pattern of tools.include (line %d) lists it", line)
}

// keyLine is the line of key in the mapping n as written (an override), or fallback when it is
// not written there (it came through a << merge).
func (d *decoder) keyLine(n *yaml.Node, key string, fallback int) int {
	n = d.resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return fallback
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := d.resolve(n.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return k.Line
		}
	}
	return fallback
}

// globs checks include or exclude patterns, which use path.Match syntax.
func (d *decoder) globs(patterns []string, src *source, loc location) {
	for i, p := range patterns {
		if !src.itemOK(i) {
			continue
		}
		at := src.itemLine(i, 0)
		if p == "" {
			d.errorf(at, loc.index(i, ""), "is empty; it matches no tool")
		} else if _, err := path.Match(p, ""); err != nil {
			d.errorf(at, loc.index(i, ""), "%q is not a valid glob: %v (use *, ?, [a-z] and \\ to escape)", truncate(p), err)
		}
	}
}

// positive applies the default of an absent duration or checks a given one.
func (d *decoder) positive(src *source, loc location, key string, v *float64, def float64) {
	switch {
	case !src.has(key):
		*v = def
	case src.valid(key) && (!(*v > 0) || math.IsInf(*v, 1)):
		d.errorf(src.valueLine(key), loc.field(key), "must be a number of seconds above 0, got %s", formatNumber(*v))
	}
}

// enum applies the default of an absent setting or checks a given one against its values.
func (d *decoder) enum(src *source, loc location, key string, v *string, def string, allowed ...string) {
	switch {
	case !src.has(key):
		*v = def
	case src.valid(key) && !slices.Contains(allowed, *v):
		hint := ""
		if c := suggest.Closest(*v, allowed); c != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", c)
		}
		d.errorf(src.valueLine(key), loc.field(key), "%q is not valid%s; use one of: %s", truncate(*v), hint, strings.Join(allowed, ", "))
	}
}

// resolve makes a relative path absolute against dir.
func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

func formatNumber(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}
