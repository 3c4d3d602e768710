package governor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// Guarding is what the guard steps share: the approvals that an escalate action goes through,
// the metrics, and how a label reaches the call's session.
type Guarding struct {
	Approvals *Approvals
	Metrics   *guards.Metrics
	// Label marks the call's session (private, untrusted) for the calls that follow.
	Label func(c *Call, label string)
}

// note records a check's findings and errors on the call for the audit record, counts them and
// applies its labels. Findings never hold matched text.
func (g *Guarding) note(c *Call, stage guards.Stage, r guards.Result) {
	if g.Metrics != nil {
		g.Metrics.Observe(stage, r)
	}
	if len(r.Findings) > 0 || len(r.Errors) > 0 {
		if c.Detail == nil {
			c.Detail = map[string]any{}
		}
		if len(r.Findings) > 0 {
			prev, _ := c.Detail["findings"].([]guards.Finding)
			c.Detail["findings"] = append(prev, r.Findings...)
		}
		if len(r.Errors) > 0 {
			prev, _ := c.Detail["guard_errors"].([]guards.GuardError)
			c.Detail["guard_errors"] = append(prev, r.Errors...)
		}
	}
	if len(r.Labels) > 0 {
		if c.Detail == nil {
			c.Detail = map[string]any{}
		}
		prev, _ := c.Detail["labels_set"].([]string)
		c.Detail["labels_set"] = append(prev, r.Labels...)
		if g.Label != nil {
			for _, l := range r.Labels {
				g.Label(c, l)
			}
		}
	}
}

// escalate holds the call for an operator, as a require_approval policy would.
func (g *Guarding) escalate(ctx context.Context, c *Call, r guards.Result) *Outcome {
	if g.Approvals == nil {
		return Refuse(KindGuardBlocked, r.Reason+"; the guard escalates to an operator and this gateway has no approval channel, so the content was blocked")
	}
	if kind, reason := g.Approvals.Request(ctx, c, "guard", r.Reason); kind != "" {
		return Refuse(kind, reason)
	}
	return nil
}

// GuardCall is step 4: the tool_call guards scan every string of the arguments. block refuses
// the call with KindGuardBlocked, escalate holds it for an operator, redact sends the redacted
// arguments on (the audit keeps a digest of the original).
func GuardCall(set *guards.Set, g *Guarding) Step {
	return func(next Handler) Handler {
		if set == nil || set.Empty() {
			return next
		}
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			_, span := telemetry.Child(ctx, spanGuardCall)
			r, args := set.CheckJSON(ctx, c.Tool.Server, c.Name, c.Args)
			g.note(c, guards.StageToolCall, r)
			endGuardSpan(span, guards.StageToolCall, r) // an escalation's wait is a span of its own
			c.ArgsScreened = true
			switch r.Action {
			case guards.ActionBlock:
				c.ArgsWithheld = true
				return Refuse(KindGuardBlocked, fmt.Sprintf("the arguments of %s were blocked: %s. Remove that content and call again.", c.Name, r.Reason))
			case guards.ActionEscalate:
				c.ArgsWithheld = true // until an operator lets them through
				if out := g.escalate(ctx, c, r); out != nil {
					return out
				}
				c.ArgsWithheld = false
				c.Args = args // the redactions of other guards still apply
			case guards.ActionRedact:
				c.Args = args
			}
			return next.Handle(ctx, c)
		})
	}
}

// GuardResult is step 9: the tool_result guards scan the result on its way back — every string
// of an envelope, or the text of a passthrough result's content blocks and its structured
// content. block replaces the result with a KindGuardBlocked failure, escalate holds it until
// an operator releases it, redact passes on the redacted result. The gateway's own failures
// pass unscanned.
func GuardResult(set *guards.Set, g *Guarding) Step {
	return func(next Handler) Handler {
		if set == nil || set.Empty() {
			return next
		}
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			out := next.Handle(ctx, c)
			if out.Kind == KindUpstreamError {
				return guardUpstreamError(ctx, set, g, c, out)
			}
			if out.Kind != "" || out.Result == nil {
				return out
			}
			var r guards.Result
			var redacted *mcp.CallToolResult
			_, span := telemetry.Child(ctx, spanGuardResult)
			if c.Tool.Passthrough() {
				r, redacted = scanPassthrough(ctx, set, c, out.Result)
			} else {
				r, redacted = scanEnvelope(ctx, set, c, out.Result)
			}
			g.note(c, guards.StageToolResult, r)
			endGuardSpan(span, guards.StageToolResult, r)
			switch r.Action {
			case guards.ActionBlock:
				return Refuse(KindGuardBlocked, fmt.Sprintf("the result of %s was withheld: %s. The call itself ran; do not repeat it to see the result.", c.Name, r.Reason))
			case guards.ActionEscalate:
				if blocked := g.escalate(ctx, c, r); blocked != nil {
					return blocked
				}
				out.Result = redacted // the redactions of other guards still apply
			case guards.ActionRedact:
				out.Result = redacted
				if sc, ok := redacted.StructuredContent.(map[string]any); ok && !c.Tool.Passthrough() {
					out.Reason = Envelope(sc).Reason()
				}
			}
			return out
		})
	}
}

