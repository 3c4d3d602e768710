package config

import "time"

// Config is one loaded configuration file.
type Config struct {
	Gateway    Gateway    `yaml:"gateway" json:"gateway,omitempty" jsonschema:"description=Settings of the gateway process itself."`
	Servers    []Server   `yaml:"servers" json:"servers" jsonschema:"minItems=1,description=The upstream MCP servers the gateway fronts."`
	Audit      Audit      `yaml:"audit" json:"audit,omitempty" jsonschema:"description=What the audit log keeps."`
	Policies   Policies   `yaml:"policies" json:"policies,omitempty" jsonschema:"description=CEL rules deciding allow / deny / require_approval for every call."`
	Guardrails Guardrails `yaml:"guardrails" json:"guardrails,omitempty" jsonschema:"description=Content guards per stage."`
	Approvals  Approvals  `yaml:"approvals" json:"approvals,omitempty" jsonschema:"description=How calls that need an operator's approval are announced and how long they wait."`
	Auth       Auth       `yaml:"auth" json:"auth,omitempty" jsonschema:"description=Bearer tokens for /mcp and /admin and the principals they stand for."`
	Console    Console    `yaml:"console" json:"console,omitempty" jsonschema:"description=The operator console served at /console."`
	Telemetry  Telemetry  `yaml:"telemetry" json:"telemetry,omitempty" jsonschema:"description=Distributed tracing over OTLP (OpenTelemetry) and the optional export of audit records as OTLP logs; off without an endpoint."`
	LLM        LLM        `yaml:"llm" json:"llm,omitempty" jsonschema:"description=The model and loop options of the built-in agent (mcp-gateway agent)."`
	// Experience maps a tool's public or upstream name to notes the agent appends to its
	// description at the start of a run.
	// Limits are rate and concurrency limits on tool calls (config/limits.go).
	Limits     []Limit           `yaml:"limits" json:"limits,omitempty" jsonschema:"description=Rate and concurrency limits on tool calls per principal\\, session\\, server\\, tool or globally."`
	Experience map[string]string `yaml:"experience" json:"experience,omitempty" jsonschema:"description=Tool name to notes appended to its description for the built-in agent (Tool Experience)."`

	// Path is the file the configuration was read from ("" when built in code).
	Path string `yaml:"-" json:"-"`
}

