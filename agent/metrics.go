package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
)

// Model request statuses, the status label of mcp_gateway_model_requests_total.
const (
	statusOK      = "ok"
	statusRefused = "refused"
	statusError   = "error"
)

// Metrics are the agent's Prometheus collectors: model requests by provider and status, tokens
// by direction, cost and retries. The provider label is the llm section's provider, one of
// model.Providers, so label sets stay bounded. A nil *Metrics counts nothing.
type Metrics struct {
	provider string
	requests *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	retries  *prometheus.CounterVec
}

// NewMetrics creates the agent's collectors for the model provider and registers them with
// reg, the gateway's registry. Every series of the provider exists from the start, at zero.
func NewMetrics(reg prometheus.Registerer, provider string) *Metrics {
	m := &Metrics{
		provider: provider,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: governor.Namespace,
			Name:      "model_requests_total",
			Help:      "Model requests of the built-in agent by provider and status (ok, refused, error).",
		}, []string{"provider", "status"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: governor.Namespace,
			Name:      "model_tokens_total",
			Help:      "Tokens of the built-in agent's model requests by provider and direction (input, output).",
		}, []string{"provider", "direction"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: governor.Namespace,
			Name:      "model_cost_usd_total",
			Help:      "Cost in US dollars of the built-in agent's model requests (its guards' included): reported by the provider or a gateway's cost header, else priced from llm.prices.",
		}, []string{"provider"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: governor.Namespace,
			Name:      "model_retries_total",
			Help:      "Retries of failed model requests by the built-in agent's transport.",
		}, []string{"provider"}),
	}
	reg.MustRegister(m.requests, m.tokens, m.cost, m.retries)
	for _, s := range []string{statusOK, statusRefused, statusError} {
		m.requests.WithLabelValues(provider, s)
	}
	m.tokens.WithLabelValues(provider, "input")
	m.tokens.WithLabelValues(provider, "output")
	m.cost.WithLabelValues(provider)
	m.retries.WithLabelValues(provider)
	return m
}

// OnRetry counts one retry; it is the model.Settings.OnRetry hook.
func (m *Metrics) OnRetry(int, error) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(m.provider).Inc()
}

// request counts one model request: its status and, when there was an answer, its usage.
func (m *Metrics) request(res *model.Result, err error) {
	if m == nil {
		return
	}
	status := statusOK
	switch {
	case err != nil || res == nil || res.FinishReason == model.FinishError:
		status = statusError
	case res.Refusal:
		status = statusRefused
	}
	m.requests.WithLabelValues(m.provider, status).Inc()
	if res == nil {
		return
	}
	u := res.Usage
	m.tokens.WithLabelValues(m.provider, "input").Add(float64(max(u.InputTokens, 0)))
	m.tokens.WithLabelValues(m.provider, "output").Add(float64(max(u.OutputTokens, 0)))
	m.cost.WithLabelValues(m.provider).Add(max(u.CostUSD, 0))
}
