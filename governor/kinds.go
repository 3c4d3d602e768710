package governor

// Kind is the machine-readable kind of a failure the gateway makes (SPEC.md §6, §7). It is the
// "kind" field of a failure envelope and the outcome label of metrics and audit records.
type Kind string

// The failure kinds. Every refusal uses one of these; none is spelled anywhere else.
const (
	// KindUnknownTool: no tool has the requested public name.
	KindUnknownTool Kind = "unknown_tool"
	// KindHiddenTool: the tool exists but is hidden from models by configuration.
	KindHiddenTool Kind = "internal_tool_not_model_callable"
	// KindExecutionStatusUnknown: a call timed out or its server died during it, so what the
	// robot did is unknown; also every call refused while such a lockout is active.
	KindExecutionStatusUnknown Kind = "mcp_execution_status_unknown"
	// KindInvalidArguments: the arguments do not match the tool's input schema.
	KindInvalidArguments Kind = "invalid_tool_arguments"
	// KindGuardBlocked: a content guard blocked the arguments or the result.
	KindGuardBlocked Kind = "guard_blocked"
	// KindPolicyDenied: a policy rule denied the call.
	KindPolicyDenied Kind = "policy_denied"
	// KindApprovalDenied: an operator denied the approval the call needed.
	KindApprovalDenied Kind = "approval_denied"
	// KindApprovalExpired: nobody answered the approval request in time.
	KindApprovalExpired Kind = "approval_expired"
	// KindUpstreamUnavailable: the tool's server is not running or not reachable.
	KindUpstreamUnavailable Kind = "upstream_unavailable"
	// KindUpstreamBusy: the physical server's queue of waiting calls is full.
	KindUpstreamBusy Kind = "upstream_busy"
	// KindUpstreamError: the server answered the call with a protocol error instead of a result.
	KindUpstreamError Kind = "upstream_error"
	// KindProtocolViolation: the tool's result is not a valid envelope.
	KindProtocolViolation Kind = "tool_protocol_violation"
	// KindMissingRunID: an evaluated tool returned no run_id.
	KindMissingRunID Kind = "missing_evaluation_run_id"
	// KindDefinitionChanged: the tool's definition changed since it was pinned.
	KindDefinitionChanged Kind = "tool_definition_changed"
	// KindOneToolPerTurn: the agent asked for more than one tool call in a turn.
	KindOneToolPerTurn Kind = "one_tool_per_turn"
	// KindModelRefusal: the model refused the task.
	KindModelRefusal Kind = "model_refusal"
	// KindCancelled: the caller cancelled the call before it finished.
	KindCancelled Kind = "cancelled"
	// KindAuditUnavailable: the state file is not taking writes (disk full, I/O error), so the
	// call could not be recorded: it is refused before anything is sent, or, if it had already
	// run, its result is withheld.
	KindAuditUnavailable Kind = "audit_unavailable"
	// KindRateLimited: a limit (config limits) refused the call before anything was sent: too
	// many calls in its window, or too many in flight. The envelope names the limit, the window
	// and retry_after_sec.
	KindRateLimited Kind = "rate_limited"
)

// Kinds are the failure kinds above, for messages that name them and for "did you mean". A new
// kind goes in both places.
var Kinds = []Kind{
	KindUnknownTool, KindHiddenTool, KindExecutionStatusUnknown, KindInvalidArguments, KindGuardBlocked,
	KindPolicyDenied, KindApprovalDenied, KindApprovalExpired, KindUpstreamUnavailable, KindUpstreamBusy,
	KindUpstreamError, KindProtocolViolation, KindMissingRunID, KindDefinitionChanged, KindOneToolPerTurn,
	KindModelRefusal, KindCancelled, KindAuditUnavailable, KindRateLimited,
}

// Outcome labels for calls that did not fail in the gateway. They appear in metrics and audit
// records, never in envelopes.
const (
	// OutcomeOK: the tool succeeded.
	OutcomeOK = "ok"
	// OutcomeToolFailure: the tool itself reported a failure envelope.
	OutcomeToolFailure = "tool_failure"
)
