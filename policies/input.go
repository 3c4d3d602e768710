package policies

import (
	"encoding/json"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Input is what the rules see of one tool call. The struct tags name the fields as rules (cel)
// and policy test files (yaml) spell them.
type Input struct {
	// Tool is the public tool name (`robot__navigate_to`); Server and UpstreamTool its parts.
	Tool, Server, UpstreamTool string
	// Args are the call's arguments as JSON text. Rules see them as `args`, a map: JSON numbers
	// are doubles, objects maps with string keys. Empty text or null reads as an empty map; text
	// that is not a JSON object makes every rule that reads args unevaluable.
	Args      json.RawMessage
	Principal Principal
	Session   Session
	ToolMeta  ToolMeta
	// Labels are the session's labels set by guards. `private` and `untrusted` always exist for
	// rules (false unless set), so `labels.untrusted` never fails.
	Labels map[string]bool
	State  State
	// Rate is how many calls the call's principal, session and server made recently, before
	// this one.
	Rate Rate
}

// Principal is who makes the call.
type Principal struct {
	ID    string   `cel:"id" yaml:"id"`
	Roles []string `cel:"roles" yaml:"roles"`
}

// Session is the MCP session (or agent run) the call belongs to.
type Session struct {
	ID string `cel:"id" yaml:"id"`
	// Calls is how many tool calls the session has made before this one.
	Calls int64 `cel:"calls" yaml:"calls"`
}

// ToolMeta is what the gateway knows about the tool.
type ToolMeta struct {
	// Physical is set for tools of a server configured physical: they move hardware.
	Physical bool `cel:"physical" yaml:"physical"`
	// Evaluated is set for tools that must return a run_id.
	Evaluated bool `cel:"evaluated" yaml:"evaluated"`
	// Annotations are the upstream's tool annotations as it sent them (readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint, title). MCP's defaults for absent hints are
	// not filled in: rules choose their own with `[?"destructiveHint"].orValue(false)`.
	Annotations map[string]any `cel:"annotations" yaml:"annotations"`
}

// State is the gateway's state for the tool's server.
type State struct {
	// Locked is set while a lockout (SPEC.md §11) covers the server.
	Locked bool `cel:"locked" yaml:"locked"`
	// InFlight is the number of calls running on the server.
	InFlight int64 `cel:"in_flight" yaml:"in_flight"`
}

// Rate is what rules see as `rate`: the recent calls of the call's principal, session and
// server, not counting this one (the eleventh call of a minute sees 10).
type Rate struct {
	Principal RateCounts `cel:"principal" yaml:"principal"`
	Session   RateCounts `cel:"session" yaml:"session"`
	Server    RateCounts `cel:"server" yaml:"server"`
}

// RateCounts are the calls of one principal, session or server that reached policy evaluation
// in the last minute and hour; Physical* only those to tools of physical servers. Its fields
// are those of limits.Counts, so one converts to the other.
type RateCounts struct {
	Calls1m    int64 `cel:"calls_1m" yaml:"calls_1m"`
	Calls1h    int64 `cel:"calls_1h" yaml:"calls_1h"`
	Physical1m int64 `cel:"physical_1m" yaml:"physical_1m"`
	Physical1h int64 `cel:"physical_1h" yaml:"physical_1h"`
}

// knownLabels are the labels guards set; rules can read them as fields whether set or not.
var knownLabels = [...]string{"private", "untrusted"}

// noLabels is the labels map of a session without labels. It is shared and never written.
var noLabels = map[string]bool{"private": false, "untrusted": false}

// activation resolves the rule variables for one Evaluate. Each value is built on first use and
// kept for the other rules of the call, so a variable no rule reads costs nothing; the engine
// never shares an activation between calls.
type activation struct {
	e    *Engine
	in   *Input
	vals [numVars]ref.Val
}

// The variables, as indexes into activation.vals.
const (
	varTool = iota
	varServer
	varUpstreamTool
	varArgs
	varPrincipal
	varSession
	varToolMeta
	varLabels
	varState
	varRate
	varNow
	numVars
)

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	i := varIndex(name)
	if i < 0 {
		return nil, false
	}
	if v := a.vals[i]; v != nil {
		return v, true
	}
	v := a.build(i)
	a.vals[i] = v
	return v, true
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

func varIndex(name string) int {
	switch name {
	case "tool":
		return varTool
	case "server":
		return varServer
	case "upstream_tool":
		return varUpstreamTool
	case "args":
		return varArgs
	case "principal":
		return varPrincipal
	case "session":
		return varSession
	case "tool_meta":
		return varToolMeta
	case "labels":
		return varLabels
	case "state":
		return varState
	case "rate":
		return varRate
	case "now":
		return varNow
	}
	return -1
}

func (a *activation) build(i int) ref.Val {
	in, adapter := a.in, a.e.adapter
	switch i {
	case varTool:
		return types.String(in.Tool)
	case varServer:
		return types.String(in.Server)
	case varUpstreamTool:
		return types.String(in.UpstreamTool)
	case varArgs:
		return newArgs(in.Args, adapter)
	case varPrincipal:
		return adapter.NativeToValue(&in.Principal)
	case varSession:
		return adapter.NativeToValue(&in.Session)
	case varToolMeta:
		return adapter.NativeToValue(&in.ToolMeta)
	case varLabels:
		return adapter.NativeToValue(withKnownLabels(in.Labels))
	case varState:
		return adapter.NativeToValue(&in.State)
	case varRate:
		return adapter.NativeToValue(&in.Rate)
	case varNow:
		return types.Timestamp{Time: a.e.now()}
	}
	return types.NewErr("unknown variable %d", i)
}

// withKnownLabels returns labels with every known label present, copying only when one is
// missing.
func withKnownLabels(labels map[string]bool) map[string]bool {
	if len(labels) == 0 {
		return noLabels
	}
	complete := true
	for _, k := range knownLabels {
		if _, ok := labels[k]; !ok {
			complete = false
		}
	}
	if complete {
		return labels
	}
	out := make(map[string]bool, len(labels)+len(knownLabels))
	for _, k := range knownLabels {
		out[k] = false
	}
	for k, v := range labels {
		out[k] = v
	}
	return out
}
