package guards

import "github.com/prometheus/client_golang/prometheus"

// namespace prefixes the metrics, as everywhere in the gateway (guards cannot import governor,
// which depends on this package).
const namespace = "mcp_gateway"

// Metrics counts what guards find and how they fail. Labels are guard ids, stages, actions,
// modes and fail modes: all from the configuration, so label sets stay bounded.
type Metrics struct {
	findings *prometheus.CounterVec
	errors   *prometheus.CounterVec
}

// NewMetrics creates the guards' collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "guard_findings_total",
			Help:      "Guard findings by guard id, stage, action and mode (log_only findings changed nothing).",
		}, []string{"guard", "stage", "action", "mode"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "guard_errors_total",
			Help:      "Guards that failed or timed out, by guard id, stage and fail_mode.",
		}, []string{"guard", "stage", "fail_mode"}),
	}
	reg.MustRegister(m.findings, m.errors)
	return m
}

// Observe counts the findings and errors of one check in stage.
func (m *Metrics) Observe(stage Stage, r Result) {
	for _, f := range r.Findings {
		m.findings.WithLabelValues(f.Guard, f.Stage, string(f.Action), f.Mode).Inc()
	}
	for _, e := range r.Errors {
		m.errors.WithLabelValues(e.Guard, string(stage), e.FailMode).Inc()
	}
}
