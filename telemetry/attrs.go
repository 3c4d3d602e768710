package telemetry

import "go.opentelemetry.io/otel/attribute"

// Attribute keys. The first group are the OpenTelemetry semantic conventions for MCP and for
// generative-AI tool execution; the mcp_gateway.* ones are the gateway's own. Every value is
// bounded: a name, an id, a kind, a count — never an argument, a result or a secret.
const (
	AttrMethod          = attribute.Key("mcp.method.name")
	AttrSessionID       = attribute.Key("mcp.session.id")
	AttrProtocolVersion = attribute.Key("mcp.protocol.version")
	AttrRequestID       = attribute.Key("jsonrpc.request.id")
	AttrToolName        = attribute.Key("gen_ai.tool.name")
	AttrOperation       = attribute.Key("gen_ai.operation.name")
	AttrErrorType       = attribute.Key("error.type")
	AttrTransport       = attribute.Key("network.transport")

	AttrCallID       = attribute.Key("mcp_gateway.call.id")
	AttrServer       = attribute.Key("mcp_gateway.server")
	AttrUpstreamTool = attribute.Key("mcp_gateway.upstream_tool")
	AttrPhysical     = attribute.Key("mcp_gateway.physical")
	AttrPrincipal    = attribute.Key("mcp_gateway.principal")
	AttrOutcome      = attribute.Key("mcp_gateway.outcome")
	AttrRule         = attribute.Key("mcp_gateway.policy.rule")
	AttrEffect       = attribute.Key("mcp_gateway.policy.effect")
	AttrStage        = attribute.Key("mcp_gateway.guard.stage")
	AttrGuard        = attribute.Key("mcp_gateway.guard")
	AttrLockout      = attribute.Key("mcp_gateway.lockout")

	// Attributes of an audit record exported as a log record (audit.go).
	AttrAuditSeq    = attribute.Key("mcp_gateway.audit.seq")
	AttrAuditDigest = attribute.Key("mcp_gateway.audit.digest")
	AttrAuditType   = attribute.Key("mcp_gateway.audit.type")
	AttrAuditAction = attribute.Key("mcp_gateway.audit.action")
)