// Gateway holds the settings of the gateway process.
type Gateway struct {
	// Name is the server name the gateway announces to MCP clients.
	Name string `yaml:"name" json:"name,omitempty" jsonschema:"description=Name announced to MCP clients (default mcp-gateway)."`
	// Listen is the address of the streamable HTTP endpoint (/mcp, /healthz, /readyz).
	// "" disables HTTP.
	Listen string `yaml:"listen" json:"listen,omitempty" jsonschema:"description=host:port for streamable HTTP at /mcp plus /healthz and /readyz; empty disables HTTP (default 127.0.0.1:8080)."`
	// TLS serves the listener over TLS, optionally with client certificates (config/tls.go).
	TLS *TLS `yaml:"tls" json:"tls,omitempty" jsonschema:"description=Serve gateway.listen over TLS (cert_file\\, key_file) and optionally ask clients for a certificate (client_ca_file: mutual TLS). Needed on an address other than loopback."`
	// StateDir holds state.db, the gateway's durable state.
	StateDir string `yaml:"state_dir" json:"state_dir,omitempty" jsonschema:"description=Directory of the state file state.db (default .mcp-gateway)."`
	// ToolNames is "prefixed" (server__tool) or "bare" (upstream names; a collision fails loading).
	ToolNames string `yaml:"tool_names" json:"tool_names,omitempty" jsonschema:"enum=prefixed,enum=bare,description=prefixed: <server>__<tool>; bare: upstream names\\, a collision fails loading."`
	// LockoutScope is "global" (a lockout blocks every physical server) or "server".
	LockoutScope string `yaml:"lockout_scope" json:"lockout_scope,omitempty" jsonschema:"enum=global,enum=server,description=global: a lockout blocks every physical server; server: only the server that timed out."`
	// LogFormat is "text" or "json"; logs always go to stderr.
	LogFormat string `yaml:"log_format" json:"log_format,omitempty" jsonschema:"enum=text,enum=json,description=Log format on stderr (default text)."`
	// AdminTokenEnv names the environment variable holding the token of the /admin API. Without
	// it the gateway writes a fresh random token to admin.token in state_dir at every start
	// (readable only by its user), which the CLI picks up.
	AdminTokenEnv string `yaml:"admin_token_env" json:"admin_token_env,omitempty" jsonschema:"description=Environment variable holding the /admin bearer token; without it a random token is written to admin.token in state_dir at start."`
	// LogLevel is "debug", "info", "warn" or "error".
	LogLevel string `yaml:"log_level" json:"log_level,omitempty" jsonschema:"enum=debug,enum=info,enum=warn,enum=error,description=Minimum log level (default info)."`
	// AllowedOrigins are the browser origins (scheme://host[:port], port * for any) whose pages
	// may use /mcp; a request without an Origin header is not from a browser page and passes.
	AllowedOrigins []string `yaml:"allowed_origins" json:"allowed_origins,omitempty" jsonschema:"description=Browser origins allowed on /mcp such as http://localhost:6274 (port * for any); requests without Origin pass (default: localhost\\, 127.0.0.1 and [::1] on any port)."`
	// MaxBodyBytes bounds the body of one request to /mcp; a larger one gets 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes,omitempty" jsonschema:"minimum=1024,description=Largest request body accepted on /mcp in bytes; larger ones get 413 (default 4194304)."`
	// HTTPMode is how /mcp serves the protocol revisions: "auto" (the default) serves every
	// revision on one endpoint, giving a client that begins with initialize a session
	// (Mcp-Session-Id, MCP 2025-03-26 to 2025-11-25) and serving a request of MCP 2026-07-28 or
	// later on its own, without a session; "stateful" serves sessions only and refuses
	// 2026-07-28 requests; "stateless" serves every request on its own (input requests travel
	// in results).
	HTTPMode string `yaml:"http_mode" json:"http_mode,omitempty" jsonschema:"enum=auto,enum=stateful,enum=stateless,description=auto (default): every MCP revision on /mcp: initialize opens a session (2025-03-26 to 2025-11-25) and a 2026-07-28 request stands alone; stateful: sessions only; stateless: every request stands alone\\, server-to-client requests travel as input requests in results."`
	// ShutdownGrace is how long calls in flight may run on after SIGTERM or SIGINT before they
	// are cancelled (a cancelled physical call locks out).
	ShutdownGrace Duration `yaml:"shutdown_grace" json:"shutdown_grace,omitempty" jsonschema:"type=string,description=How long calls in flight may finish after SIGTERM before they are cancelled such as 30s (default 30s)."`
	// BodyReadTimeout is how long the whole body of one HTTP request may take to arrive, counted
	// from the end of its headers; a body still arriving then gets 408 and its connection is
	// closed. It bounds reading only: a call whose body arrived runs as long as its deadline.
	BodyReadTimeout Duration `yaml:"body_read_timeout" json:"body_read_timeout,omitempty" jsonschema:"type=string,description=How long the whole body of one HTTP request may take to arrive such as 10s; a slower one gets 408 and its connection is closed (default 10s). Streams and long calls are not cut."`
	// MaxConnections caps the HTTP client connections open at once. At the cap a new connection
	// takes the place of the one idle longest or silent longest (no request yet); when every
	// open connection is busy, the new one is answered 503 and closed.
	// MaxSessions caps the stateful MCP sessions over HTTP; SessionIdleTimeout closes a session
	// that has had no request in progress (a call, or a GET stream held open) for that long.
	MaxSessions        int      `yaml:"max_sessions" json:"max_sessions,omitempty" jsonschema:"minimum=1,description=Stateful MCP sessions over HTTP at once; at the cap a new initialize gets 503 (default 256)."`
	SessionIdleTimeout Duration `yaml:"session_idle_timeout" json:"session_idle_timeout,omitempty" jsonschema:"type=string,description=A session with no request in progress (no call and no open GET stream) for this long is closed such as 5m (default 5m)."`
	MaxConnections     int      `yaml:"max_connections" json:"max_connections,omitempty" jsonschema:"minimum=4,description=HTTP client connections open at once; at the cap an idle or silent one is closed to admit a new one\\, and when all are busy the new one gets 503 (default 512; lowered to fit the process's open-file limit)."`
	// Pprof serves Go's profiler at /admin/debug/pprof/, behind the admin token.
	Pprof bool `yaml:"pprof" json:"pprof,omitempty" jsonschema:"description=Serve Go's profiler at /admin/debug/pprof/ behind the admin token (default off): CPU and heap profiles of the running gateway."`
	// FastPath serves tools/call on the gateway's own decode-once path, on both sides (a
	// request of a client over HTTP, a call to a stdio server) where it applies
	// (docs/design.md, "The fast path"); false sends every message through the MCP SDK. The
	// protocol is the same either way: it is a setting to rule the fast path out when a bug is
	// suspected, not a feature switch. Nil means on.
	FastPath *bool `yaml:"fast_path" json:"fast_path,omitempty" jsonschema:"description=Serve tools/call on the gateway's own decode-once path where it applies (default true); false sends every message through the MCP SDK. The protocol is the same either way."`
}

