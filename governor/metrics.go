package governor

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// Namespace prefixes every metric of the gateway.
const Namespace = "mcp_gateway"

// unresolved is the server and tool label of calls to names the catalog does not know; the
// caller's text never becomes a label value, so label sets stay bounded.
const unresolved = "(unknown)"

// Metrics are the chain's Prometheus collectors: calls by server, tool, outcome and principal,
// and call latency. Labels hold catalog names, outcome kinds and principals only — never
// arguments, sessions or error text.
type Metrics struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	// known, when set (BoundPrincipals), are the principals counted under their own label;
	// every other one is counted under other.
	known map[string]bool
	other string
}

// BoundPrincipals counts the calls of every principal not in known under the label other:
// principals that come from an identity provider (auth.oidc) are unbounded in number, and a
// label per person would grow the series without end. Call it before the first call.
func (m *Metrics) BoundPrincipals(known []string, other string) {
	m.known = make(map[string]bool, len(known))
	for _, p := range known {
		m.known[p] = true
	}
	m.other = other
}

// NewMetrics creates the chain's collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "tool_calls_total",
			Help:      "Tool calls by server, public tool name, outcome (ok, tool_failure or a failure kind) and principal.",
		}, []string{"server", "tool", "outcome", "principal"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "tool_call_duration_seconds",
			Help:      "Time from receiving a tool call to its result, refusals included.",
			Buckets:   []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"server", "tool"}),
	}
	reg.MustRegister(m.calls, m.latency)
	return m
}

// Observe is the step that counts every call and its latency. It runs outside every other step
// but Trace, so a traced and sampled call's latency carries its trace id as an exemplar (shown
// when /metrics is scraped in the OpenMetrics format): a spike on a dashboard leads to a trace.
func (m *Metrics) Observe() Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			out := next.Handle(ctx, c)
			server, tool := unresolved, unresolved
			if c.Tool != nil {
				server, tool = c.Tool.Server, c.Tool.Public
			}
			principal := principalLabel(c.Principal)
			if m.known != nil && !m.known[principal] {
				principal = m.other
			}
			m.calls.WithLabelValues(server, tool, out.Label(), principal).Inc()
			observe(ctx, m.latency.WithLabelValues(server, tool), time.Since(c.Start).Seconds())
			return out
		})
	}
}

// principalLabel is the principal as a label value. Principals come from auth.tokens in the
// config, or are one of the gateway's own ("anonymous", "agent", "admin"), so the set is
// bounded (those of auth.oidc are bounded by BoundPrincipals); an empty one is "anonymous".
func principalLabel(p string) string {
	if p == "" {
		return "anonymous"
	}
	return p
}

// observe records v, with the trace id of ctx's span as the exemplar when that span is sampled
// (an exemplar must point at a trace the backend has).
func observe(ctx context.Context, o prometheus.Observer, v float64) {
	if id := telemetry.SampledTraceID(ctx); id != "" {
		if eo, ok := o.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": id})
			return
		}
	}
	o.Observe(v)
}
