package gateway

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/governor"
)

// httpMetrics count what the connection bounds (limits.go) did. They carry no labels.
type httpMetrics struct {
	open         prometheus.Gauge
	limit        prometheus.Gauge
	refused      prometheus.Counter
	evicted      prometheus.Counter
	bodyTimeouts prometheus.Counter
}

// httpMetricsFor registers the HTTP bounds' collectors with reg, or takes those already
// registered there, so that every server of one gateway counts into the same series. With a
// nil reg they count for no one.
func httpMetricsFor(reg prometheus.Registerer) *httpMetrics {
	return &httpMetrics{
		open: registered(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: governor.Namespace, Name: "http_connections",
			Help: "HTTP client connections open now.",
		})),
		limit: registered(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: governor.Namespace, Name: "http_connections_limit",
			Help: "Most HTTP client connections open at once: gateway.max_connections, lowered to fit the open-file limit.",
		})),
		refused: registered(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: governor.Namespace, Name: "http_connections_refused_total",
			Help: "HTTP connections answered 503 and closed at the connection limit because every open connection was busy.",
		})),
		evicted: registered(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: governor.Namespace, Name: "http_connections_evicted_total",
			Help: "HTTP connections without a request in progress (idle, or not done sending headers) closed at the connection limit to admit a new one.",
		})),
		bodyTimeouts: registered(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: governor.Namespace, Name: "http_body_timeouts_total",
			Help: "HTTP requests whose body did not arrive within gateway.body_read_timeout; each connection was closed.",
		})),
	}
}

// registered registers c with reg and returns it, or the equal collector reg already holds.
func registered[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
