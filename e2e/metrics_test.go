package e2e

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestMetricsShowCallsAndLockouts(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot"]
    physical: true
    call_timeout_sec: 1
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"]
`)
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"robot__get_scene", nil},
		{"cam__get_scene", nil},
		{"cam__get_scene", nil},
		{"no_such_tool", nil},
		{"robot__navigate_to", map[string]any{}},
		{"robot__navigate_to", map[string]any{"target": "zz-argument-value"}}, // not a place: tool_failure
		{"robot__fault", map[string]any{"mode": "hang"}},                      // times out: lockout
		{"robot__get_scene", nil},                                             // refused by the lockout
	} {
		if c.args == nil {
			c.args = map[string]any{}
		}
		call(t, cs, c.tool, c.args)
	}

	m := scrape(t, addr)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcp_gateway_tool_calls_total", []string{"server=robot", "tool=robot__get_scene", "outcome=ok"}, 1},
		{"mcp_gateway_tool_calls_total", []string{"server=cam", "tool=cam__get_scene", "outcome=ok"}, 2},
		{"mcp_gateway_tool_calls_total", []string{"server=(unknown)", "tool=(unknown)", "outcome=unknown_tool"}, 1},
		{"mcp_gateway_tool_calls_total", []string{"server=robot", "tool=robot__navigate_to", "outcome=invalid_tool_arguments"}, 1},
		{"mcp_gateway_tool_calls_total", []string{"server=robot", "tool=robot__navigate_to", "outcome=tool_failure"}, 1},
		{"mcp_gateway_tool_calls_total", []string{"server=robot", "tool=robot__fault", "outcome=mcp_execution_status_unknown"}, 1},
		{"mcp_gateway_tool_calls_total", []string{"server=robot", "tool=robot__get_scene", "outcome=mcp_execution_status_unknown"}, 1},
		{"mcp_gateway_tool_call_duration_seconds_count", []string{"server=robot", "tool=robot__fault"}, 1},
		{"mcp_gateway_tool_call_duration_seconds_bucket", []string{"server=robot", "tool=robot__fault", "le=300"}, 1},
		{"mcp_gateway_tool_call_duration_seconds_bucket", []string{"server=robot", "tool=robot__fault", "le=0.5"}, 0}, // it took the 1s deadline
		{"mcp_gateway_lockout_active", []string{"server=robot"}, 1},
		{"mcp_gateway_lockout_active", []string{"server=cam"}, 0},
		{"mcp_gateway_upstream_up", []string{"server=robot"}, 1},
		{"mcp_gateway_upstream_up", []string{"server=cam"}, 1},
		{"mcp_gateway_upstream_restarts_total", []string{"server=robot"}, 0},
		{"mcp_gateway_audit_available", nil, 1},
	} {
		if got, ok := m.value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found: %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	for _, name := range []string{"mcp_gateway_audit_records_total", "mcp_gateway_audit_write_duration_seconds_count", "go_goroutines", "process_cpu_seconds_total"} {
		if got, ok := m.value(name); !ok || (strings.HasPrefix(name, "mcp_gateway_audit") && got < 1) {
			t.Errorf("%s = %v (found: %v)", name, got, ok)
		}
	}
	if strings.Contains(m.text, "zz-argument-value") {
		t.Error("an argument value became a label: label sets must stay bounded")
	}

	// Metric names and help pass promlint, the way Prometheus's own tooling checks them.
	problems, err := promlint.New(strings.NewReader(m.text)).Lint()
	if err != nil {
		t.Fatalf("promlint cannot parse /metrics: %v", err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "mcp_gateway_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}

	cliOK(t, "unlock", "robot", "--reason", "inspected", "-c", cfg)
	m = scrape(t, addr)
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"mcp_gateway_lockout_active", "server=robot", 0},
		{"mcp_gateway_upstream_up", "server=robot", 1},
		{"mcp_gateway_upstream_restarts_total", "server=robot", 1},
	} {
		if got, ok := m.value(c.name, c.label); !ok || got != c.want {
			t.Errorf("after unlock: %s{%s} = %v (found: %v), want %v", c.name, c.label, got, ok, c.want)
		}
	}
}

// metrics is one scrape of /metrics in the text format.
type metrics struct{ text string }

func scrape(t *testing.T, addr string) metrics {
	t.Helper()
	return metrics{getBody(t, "http://"+addr+"/metrics", 200)}
}

// value finds the sample of name whose labels include every "key=value" of labels.
func (m metrics) value(name string, labels ...string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(m.text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, value := line[:i], line[i+1:]
		if n, _, _ := strings.Cut(series, "{"); n != name {
			continue
		}
		match := true
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			match = match && strings.Contains(series, k+`="`+v+`"`)
		}
		if match {
			f, err := strconv.ParseFloat(value, 64)
			return f, err == nil
		}
	}
	return 0, false
}