// FastPathOn reports whether gateway.fast_path is on (the default).
func (g *Gateway) FastPathOn() bool { return g.FastPath == nil || *g.FastPath }

// Server is one upstream MCP server: a child process over stdio (Command) or a streamable HTTP
// endpoint (URL). Its launch settings are trusted configuration and come only from this file.
type Server struct {
	Name string `yaml:"name" json:"name" jsonschema:"required,pattern=^[A-Za-z0-9](_?[A-Za-z0-9-])*_?$,description=Unique server name (letters\\, digits\\, - and _\\, no __); the prefix of its tools' public names."`

	Command string            `yaml:"command" json:"command,omitempty" jsonschema:"description=Executable of a stdio server (exclusive with url)."`
	Args    []string          `yaml:"args" json:"args,omitempty" jsonschema:"description=Arguments of command."`
	Cwd     string            `yaml:"cwd" json:"cwd,omitempty" jsonschema:"description=Working directory of command."`
	Env     map[string]string `yaml:"env" json:"env,omitempty" jsonschema:"description=Environment variables set for command\\, over everything it inherits; the values are trusted configuration."`
	// EnvInherit names the variables of the gateway's environment the child gets beside a small
	// base (PATH, HOME, LANG, TZ…), or all of them; never those the gateway reads secrets from.
	EnvInherit EnvInherit `yaml:"env_inherit" json:"env_inherit,omitempty,omitzero" jsonschema:"description=Variables of the gateway's environment command inherits beside the base (PATH HOME USER LOGNAME SHELL LANG LANGUAGE LC_* TZ TMPDIR TERM XDG_RUNTIME_DIR): names and prefixes ending in * such as [ROS_DOMAIN_ID\\, ROS_*]\\, or all for the whole environment. The variables the gateway reads secrets from (token_env\\, admin_token_env\\, headers_env\\, the model's API key…) are never passed."`

	URL        string            `yaml:"url" json:"url,omitempty" jsonschema:"description=Streamable HTTP endpoint of a remote server (exclusive with command)."`
	HeadersEnv map[string]string `yaml:"headers_env" json:"headers_env,omitempty" jsonschema:"description=HTTP header name to the environment variable holding its value."`
	// OAuth gets the gateway's own access token for a url server by the OAuth client
	// credentials grant (upstream_oauth.go); nil sends none.
	OAuth *UpstreamOAuth `yaml:"oauth" json:"oauth,omitempty" jsonschema:"description=The gateway's own OAuth client credentials at the server's authorization server (url servers only); the access token is cached and refreshed. A client's token is never passed on."`

	CallTimeoutSec           float64 `yaml:"call_timeout_sec" json:"call_timeout_sec,omitempty" jsonschema:"exclusiveMinimum=0,description=Deadline of one call in seconds (default 300)."`
	TimeoutArgumentMarginSec float64 `yaml:"timeout_argument_margin_sec" json:"timeout_argument_margin_sec,omitempty" jsonschema:"minimum=0,description=Added to a call's timeout_sec argument to form its deadline (default 60)."`
	StartupTimeoutSec        float64 `yaml:"startup_timeout_sec" json:"startup_timeout_sec,omitempty" jsonschema:"exclusiveMinimum=0,description=Time to initialize and list tools (default 15)."`
	// RestartBackoffMaxSec caps the exponential backoff between restarts of a crashed server.
	RestartBackoffMaxSec float64 `yaml:"restart_backoff_max_sec" json:"restart_backoff_max_sec,omitempty" jsonschema:"exclusiveMinimum=0,description=Cap of the exponential backoff between restarts in seconds (default 30)."`

	// Untrusted marks a server whose results may carry instructions from outside (the web, a
	// shared document): every call to it labels the session untrusted for policies.
	Untrusted bool `yaml:"untrusted" json:"untrusted,omitempty" jsonschema:"description=Its results may carry outside instructions: a call to it labels the session untrusted."`
	// Physical marks a server whose calls move hardware: one call in flight, timeouts lock out.
	Physical bool `yaml:"physical" json:"physical,omitempty" jsonschema:"description=Its calls move hardware: one call in flight\\, a timeout locks out."`
	// QueueSize bounds the calls waiting for their turn on a physical server.
	QueueSize int `yaml:"queue_size" json:"queue_size,omitempty" jsonschema:"minimum=1,description=Calls that may wait for their turn on a physical server (default 16)."`
	// MaxResultBytes bounds one message the server sends (a tool result, a tool list): a larger
	// one is discarded while it is read, never held whole, and the call it answers fails.
	MaxResultBytes int64 `yaml:"max_result_bytes" json:"max_result_bytes,omitempty" jsonschema:"minimum=1024,description=Largest message the gateway reads from the server in bytes (a tool result\\, a tool list); a larger one is discarded while it is read and its call fails with tool_protocol_violation\\, which on a physical server locks out (default 4194304)."`
	// Contract is "envelope" (results checked against the envelope contract) or "passthrough".
	Contract string `yaml:"contract" json:"contract,omitempty" jsonschema:"enum=envelope,enum=passthrough,description=envelope: results must be success/failure envelopes; passthrough: forwarded as they are."`
	// ProtocolVersion pins the MCP revision the gateway asks the server for; "" asks for the
	// newest the gateway speaks, and the server may answer with an older one. The server's
	// session is shared by every client of the gateway, so this is one revision for all.
	ProtocolVersion string `yaml:"protocol_version" json:"protocol_version,omitempty" jsonschema:"description=MCP protocol revision to ask the server for such as 2025-11-25; default the newest the gateway speaks (the server may choose an older one)."`

	Tools Tools `yaml:"tools" json:"tools,omitempty" jsonschema:"description=Which tools are listed and how."`

	// Line is the line of this server's entry in the file, for messages.
	Line int `yaml:"-" json:"-"`
	// CommandLine is the line of command's value, for messages about the executable.
	CommandLine int `yaml:"-" json:"-"`
}

