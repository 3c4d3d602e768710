package gateway

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// NewRegistry is the gateway's private Prometheus registry, with the Go runtime and process
// collectors. The gateway's own collectors are added by New and AuditMetrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves what reg gathers at /metrics: in the Prometheus text format by default,
// and in the OpenMetrics format to a scraper that asks for it (Accept:
// application/openmetrics-text, as Prometheus does), which is the one that carries exemplars: a
// traced call's latency names its trace (governor.Metrics.Observe). Errors of gathering go to
// log.
func MetricsHandler(reg prometheus.Gatherer, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelError),
		EnableOpenMetrics: true,
	})
}

// AuditMetrics registers the audit writer's commit latency with reg and returns the function to
// give the store (store.Options.OnAuditCommit).
func AuditMetrics(reg prometheus.Registerer) func(records int, took time.Duration) {
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: governor.Namespace,
		Name:      "audit_write_duration_seconds",
		Help:      "Time to commit one group of audit records to the state file.",
		Buckets:   prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	records := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: governor.Namespace,
		Name:      "audit_records_total",
		Help:      "Audit records committed to the state file.",
	})
	reg.MustRegister(latency, records)
	return func(n int, took time.Duration) {
		latency.Observe(took.Seconds())
		records.Add(float64(n))
	}
}

// stateCollector reports the upstreams' and lockouts' state at scrape time, from the same
// sources the gateway uses, so the metrics can never disagree with /readyz or the lockout check.
type stateCollector struct {
	g        *Gateway
	up       *prometheus.Desc
	restarts *prometheus.Desc
	lockout  *prometheus.Desc
	pending  *prometheus.Desc
	audit    *prometheus.Desc
	output   *prometheus.Desc
}

// operatorMetrics count the operators' stops by server. Nil-safe: a gateway without a registry
// counts nothing.
type operatorMetrics struct {
	halts *prometheus.CounterVec
	locks *prometheus.CounterVec
}

func newOperatorMetrics(reg prometheus.Registerer, physical []string) *operatorMetrics {
	m := &operatorMetrics{
		halts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: governor.Namespace,
			Name:      "halts_total",
			Help:      "Halts (emergency stops) that covered the server, a repeated halt included.",
		}, []string{"server"}),
		locks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: governor.Namespace,
			Name:      "operator_lockouts_total",
			Help:      "Lockouts an operator put in force on the server with mcp-gateway lock (a lock of a server already locked out changes nothing and is not counted).",
		}, []string{"server"}),
	}
	reg.MustRegister(m.halts, m.locks)
	for _, s := range physical {
		m.halts.WithLabelValues(s)
		m.locks.WithLabelValues(s)
	}
	return m
}

func (m *operatorMetrics) halt(server string) {
	if m != nil {
		m.halts.WithLabelValues(server).Inc()
	}
}

func (m *operatorMetrics) lock(server string) {
	if m != nil {
		m.locks.WithLabelValues(server).Inc()
	}
}

func registerGatewayMetrics(reg prometheus.Registerer, g *Gateway) {
	g.opMetrics = newOperatorMetrics(reg, PhysicalServers(g.cfg))
	reg.MustRegister(&stateCollector{
		g: g,
		up: prometheus.NewDesc(governor.Namespace+"_upstream_up",
			"1 when the upstream server is running and has listed its tools, 0 otherwise.", []string{"server"}, nil),
		restarts: prometheus.NewDesc(governor.Namespace+"_upstream_restarts_total",
			"Times the upstream server was restarted after a crash, a failed start or an operator reset.", []string{"server"}, nil),
		lockout: prometheus.NewDesc(governor.Namespace+"_lockout_active",
			"1 while physical actions on the server are locked out awaiting an operator, 0 otherwise.", []string{"server"}, nil),
		pending: prometheus.NewDesc(governor.Namespace+"_approvals_pending",
			"Calls waiting for an operator's approval.", nil, nil),
		audit: prometheus.NewDesc(governor.Namespace+"_audit_available",
			"1 while the state file takes writes; 0 while it does not (disk full, I/O error, a write that does not complete) and every call is refused with audit_unavailable.", nil, nil),
		output: prometheus.NewDesc(governor.Namespace+"_upstream_output_errors_total",
			"Messages and lines the upstream server wrote that the gateway refused or skipped: too_large (over max_result_bytes), invalid_utf8, not_jsonrpc, not_json (a stdout line that is not JSON, skipped).",
			[]string{"server", "reason"}, nil),
	})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.restarts
	ch <- c.lockout
	ch <- c.pending
	ch <- c.audit
	ch <- c.output
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.opts.Store
	for _, u := range c.g.ups.All() {
		up := 0.0
		if u.State() == upstream.Ready && u.Tools() != nil {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, u.Name())
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(u.Restarts()), u.Name())
		counts := u.OutputErrors()
		for _, reason := range upstream.OutputReasons {
			ch <- prometheus.MustNewConstMetric(c.output, prometheus.CounterValue, float64(counts[reason]), u.Name(), reason)
		}
		if st != nil {
			locked := 0.0
			if _, ok := st.Lockout(u.Name()); ok {
				locked = 1
			}
			ch <- prometheus.MustNewConstMetric(c.lockout, prometheus.GaugeValue, locked, u.Name())
		}
	}
	if st != nil {
		available := 1.0
		if st.Available() != nil {
			available = 0
		}
		ch <- prometheus.MustNewConstMetric(c.audit, prometheus.GaugeValue, available)
		if pending, err := st.ListApprovals(store.ApprovalPending); err == nil {
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(len(pending)))
		}
	}
}
