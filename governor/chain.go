package governor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// Call is one tool call on its way through the chain. The caller fills the request fields; steps
// fill Tool and may replace Args (a redacting guard does).
type Call struct {
	// ID identifies the call in logs and audit records; unique within the process.
	ID string
	// Halt marks the gateway's own call of a stop tool during a halt. It is sent even when the
	// tool is quarantined (its definition changed, or a tool_definition guard withheld it):
	// quarantine keeps what a model reads away from models, and the halt reads nothing of it.
	Halt bool
	// Name is the public tool name the caller asked for.
	Name string
	// Args is the arguments object as JSON ("{}" when the caller sent none).
	Args json.RawMessage
	// Principal is who made the call ("anonymous" without auth; "agent" in agent mode), and
	// Roles its roles.
	Principal string
	Roles     []string
	// Session is the downstream MCP session id, "" when there is none; SessionCalls the number
	// of calls the session made before this one, and Labels the labels guards set on it.
	Session      string
	SessionCalls int64
	Labels       map[string]bool
	// Progress, when set, sends the client a progress notification for this call: the upstream's
	// own, and the gateway's while the call waits for an operator's approval. The chain keeps
	// their progress increasing (progressMeter); Progress must not block for long.
	Progress func(*mcp.ProgressNotificationParams)
	// Start is when the gateway received the call.
	Start time.Time
	// RequestID is the JSON-RPC id of the client's request as text ("" when there is none: the
	// built-in agent, a halt); Transport how the call came: "http", "stdio" or "agent". Both are
	// for the call's span (telemetry).
	RequestID string
	Transport string
	// Model is the evidence of the model request that asked for the call (the built-in
	// agent's), kept in the call's audit record; nil for a client's call.
	Model *ModelEvidence

	// Tool is the resolved tool, set by the resolve step.
	Tool *Tool
	// Dispatched is set once the call has been handed to its server.
	Dispatched bool
	// Journaled is set once a physical call has its crash-journal entry on disk; the audit
	// step removes the entry in the transaction that writes the call's record.
	Journaled bool
	// ArgsScreened is set once the tool_call guards have seen Args (and replaced it with what
	// they let through); ArgsWithheld when they blocked it or held it for an operator. The
	// audit record keeps the arguments as the guards left them.
	ArgsScreened bool
	ArgsWithheld bool
	// Redact is the audit redactor of the config the call runs under, set by the audit step:
	// whatever else keeps the call's arguments (an approval request) keeps them as its record does.
	Redact *Redactor
	// Decision is the policy decision as "effect:rule" ("" before the policy step), for the
	// audit record.
	Decision string
	// Detail holds what the audit record keeps beyond its fields: shadow decisions, rule errors.
	Detail map[string]any

	progress *progressMeter // made by progressStage
}

// ModelEvidence identifies the model request behind a call: the provider's request id, the
// model that answered, the agent's invocation id.
type ModelEvidence = store.ModelEvidence

// Outcome is what the chain made of a call: the result the caller receives and how it ended.
type Outcome struct {
	// Result is sent to the caller as it is.
	Result *mcp.CallToolResult
	// Kind is set when the gateway refused or failed the call.
	Kind Kind
	// Success is the envelope's success (for passthrough servers: !IsError).
	Success bool
	// RunID is the envelope's run_id, if any.
	RunID string
	// Reason is the failure reason, "" on success.
	Reason string
	// Unknown is set when a call was sent and what it did is unknown: it timed out, its server
	// died during it, or it was cancelled in flight. On a physical server this locks out.
	Unknown bool
	// RPCError is set when a passthrough server answered with a JSON-RPC error: the client gets
	// that error as the server sent it (code, message, data) rather than a failure envelope,
	// as it would talking to the server directly.
	RPCError *jsonrpc.Error
}

// Label is the outcome's bounded label for metrics and audit: the failure kind, or
// OutcomeOK / OutcomeToolFailure.
func (o *Outcome) Label() string {
	switch {
	case o.Kind != "":
		return string(o.Kind)
	case o.Success:
		return OutcomeOK
	default:
		return OutcomeToolFailure
	}
}

// Refuse is the outcome of a call the gateway refuses or fails with a failure envelope.
func Refuse(kind Kind, reason string) *Outcome {
	return &Outcome{Result: Failure(kind, reason).Result(), Kind: kind, Reason: reason}
}

// fromEnvelope is the outcome that returns env to the caller.
func fromEnvelope(env Envelope) *Outcome {
	kind, _ := env["kind"].(string)
	return &Outcome{Result: env.Result(), Kind: Kind(kind), Success: env.Success(), RunID: env.RunID(), Reason: env.Reason()}
}

// Handler handles a call and always returns an outcome; refusals are outcomes, not errors.
type Handler interface {
	Handle(ctx context.Context, c *Call) *Outcome
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, c *Call) *Outcome

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, c *Call) *Outcome { return f(ctx, c) }

// Step is one step of the chain: it wraps the next handler.
type Step func(next Handler) Handler

// Chain composes steps around the final handler; the first step runs first.
func Chain(final Handler, steps ...Step) Handler {
	h := final
	for i := len(steps) - 1; i >= 0; i-- {
		h = steps[i](h)
	}
	return h
}