// Tools filters and adjusts a server's tools.
type Tools struct {
	Include   []string                `yaml:"include" json:"include,omitempty" jsonschema:"description=Globs of upstream tool names to list (default all)."`
	Exclude   []string                `yaml:"exclude" json:"exclude,omitempty" jsonschema:"description=Globs of upstream tool names to leave out."`
	Hidden    []string                `yaml:"hidden" json:"hidden,omitempty" jsonschema:"description=Upstream tool names never listed and never callable by a model."`
	Overrides map[string]ToolOverride `yaml:"overrides" json:"overrides,omitempty" jsonschema:"description=Per upstream tool settings."`
	// OnInvalidSchema says what happens to a tool whose input schema does not compile:
	// "exclude" leaves it out (logged), "unvalidated" serves it without argument validation.
	OnInvalidSchema string `yaml:"on_invalid_schema" json:"on_invalid_schema,omitempty" jsonschema:"enum=exclude,enum=unvalidated,description=A tool whose input schema does not compile is left out (exclude; default) or served without argument validation (unvalidated)."`
}

// Audit configures the audit log.
type Audit struct {
	// RedactKeys are argument keys whose values never reach the audit log: a key matches when,
	// lower-cased, it contains one of these. The log keeps a digest of the original arguments.
	RedactKeys []string `yaml:"redact_keys" json:"redact_keys,omitempty" jsonschema:"description=Argument keys (case-insensitive substrings) whose values are replaced by [REDACTED] in the audit log (default: password passwd secret token api_key apikey authorization credential private_key)."`
	// CommitTimeout bounds every wait on the state file: a call whose record is not on disk
	// within it is answered audit_unavailable instead of being held.
	CommitTimeout Duration `yaml:"commit_timeout" json:"commit_timeout,omitempty" jsonschema:"type=string,description=Longest a call waits for its audit record to reach the disk before it is answered audit_unavailable such as 5s (default 5s)."`
	// MinFreeBytes is the free space the state directory's filesystem must keep; below it
	// every call is refused (audit_unavailable) before anything is sent. 0 disables the check.
	MinFreeBytes int64 `yaml:"min_free_bytes" json:"min_free_bytes,omitempty" jsonschema:"minimum=0,description=Free bytes the state directory's filesystem must keep; below it calls are refused before dispatch with audit_unavailable; 0 turns the check off (default 16777216)."`
	// MaxValueBytes bounds one string (or number) of the redacted arguments in the audit log: a
	// longer one is stored as its first MaxValueBytes bytes and a marker with its length and
	// SHA-256. Arguments that are still larger than 16 times this are stored as one such string.
	MaxValueBytes int `yaml:"max_value_bytes" json:"max_value_bytes,omitempty" jsonschema:"minimum=256,description=Longest string or number of the arguments kept whole in the audit log in bytes; longer ones are cut and marked with their length and SHA-256 (default 4096)."`
	// Retention bounds the audit records kept in the state file.
	Retention Retention `yaml:"retention" json:"retention,omitempty" jsonschema:"description=How many audit records the state file keeps; the oldest are pruned and a checkpoint keeps the hash chain verifiable."`
}

