package governor

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// PolicyMetrics count policy decisions: enforced and shadow (log_only) decisions by rule and
// effect, rules that could not be evaluated, and decisions not applied to a stop tool.
type PolicyMetrics struct {
	decisions *prometheus.CounterVec
	errors    *prometheus.CounterVec
	ignored   *prometheus.CounterVec
}

// NewPolicyMetrics creates the policy collectors and registers them with reg.
func NewPolicyMetrics(reg prometheus.Registerer) *PolicyMetrics {
	m := &PolicyMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "policy_decisions_total",
			Help:      "Policy decisions by deciding rule (\"default\" when no rule matched), effect and mode (enforce, or log_only for shadow would-be decisions).",
		}, []string{"rule", "effect", "mode"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "policy_rule_errors_total",
			Help:      "Rules that could not be evaluated for a call (missing key, type mix, cost limit); deny and require_approval rules then apply.",
		}, []string{"rule"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "policy_stop_ignored_total",
			Help:      "Enforced deny and require_approval decisions not applied because the call was to a physical server's stop tool, by deciding rule (\"default\" for policies.default) and effect.",
		}, []string{"rule", "effect"}),
	}
	reg.MustRegister(m.decisions, m.errors, m.ignored)
	return m
}

// PolicyInput builds what the rules see of a call; the gateway fills the session and state
// parts it keeps.
type PolicyInput func(c *Call) *policies.Input

// Policy is step 5: every rule is evaluated, and deny > require_approval > allow > default
// decides. A denial returns KindPolicyDenied with the rule's id and reason; require_approval
// holds the call for an operator (§9). Shadow decisions and rule errors are recorded on the call
// for the audit log and counted, and change nothing.
//
// No policy denies a stop tool or holds it for approval: stopping the robot must never wait
// for a person or fail because a rule matched. Such a decision on a stop tool's call is logged
// (warn, with the rule), recorded on the call ("ignored_deny:rule") and counted, and the call
// goes on.
func Policy(engine *policies.Engine, input PolicyInput, approvals *Approvals, metrics *PolicyMetrics, logger *slog.Logger) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			_, span := telemetry.Child(ctx, spanPolicy)
			d := engine.Evaluate(ctx, input(c))
			record(ctx, c, d, metrics, logger)
			if span.IsRecording() {
				span.SetAttributes(telemetry.AttrRule.String(ruleName(d)), telemetry.AttrEffect.String(d.Effect))
			}
			if c.Tool.Stop && (d.Effect == policies.Deny || d.Effect == policies.RequireApproval) {
				ignoreOnStop(ctx, c, d, metrics, logger)
				if span.IsRecording() {
					span.AddEvent("not applied to a stop tool")
				}
				span.End()
				return next.Handle(ctx, c)
			}
			switch d.Effect {
			case policies.Deny:
				telemetry.Fail(span, string(KindPolicyDenied))
				span.End()
				return Refuse(KindPolicyDenied, withReason(fmt.Sprintf("policy rule %s denied the call to %s", ruleName(d), c.Name), d.Reason))
			case policies.RequireApproval:
				if approvals == nil {
					telemetry.Fail(span, string(KindApprovalDenied))
					span.End()
					return Refuse(KindApprovalDenied, fmt.Sprintf(
						"policy rule %s requires an operator's approval for %s, and this gateway has no approval channel; the call was not run", ruleName(d), c.Name))
				}
				span.End() // the wait is a span of its own
				if kind, reason := approvals.Request(ctx, c, ruleName(d), d.Reason); kind != "" {
					return Refuse(kind, reason)
				}
				c.Decision = "approved:" + ruleName(d)
				return next.Handle(ctx, c)
			}
			span.End()
			return next.Handle(ctx, c)
		})
	}
}

// ignoreOnStop records that a deny or require_approval decision was not applied to a stop
// tool's call.
func ignoreOnStop(ctx context.Context, c *Call, d policies.Decision, m *PolicyMetrics, logger *slog.Logger) {
	rule := ruleName(d)
	logger.WarnContext(ctx, "policy decision ignored: the tool is its server's stop tool, which no policy denies or holds for approval",
		"rule", rule, "effect", d.Effect, "reason", d.Reason, "tool", c.Name, "server", c.Tool.Server, "call", c.ID)
	c.Decision = "ignored_" + d.Effect + ":" + rule
	if c.Detail == nil {
		c.Detail = map[string]any{}
	}
	c.Detail["policy_ignored"] = fmt.Sprintf("%s is the stop tool of server %s; policy rule %s (%s) is not applied to it",
		c.Name, c.Tool.Server, rule, withReason(d.Effect, d.Reason))
	if m != nil {
		m.ignored.WithLabelValues(rule, d.Effect).Inc()
	}
}

// record notes the decision on the call (for the audit record) and counts it.
func record(ctx context.Context, c *Call, d policies.Decision, m *PolicyMetrics, logger *slog.Logger) {
	c.Decision = d.Effect + ":" + ruleName(d)
	if len(d.Shadow) > 0 || len(d.Errors) > 0 {
		if c.Detail == nil {
			c.Detail = map[string]any{}
		}
		if len(d.Shadow) > 0 {
			c.Detail["shadow"] = d.Shadow
		}
		if len(d.Errors) > 0 {
			c.Detail["rule_errors"] = d.Errors
		}
	}
	for _, e := range d.Errors {
		logger.WarnContext(ctx, "policy rule could not be evaluated", "rule", e.RuleID, "effect", e.Effect, "mode", e.Mode, "tool", c.Name, "call", c.ID, "error", e.Err)
	}
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(ruleName(d), d.Effect, policies.Enforce).Inc()
	for _, s := range d.Shadow {
		m.decisions.WithLabelValues(s.RuleID, s.Effect, policies.LogOnly).Inc()
	}
	for _, e := range d.Errors {
		m.errors.WithLabelValues(e.RuleID).Inc()
	}
}

// withReason ends msg with the rule's reason, or says that the rule gives none
// (reason is optional in a rule).
func withReason(msg, reason string) string {
	if reason == "" {
		return msg + ", the rule gives no reason"
	}
	return msg + ": " + reason
}

func ruleName(d policies.Decision) string {
	if d.RuleID == "" {
		return "default"
	}
	return d.RuleID
}