// scanEnvelope checks an envelope's strings and rebuilds the envelope from the redacted JSON.
func scanEnvelope(ctx context.Context, set *guards.Set, c *Call, res *mcp.CallToolResult) (guards.Result, *mcp.CallToolResult) {
	doc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		doc = []byte(`null`)
	}
	r, red := set.CheckJSON(ctx, c.Tool.Server, c.Name, doc)
	if r.Action != guards.ActionRedact {
		return r, res
	}
	var env Envelope
	if err := json.Unmarshal(red, &env); err != nil {
		r.Action, r.Blocked = guards.ActionBlock, true
		return r, res
	}
	return r, env.Result()
}

// scanPassthrough checks every text block and the structured content of a result that is
// forwarded as it is; images and other blocks pass.
func scanPassthrough(ctx context.Context, set *guards.Set, c *Call, res *mcp.CallToolResult) (guards.Result, *mcp.CallToolResult) {
	var total guards.Result
	copyRes := *res
	copyRes.Content = append([]mcp.Content(nil), res.Content...)
	for i, block := range res.Content {
		tc, ok := block.(*mcp.TextContent)
		if !ok || tc.Text == "" {
			continue
		}
		r, text := set.CheckText(ctx, c.Tool.Server, c.Name, tc.Text)
		merge(&total, r)
		if text != tc.Text {
			nc := *tc
			nc.Text = text
			copyRes.Content[i] = &nc
		}
	}
	if res.StructuredContent != nil {
		if doc, err := json.Marshal(res.StructuredContent); err == nil {
			r, red := set.CheckJSON(ctx, c.Tool.Server, c.Name, doc)
			merge(&total, r)
			if string(red) != string(doc) {
				var v any
				if json.Unmarshal(red, &v) == nil {
					copyRes.StructuredContent = v
				}
			}
		}
	}
	return total, &copyRes
}

// merge folds one check's result into a total: the strongest action wins.
func merge(total *guards.Result, r guards.Result) {
	if r.Action.Stronger(total.Action) {
		total.Action, total.Reason = r.Action, r.Reason
	}
	total.Blocked = total.Action == guards.ActionBlock
	total.Findings = append(total.Findings, r.Findings...)
	total.Errors = append(total.Errors, r.Errors...)
	for _, l := range r.Labels {
		if !contains(total.Labels, l) {
			total.Labels = append(total.Labels, l)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// guardUpstreamError passes the text of an error a server answered with through the tool_result
// guards: it is the server's words, and the model reads them like a result.
func guardUpstreamError(ctx context.Context, set *guards.Set, g *Guarding, c *Call, out *Outcome) *Outcome {
	_, span := telemetry.Child(ctx, spanGuardResult)
	r, reason := set.CheckText(ctx, c.Tool.Server, c.Name, out.Reason)
	g.note(c, guards.StageToolResult, r)
	if r.Action == guards.ActionEscalate && span.IsRecording() {
		telemetry.Fail(span, string(KindGuardBlocked)) // an error's text is never held, it is withheld
	}
	endGuardSpan(span, guards.StageToolResult, r)
	switch r.Action {
	case guards.ActionBlock, guards.ActionEscalate:
		return Refuse(KindGuardBlocked, fmt.Sprintf("server %s answered the call to %s with an error whose text was withheld: %s. The call may have run; do not repeat it to see the error.", c.Tool.Server, c.Name, r.Reason))
	case guards.ActionRedact:
		clean := Refuse(out.Kind, reason)
		clean.Unknown = out.Unknown
		if out.RPCError != nil {
			e := *out.RPCError
			_, e.Message = set.CheckText(ctx, c.Tool.Server, c.Name, e.Message)
			e.Data = nil // not screened: left out
			clean.RPCError = &e
		}
		return clean
	}
	return out
}