// Retention bounds the audit log. The oldest records beyond either bound are pruned in small
// batches; a checkpoint record on the chain carries the digest of what was pruned. Lockouts,
// approvals and pins are never pruned.
type Retention struct {
	// MaxAge prunes records older than this; 0 keeps records of any age.
	MaxAge Duration `yaml:"max_age" json:"max_age,omitempty" jsonschema:"type=string,description=Prune audit records older than this such as 2160h (90 days); 0s keeps records of any age (default 0s)."`
	// MaxBytes prunes the oldest records while the stored records (keys and values) take more
	// than this many bytes; 0 keeps any amount.
	MaxBytes int64 `yaml:"max_bytes" json:"max_bytes,omitempty" jsonschema:"minimum=0,description=Prune the oldest audit records while the stored records take more than this many bytes; 0 keeps any amount (default 1073741824\\, 1 GiB)."`
}

// DefaultCommitTimeout is audit.commit_timeout when the file does not set it.
const DefaultCommitTimeout = 5 * time.Second

// DefaultMinFreeBytes is audit.min_free_bytes when the file does not set it.
const DefaultMinFreeBytes = 16 << 20

// ToolOverride adjusts one upstream tool.
type ToolOverride struct {
	// Evaluated tools must return a non-empty run_id.
	Evaluated bool `yaml:"evaluated" json:"evaluated,omitempty" jsonschema:"description=The tool must return a non-empty run_id."`
	// Description replaces the upstream description.
	Description string `yaml:"description" json:"description,omitempty" jsonschema:"description=Replaces the upstream description."`
	// Stop marks the tool as its physical server's stop action: it stays callable while the
	// server is locked out or halted, it does not wait behind the call in flight, no policy
	// denies it, and a halt calls it (docs/operations.md, "Halt").
	Stop bool `yaml:"stop" json:"stop,omitempty" jsonschema:"description=The tool is the physical server's stop action: always callable (also while locked out or halted)\\, sent without waiting for the call in flight\\, never denied by a policy\\, and called by mcp-gateway halt."`
	// AllowWhileLocked keeps a read-only tool callable while its server is locked out, so that
	// an operator can inspect the robot through the gateway. The tool's annotations must say
	// it is read-only.
	AllowWhileLocked bool `yaml:"allow_while_locked" json:"allow_while_locked,omitempty" jsonschema:"description=The tool stays callable while its server is locked out or halted\\, for inspection; only for tools whose annotations say readOnlyHint true."`
	// Line is the line of this override's key in the file, for messages.
	Line int `yaml:"-" json:"-"`
}

