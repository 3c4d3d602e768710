package main

import (
	"testing"
)

// TestEnvTraceContext checks that the run's trace context is read from TRACEPARENT, TRACESTATE
// and BAGGAGE, the OpenTelemetry environment carriers, and that nothing set gives no header.
func TestEnvTraceContext(t *testing.T) {
	env := map[string]string{
		"TRACEPARENT": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"TRACESTATE":  "vendor=1",
		"traceparent": "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01", // not the variable's name
	}
	h := envTraceContext(func(k string) string { return env[k] })
	if got := h.Get("traceparent"); got != env["TRACEPARENT"] {
		t.Errorf("traceparent %q, want %q", got, env["TRACEPARENT"])
	}
	if got := h.Get("tracestate"); got != "vendor=1" {
		t.Errorf("tracestate %q", got)
	}
	if _, ok := h["Baggage"]; ok {
		t.Errorf("baggage set from an unset variable: %v", h)
	}
	if h := envTraceContext(func(string) string { return "" }); len(h) != 0 {
		t.Errorf("empty environment gave %v", h)
	}
}
