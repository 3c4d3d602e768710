package limits

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the limits' collectors: refusals and would-be refusals by limit id, and the calls
// holding a concurrent slot. They are registered once and shared by every limiter a reload
// builds. A nil *Metrics counts nothing.
type Metrics struct {
	limited  *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
}

// NewMetrics registers mcp_gateway_rate_limited_total{limit, mode} (mode enforce: refused;
// log_only: would have been) and mcp_gateway_limit_in_flight{limit} with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mcp_gateway",
			Name:      "rate_limited_total",
			Help:      "Calls refused by a limit (mode enforce), or that a log_only limit would have refused.",
		}, []string{"limit", "mode"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "mcp_gateway",
			Name:      "limit_in_flight",
			Help:      "Calls holding a concurrent slot of a limit.",
		}, []string{"limit"}),
	}
	reg.MustRegister(m.limited, m.inFlight)
	return m
}

// limitMetrics are one limit's collectors, resolved once so that a call costs an atomic add.
type limitMetrics struct {
	limited  prometheus.Counter
	inFlight prometheus.Gauge
}

func (m *Metrics) forLimit(id, mode string) limitMetrics {
	if m == nil {
		return limitMetrics{}
	}
	return limitMetrics{limited: m.limited.WithLabelValues(id, mode), inFlight: m.inFlight.WithLabelValues(id)}
}

// forget drops the series of a limit a reload removed.
func (m *Metrics) forget(id string) {
	if m == nil {
		return
	}
	m.limited.DeletePartialMatch(prometheus.Labels{"limit": id})
	m.inFlight.DeleteLabelValues(id)
}