// Defaults of the settings above.
const (
	DefaultName                 = "mcp-gateway"
	DefaultListen               = "127.0.0.1:8080"
	DefaultStateDir             = ".mcp-gateway"
	DefaultCallTimeoutSec       = 300
	DefaultTimeoutMarginSec     = 60
	DefaultStartupTimeoutSec    = 15
	DefaultRestartBackoffMaxSec = 30
	DefaultQueueSize            = 16
	// DefaultMaxResultBytes bounds one message from a server unless max_result_bytes says
	// otherwise.
	DefaultMaxResultBytes = 4 << 20
	// MinResultBytes is the smallest max_result_bytes: an MCP initialize result alone takes
	// several hundred bytes.
	MinResultBytes = 1024

	OnInvalidSchemaExclude     = "exclude"
	OnInvalidSchemaUnvalidated = "unvalidated"

	ToolNamesPrefixed   = "prefixed"
	ToolNamesBare       = "bare"
	HTTPModeAuto        = "auto"
	HTTPModeStateful    = "stateful"
	HTTPModeStateless   = "stateless"
	LockoutGlobal       = "global"
	LockoutServer       = "server"
	ContractEnvelope    = "envelope"
	ContractPassthrough = "passthrough"
	PrefixSeparator     = "__"
)

// Values of Gateway.LogFormat and Gateway.LogLevel, and of Server.Transport.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
	LogLevelDebug = "debug"
	LogLevelInfo  = "info"
	LogLevelWarn  = "warn"
	LogLevelError = "error"

	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Transport is TransportStdio for a server launched from Command and TransportHTTP for one
// reached at URL. A loaded configuration never has both or neither.
func (s *Server) Transport() string {
	if s.Command != "" {
		return TransportStdio
	}
	return TransportHTTP
}

// Server returns the server with the given name, or nil when there is none. The pointer is into
// c.Servers, so it stays valid as long as c does.
func (c *Config) Server(name string) *Server {
	for i := range c.Servers {
		if c.Servers[i].Name == name {
			return &c.Servers[i]
		}
	}
	return nil
}

// DefaultRedactKeys are the argument keys redacted from the audit log when audit.redact_keys is
// absent.
var DefaultRedactKeys = []string{"password", "passwd", "secret", "token", "api_key", "apikey", "authorization", "credential", "private_key"}

// Policies are the CEL rules of SPEC.md §8.
type Policies struct {
	// Default is the decision when no rule matches: "allow" or "deny".
	Default string `yaml:"default" json:"default,omitempty" jsonschema:"enum=allow,enum=deny,description=Decision when no rule matches (default allow)."`
	// Files are policy files (a list of rules under "rules:"), relative to this file.
	Files []string `yaml:"files" json:"files,omitempty" jsonschema:"description=Policy files holding rules: lists; relative to this file."`
	// Rules are inline rules, in the same form as in files.
	Rules []PolicyRule `yaml:"rules" json:"rules,omitempty" jsonschema:"description=Inline rules."`
	// CostLimit caps the runtime cost of evaluating one rule; a rule over it fails closed.
	CostLimit uint64 `yaml:"cost_limit" json:"cost_limit,omitempty" jsonschema:"minimum=1,description=Runtime cost limit of one rule's evaluation (default 10000); a rule over it fails closed."`
}

// PolicyRule is one CEL rule.
type PolicyRule struct {
	ID     string `yaml:"id" json:"id" jsonschema:"required,description=Unique rule id; named in denials and audit records."`
	Effect string `yaml:"effect" json:"effect" jsonschema:"required,enum=allow,enum=deny,enum=require_approval"`
	When   string `yaml:"when" json:"when" jsonschema:"required,description=CEL expression over tool server upstream_tool args principal session tool_meta labels state now; must be boolean."`
	Reason string `yaml:"reason" json:"reason,omitempty" jsonschema:"description=Told to the caller when the rule denies or holds a call."`
	Mode   string `yaml:"mode" json:"mode,omitempty" jsonschema:"enum=enforce,enum=log_only,description=enforce (default) or log_only: evaluated and recorded as a would-be decision but not applied."`

	// File, Line and Column locate the first character of When, for messages.
	File   string `yaml:"-" json:"-"`
	Line   int    `yaml:"-" json:"-"`
	Column int    `yaml:"-" json:"-"`
}

