package governor

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Envelope is one tool result in the success/failure contract of SPEC.md §7: an object with a
// boolean "success", at least one value field on success, and a non-empty "reason" on failure.
type Envelope map[string]any

// Success reports the envelope's "success" field.
func (e Envelope) Success() bool { b, _ := e["success"].(bool); return b }

// Reason is the failure reason, "" on success.
func (e Envelope) Reason() string { s, _ := e["reason"].(string); return s }

// RunID is the run id of a physical action, "" when the tool gave none.
func (e Envelope) RunID() string { s, _ := e["run_id"].(string); return s }

// Result renders the envelope as a tool result: structuredContent plus the same JSON as the text
// of one content block, with isError set on failure. A fresh result is built every time; nothing
// of the upstream's result object (such as its _meta) is carried over.
func (e Envelope) Result() *mcp.CallToolResult {
	text, err := json.Marshal(map[string]any(e))
	if err != nil {
		// Envelopes hold only values decoded from JSON or set here, so this cannot happen;
		// fail closed with a plain failure rather than an empty result.
		text = []byte(`{"success":false,"reason":"the gateway could not encode the tool result"}`)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
		StructuredContent: map[string]any(e),
		IsError:           !e.Success(),
	}
}

// Failure is the envelope of a failure the gateway makes: success false, a reason a model can
// act on, and its kind.
func Failure(kind Kind, reason string) Envelope {
	return Envelope{"success": false, "reason": reason, "kind": string(kind)}
}

// Failuref is [Failure] with a formatted reason.
func Failuref(kind Kind, format string, args ...any) Envelope {
	return Failure(kind, fmt.Sprintf(format, args...))
}

// ParseEnvelope applies the envelope contract (§7) to an upstream result. tool is the public
// name, used in reasons; evaluated tools must carry a run_id. On a contract breach it returns a
// gateway failure envelope with KindProtocolViolation or KindMissingRunID, so the returned
// envelope is always valid.
func ParseEnvelope(res *mcp.CallToolResult, tool string, evaluated bool) Envelope {
	env, problem := extractEnvelope(res)
	if problem != "" {
		return Failuref(KindProtocolViolation,
			"tool %s returned a result that breaks the envelope contract: %s. The action's outcome is not known from this result; check the robot's state (for example with a read-only tool) before retrying.",
			tool, problem)
	}
	if res.IsError {
		env["success"] = false
	}
	delete(env, "error")
	success, ok := env["success"].(bool)
	if !ok {
		return Failuref(KindProtocolViolation,
			"tool %s returned a result whose \"success\" is %s, not a boolean. Check the robot's state before retrying.",
			tool, describeJSON(env["success"]))
	}
	if success {
		if !hasValueField(env) {
			return Failuref(KindProtocolViolation,
				"tool %s reported success without any value (observation, run_id, …). Check the robot's state before relying on it.", tool)
		}
	} else {
		reason, _ := env["reason"].(string)
		reason = strings.TrimSpace(reason)
		if reason == "" {
			if !res.IsError {
				return Failuref(KindProtocolViolation,
					"tool %s reported a failure without a reason. Check the robot's state before retrying.", tool)
			}
			reason = fmt.Sprintf("tool %s reported an error without a reason", tool)
		}
		env["reason"] = reason
	}
	if evaluated {
		if runID, _ := env["run_id"].(string); strings.TrimSpace(runID) == "" {
			reason := fmt.Sprintf("tool %s must return a run_id for evaluation and returned none", tool)
			if own := env.Reason(); own != "" {
				reason += "; the tool's own reason: " + own
			}
			return Failure(KindMissingRunID, reason)
		}
	}
	return env
}

// extractEnvelope finds the envelope object in a result: structuredContent when it is a
// non-empty object (its "result" field when that is an object), otherwise the first content
// block's text parsed as JSON. An isError result whose text is not an envelope still yields a
// failure envelope, with the text as its reason. It returns a description of the problem when
// there is no envelope.
func extractEnvelope(res *mcp.CallToolResult) (Envelope, string) {
	if res == nil {
		return nil, "no result"
	}
	if m, ok := asObject(res.StructuredContent); ok && len(m) > 0 {
		if inner, ok := m["result"].(map[string]any); ok {
			return cloneObject(inner), ""
		}
		return cloneObject(m), ""
	}
	if len(res.Content) == 0 {
		if res.IsError {
			return Envelope{"success": false}, ""
		}
		return nil, "no content"
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return nil, fmt.Sprintf("the first content block is %s, not text", contentType(res.Content[0]))
	}
	var v any
	if err := json.Unmarshal([]byte(text.Text), &v); err != nil {
		if res.IsError {
			return Envelope{"success": false, "reason": text.Text}, ""
		}
		return nil, fmt.Sprintf("its text is not JSON (%q)", truncate(text.Text, 80))
	}
	m, ok := v.(map[string]any)
	if !ok {
		if res.IsError {
			return Envelope{"success": false, "reason": text.Text}, ""
		}
		return nil, fmt.Sprintf("its JSON is %s, not an object", describeJSON(v))
	}
	return Envelope(m), ""
}

// asObject reports structuredContent as a JSON object. The SDK client decodes it as
// map[string]any; a built-in tool may hand over a json.RawMessage or a struct.
func asObject(v any) (map[string]any, bool) {
	switch v := v.(type) {
	case nil:
		return nil, false
	case map[string]any:
		return v, true
	case json.RawMessage:
		var m map[string]any
		if json.Unmarshal(v, &m) != nil {
			return nil, false
		}
		return m, true
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		var m map[string]any
		if json.Unmarshal(b, &m) != nil {
			return nil, false
		}
		return m, true
	}
}

// cloneObject copies the top level so that normalising the envelope never changes the
// upstream's result object.
func cloneObject(m map[string]any) Envelope {
	e := make(Envelope, len(m))
	for k, v := range m {
		e[k] = v
	}
	return e
}

func hasValueField(e Envelope) bool {
	for k := range e {
		switch k {
		case "success", "reason", "error":
		default:
			return true
		}
	}
	return false
}

func describeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "missing or null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return fmt.Sprintf("the string %q", truncate(v, 40))
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func contentType(c mcp.Content) string {
	switch c.(type) {
	case *mcp.ImageContent:
		return "an image"
	case *mcp.AudioContent:
		return "audio"
	case *mcp.ResourceLink:
		return "a resource link"
	case *mcp.EmbeddedResource:
		return "an embedded resource"
	default:
		return fmt.Sprintf("%T", c)
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
