package governor

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
)

// Tool is a tool the gateway knows by its public name: where it lives and how it is governed.
type Tool struct {
	// Public is the name callers use.
	Public string
	// Server is the upstream server's name; Upstream the tool's name there.
	Server   string
	Upstream string
	// Hidden tools are never listed and are refused to models.
	Hidden bool
	// Evaluated tools must return a non-empty run_id.
	Evaluated bool
	// Stop marks the physical server's stop action (tools.overrides.<tool>.stop): callable
	// while the server is locked out or halted, sent without waiting for the call in flight,
	// never denied by a policy, and called by a halt.
	Stop bool
	// AllowWhileLocked keeps this read-only tool callable during a lockout, for inspection
	// (tools.overrides.<tool>.allow_while_locked, granted only when the upstream's annotations
	// say the tool is read-only).
	AllowWhileLocked bool
	// Definition is the definition callers see (nil for hidden tools).
	Definition *mcp.Tool
	// ServerConfig is the upstream's configuration: physical, contract, timeouts.
	ServerConfig *config.Server
	// Dispatcher sends the call to the upstream.
	Dispatcher Dispatcher
	// Schema validates the arguments; nil when the tool is served unvalidated.
	Schema *argschema.Schema
	// Annotations are the upstream's tool annotations as a map, for policies.
	Annotations map[string]any
	// UpstreamDefinition is the tool as the upstream listed it, before renaming and overrides:
	// what tool pinning digests.
	UpstreamDefinition *mcp.Tool
	// Quarantine, when set, keeps the tool out of the list and refuses calls to it with
	// KindDefinitionChanged: its definition changed since it was pinned, or a tool_definition
	// guard blocked its description. It says what happened and what the operator must do.
	Quarantine string
}

// Exempt reports whether the tool stays callable while its server is locked out: a stop tool,
// or a read-only tool an operator named for inspection.
func (t *Tool) Exempt() bool { return t.Stop || t.AllowWhileLocked }

// Physical reports whether the tool's calls move hardware.
func (t *Tool) Physical() bool { return t.ServerConfig.Physical }

// PhysicalAction reports whether a call of the tool is a physical action: a tool of a physical
// server that its server does not annotate as read-only (readOnlyHint: true). Looking at the
// scene is not an action; limits with physical_only and the rate counts policies see count
// actions alone.
func (t *Tool) PhysicalAction() bool {
	if !t.Physical() {
		return false
	}
	up := t.UpstreamDefinition
	return up == nil || up.Annotations == nil || !up.Annotations.ReadOnlyHint
}

// Passthrough reports whether results are forwarded without envelope checks.
func (t *Tool) Passthrough() bool { return t.ServerConfig.Contract == config.ContractPassthrough }

// Dispatcher sends a call to the server that owns the tool. It is implemented by
// upstream.Upstream and, in tests, by fakes.
type Dispatcher interface {
	Call(ctx context.Context, name string, args json.RawMessage, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error)
}

// Resolver finds a tool by its public name; it is implemented by the gateway's catalog.
type Resolver interface {
	Resolve(name string) (*Tool, bool)
}