// Approvals configures the approval channel of SPEC.md §9.
type Approvals struct {
	// Use is the channel: "console" (the gateway's log), "memory" (only the admin API and CLI),
	// "webhook", or "callback" (a function of a program that embeds the gateway:
	// gateway.Options.ApprovalCallback; the mcp-gateway binary has none).
	Use string `yaml:"use" json:"use,omitempty" jsonschema:"enum=console,enum=memory,enum=webhook,enum=callback,description=Where pending requests are announced (default console); callback is for programs that embed the gateway."`
	// UseLine is the line of use's value (0 when it is not written), for messages.
	UseLine int `yaml:"-" json:"-"`
	// Timeout is how long a call waits for an answer.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty" jsonschema:"type=string,description=How long a call waits for an answer such as 5m (default 5m)."`
	// Webhook receives a JSON POST per pending request when Use is webhook.
	Webhook Webhook `yaml:"webhook" json:"webhook,omitempty"`
}

// Webhook is an HTTP endpoint notified of pending approvals.
type Webhook struct {
	URL        string            `yaml:"url" json:"url,omitempty" jsonschema:"description=http(s) URL receiving a JSON POST per pending request."`
	HeadersEnv map[string]string `yaml:"headers_env" json:"headers_env,omitempty" jsonschema:"description=HTTP header name to the environment variable holding its value."`
	// Timeout bounds one POST: a webhook that does not answer within it has failed, which is
	// audited and counted; the request stays pending.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty" jsonschema:"type=string,description=How long one POST may take such as 10s; a webhook that does not answer in time has failed (default 10s; at most 1m)."`
}

// DefaultApprovalTimeout is how long a call waits for an approval by default.
const DefaultApprovalTimeout = 5 * time.Minute

// DefaultWebhookTimeout and MaxWebhookTimeout bound one POST of the approval webhook. A channel
// slower than a minute is broken, and the request it announces waits meanwhile.
const (
	DefaultWebhookTimeout = 10 * time.Second
	MaxWebhookTimeout     = time.Minute
)

// Defaults and bounds of the audit section. A gigabyte of records is about 1.7 million typical
// calls (docs/benchmarks.md): months of a busy robot, and small beside any disk it runs on. Age
// is not bounded by default: how long evidence must be kept is the operator's decision.
const (
	DefaultAuditMaxValueBytes = 4096
	MinAuditMaxValueBytes     = 256
	DefaultAuditMaxBytes      = 1 << 30
	MinAuditMaxBytes          = 64 << 10
)

// DefaultShutdownGrace is how long calls in flight may finish at shutdown by default.
const DefaultShutdownGrace = 30 * time.Second

// DefaultBodyReadTimeout is how long a request body may take to arrive by default: a body of
// max_body_bytes (4 MiB) arrives in well under a second on any link a robot's network has, and
// an MCP request is a few kilobytes.
const DefaultBodyReadTimeout = 10 * time.Second

// DefaultMaxConnections caps the HTTP client connections by default. One gateway serves one
// robot (SPEC.md §14): a few agents, an operator and Prometheus, each holding one or two
// connections per session and one per call in flight. 512 leaves a wide margin over that, and
// fits the usual open-file limit of 1024 with room for the upstreams and the state file.
const DefaultMaxConnections = 512

// DefaultMaxSessions caps the stateful HTTP sessions by default: far more agents than one robot
// cell runs, and each session costs a few goroutines and buffers.
const DefaultMaxSessions = 256

// DefaultSessionIdleTimeout closes an HTTP session by default after this long with no request
// in progress. A client that is there holds its GET stream open, or is in a call, and is never
// idle; one between two calls of a task without a stream comes back within a model's turn, well
// under five minutes. A client that went away without DELETE leaves a session behind that
// costs memory and a place under max_sessions, and that the gateway notifies on every reload,
// unlock and pin change: five minutes frees those soon enough that a crashing client cannot
// fill max_sessions faster than they are freed.
const DefaultSessionIdleTimeout = 5 * time.Minute
