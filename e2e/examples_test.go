package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// The monitoring examples (examples/prometheus, examples/grafana) and the systemd unit are
// checked here: structurally in Go always, and with promtool when it is installed (Debian's
// prometheus package has it).

// gatewayMetric is one metric the gateway exports, as README.md's metrics table lists it.
type gatewayMetric struct {
	labels    []string
	histogram bool
}

var gatewayMetrics = map[string]gatewayMetric{
	"mcp_gateway_tool_calls_total":               {labels: []string{"server", "tool", "outcome", "principal"}},
	"mcp_gateway_tool_call_duration_seconds":     {labels: []string{"server", "tool"}, histogram: true},
	"mcp_gateway_lockout_active":                 {labels: []string{"server"}},
	"mcp_gateway_halts_total":                    {labels: []string{"server"}},
	"mcp_gateway_operator_lockouts_total":        {labels: []string{"server"}},
	"mcp_gateway_upstream_up":                    {labels: []string{"server"}},
	"mcp_gateway_upstream_restarts_total":        {labels: []string{"server"}},
	"mcp_gateway_audit_write_duration_seconds":   {histogram: true},
	"mcp_gateway_audit_records_total":            {},
	"mcp_gateway_audit_available":                {},
	"mcp_gateway_upstream_output_errors_total":   {labels: []string{"server", "reason"}},
	"mcp_gateway_http_connections":               {},
	"mcp_gateway_http_connections_limit":         {},
	"mcp_gateway_http_connections_refused_total": {},
	"mcp_gateway_http_connections_evicted_total": {},
	"mcp_gateway_http_body_timeouts_total":       {},
	"mcp_gateway_http_sessions":                  {},
	"mcp_gateway_protocol_refusals_total":        {labels: []string{"reason"}},
	"mcp_gateway_policy_decisions_total":         {labels: []string{"rule", "effect", "mode"}},
	"mcp_gateway_policy_rule_errors_total":       {labels: []string{"rule"}},
	"mcp_gateway_policy_stop_ignored_total":      {labels: []string{"rule", "effect"}},
	"mcp_gateway_approvals_pending":              {},
	"mcp_gateway_rate_limited_total":             {labels: []string{"limit", "mode"}},
	"mcp_gateway_limit_in_flight":                {labels: []string{"limit"}},
	"mcp_gateway_approval_notify_failures_total": {labels: []string{"channel"}},
	"mcp_gateway_guard_findings_total":           {labels: []string{"guard", "stage", "action", "mode"}},
	"mcp_gateway_guard_errors_total":             {labels: []string{"guard", "stage", "fail_mode"}},
	"mcp_gateway_model_requests_total":           {labels: []string{"provider", "status"}},
	"mcp_gateway_model_tokens_total":             {labels: []string{"provider", "direction"}},
	"mcp_gateway_model_cost_usd_total":           {labels: []string{"provider"}},
	"mcp_gateway_model_retries_total":            {labels: []string{"provider"}},
}

// targetLabels are added by Prometheus (job, instance) and by the fleet's relabeling (robot,
// docs/operations.md) to every series.
var targetLabels = []string{"job", "instance", "robot"}

// labelValues are the values of the labels whose values are a closed set.
var labelValues = map[string][]string{
	"action":    {"block", "escalate", "redact"},
	"mode":      {"enforce", "log_only"},
	"effect":    {"allow", "deny", "require_approval"},
	"stage":     {"tool_call", "tool_result", "tool_definition", "upstream_content", "input", "output"},
	"fail_mode": {"open", "closed"},
}

func TestMetricListMatchesTheREADME(t *testing.T) {
	readme := readFile(t, "../README.md")
	inTable := map[string]bool{}
	for _, line := range strings.Split(readme, "\n") {
		if m := regexp.MustCompile("^\\s*\\| `(mcp_gateway_[a-z_]+)` \\|").FindStringSubmatch(line); m != nil {
			inTable[m[1]] = true
		}
	}
	if len(inTable) == 0 {
		t.Fatal("README.md has no metrics table rows (| `mcp_gateway_…` |)")
	}
	for name := range inTable {
		if _, ok := gatewayMetrics[name]; !ok {
			t.Errorf("README.md lists %s, which this test does not know: add it to gatewayMetrics", name)
		}
	}
	for name := range gatewayMetrics {
		if !inTable[name] {
			t.Errorf("%s is not in README.md's metrics table", name)
		}
	}
}

// alertRules is the rule file format, decoded strictly so that a misspelled key fails.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         *string           `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var promDuration = regexp.MustCompile(`^(\d+(ms|s|m|h|d|w|y))+$`)

func TestAlertRules(t *testing.T) {
	const file = "../examples/prometheus/alerts.yml"
	dec := yaml.NewDecoder(bytes.NewReader([]byte(readFile(t, file))))
	dec.KnownFields(true)
	var rules alertRules
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	anchors := docAnchors(t, "../docs/operations.md")

	type found struct {
		expr, forDur, severity string
	}
	alerts := map[string]found{}
	if len(rules.Groups) == 0 {
		t.Fatalf("%s has no groups", file)
	}
	for _, g := range rules.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: a group needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			switch {
			case r.Alert == "":
				t.Errorf("group %s: a rule without alert (only alerting rules belong here): %q", g.Name, r.Expr)
				continue
			case alerts[r.Alert] != found{}:
				t.Errorf("alert %s is defined twice", r.Alert)
			}
			if r.For == nil || !promDuration.MatchString(*r.For) {
				t.Errorf("alert %s: for must be given as a duration such as 1m, 0m for at once", r.Alert)
			}
			if sev := r.Labels["severity"]; sev != "page" && sev != "ticket" {
				t.Errorf("alert %s: labels.severity is %q, want page or ticket", r.Alert, sev)
			}
			for _, key := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[key]) == "" {
					t.Errorf("alert %s: annotations.%s is missing", r.Alert, key)
				}
			}
			if rb := r.Annotations["runbook"]; rb != "" {
				doc, anchor, _ := strings.Cut(rb, "#")
				if doc != "docs/operations.md" || !anchors[anchor] {
					t.Errorf("alert %s: runbook %s is not a heading of docs/operations.md", r.Alert, rb)
				}
			}
			if err := checkPromQL(r.Expr); err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
			}
			f := found{expr: r.Expr, severity: r.Labels["severity"]}
			if r.For != nil {
				f.forDur = *r.For
			}
			alerts[r.Alert] = f
		}
	}

	// The alerts an operator of a robot cell needs (SPEC.md §13, docs/operations.md).
	for _, want := range []struct {
		alert, metric, forDur, severity string
	}{
		{"McpGatewayLockoutActive", "mcp_gateway_lockout_active", "1m", "page"},
		{"McpGatewayUpstreamDown", "mcp_gateway_upstream_up", "2m", "page"},
		{"McpGatewayApprovalWaiting", "mcp_gateway_approvals_pending", "10m", ""},
		{"McpGatewayApprovalChannelFailing", "mcp_gateway_approval_notify_failures_total", "0m", "ticket"},
		{"McpGatewayGuardBlocksSpiking", `mcp_gateway_guard_findings_total{action="block"`, "", ""},
		{"McpGatewayAuditWritesSlow", "mcp_gateway_audit_write_duration_seconds_bucket", "", ""},
		{"McpGatewayAuditUnavailable", "mcp_gateway_audit_available", "0m", "page"},
	} {
		got, ok := alerts[want.alert]
		switch {
		case !ok:
			t.Errorf("alert %s is missing", want.alert)
		case !strings.Contains(got.expr, want.metric):
			t.Errorf("alert %s does not use %s: %s", want.alert, want.metric, got.expr)
		case want.forDur != "" && got.forDur != want.forDur:
			t.Errorf("alert %s: for %s, want %s", want.alert, got.forDur, want.forDur)
		case want.severity != "" && got.severity != want.severity:
			t.Errorf("alert %s: severity %s, want %s", want.alert, got.severity, want.severity)
		}
	}

	promtool(t, "../examples/prometheus", "check", "rules", "alerts.yml")
	promtool(t, "../examples/prometheus", "test", "rules", "alerts_test.yml")
}

func TestGrafanaDashboard(t *testing.T) {
	const file = "../examples/grafana/mcp-gateway.json"
	var dash struct {
		Title  string            `json:"title"`
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readFile(t, file)), &dash); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("%s: the dashboard needs a title and a uid", file)
	}
	type panel struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	ids := map[int]string{}
	var exprs []string
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share the id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if err := checkPromQL(tg.Expr); err != nil {
					t.Errorf("panel %q: %v", p.Title, err)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)

	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		"mcp_gateway_tool_calls_total",
		"histogram_quantile(0.5, sum by (server, le) (rate(mcp_gateway_tool_call_duration_seconds_bucket",
		"histogram_quantile(0.99, sum by (server, le) (rate(mcp_gateway_tool_call_duration_seconds_bucket",
		"mcp_gateway_lockout_active", "mcp_gateway_upstream_up", "mcp_gateway_upstream_restarts_total",
		"mcp_gateway_approvals_pending", "mcp_gateway_guard_findings_total",
		`mcp_gateway_policy_decisions_total{robot=~"$robot", effect="deny"}`,
		"mcp_gateway_audit_write_duration_seconds_bucket",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no panel queries %s", want)
		}
	}

	// promtool has no command to check one expression; it checks them as recording rules, with
	// Grafana's variables replaced.
	if _, err := exec.LookPath("promtool"); err == nil {
		vars := strings.NewReplacer("$__rate_interval", "5m", "$robot", ".*")
		var b strings.Builder
		b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
		for i, e := range exprs {
			fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, strconv.Quote(vars.Replace(e)))
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		promtool(t, dir, "check", "rules", "dashboard.yml")
	}
}

func TestSystemdUnit(t *testing.T) {
	unit := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "../examples/systemd/mcp-gateway.service")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Errorf("not a key=value line: %q", line)
			continue
		}
		unit[k] = append(unit[k], v)
	}
	one := func(k string) string {
		if len(unit[k]) != 1 {
			t.Errorf("%s is set %d times, want once", k, len(unit[k]))
			return ""
		}
		return unit[k][0]
	}
	for k, want := range map[string]string{
		"Type": "simple", "KillSignal": "SIGTERM", "KillMode": "mixed", "Restart": "on-failure",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "StateDirectory": "mcp-gateway",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	if start := one("ExecStart"); !regexp.MustCompile(`^/\S+/mcp-gateway serve -c \S+$`).MatchString(start) {
		t.Errorf("ExecStart=%s, want mcp-gateway serve -c FILE", start)
	}
	if user := one("User"); user == "" || user == "root" {
		t.Errorf("User=%q: the gateway needs a dedicated user", user)
	}
	if rw := one("ReadWritePaths"); !slices.Contains(strings.Fields(rw), "/var/lib/"+one("StateDirectory")) {
		t.Errorf("ReadWritePaths=%s does not name the state directory", rw)
	}
	// systemd must wait out the shutdown grace, then the cancelled calls (10s), the HTTP
	// sessions (5s) and the children (5s), with room to spare (docs/operations.md).
	stop, err := strconv.Atoi(one("TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	if need := config.DefaultShutdownGrace + 30*time.Second; time.Duration(stop)*time.Second < need {
		t.Errorf("TimeoutStopSec=%d: systemd could kill the gateway during a default shutdown (want at least %s)", stop, need)
	}
}

// promtool runs promtool in dir, and fails the test if it fails; without promtool it says so.
func promtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Logf("promtool is not installed; %v checked structurally only", args)
		return
	}
	cmd := exec.Command("promtool", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// docAnchors are the GitHub anchors of the headings of a Markdown file.
func docAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, line := range strings.Split(readFile(t, path), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(title, ""), " ", "-")] = true
	}
	return anchors
}

// PromQL, as far as the checks of checkPromQL need it.
var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers  = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*\{([^}]*)\}`)
	promMatcher   = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*$`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promNumbers   = regexp.MustCompile(`\b\d+(\.\d+)?([eE][+-]?\d+)?\b`)
	promIdents    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promFunctions = []string{"sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "group",
		"rate", "irate", "increase", "delta", "idelta", "histogram_quantile", "abs", "absent", "absent_over_time",
		"clamp_min", "clamp_max", "vector", "scalar", "time", "max_over_time", "min_over_time", "avg_over_time",
		"sum_over_time", "changes", "resets", "round", "ceil", "floor"}
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// checkPromQL checks that expr uses only metrics the gateway exports, with their own labels (or
// the target's) in matchers and groupings, and known values for labels with a closed set.
// Syntax is promtool's job.
func checkPromQL(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return fmt.Errorf("empty expression")
	}
	var problems []string
	used := map[string]bool{}
	labelsOf := func(metric string) []string {
		base := metric
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(metric, suffix); ok && gatewayMetrics[b].histogram {
				base = b
			}
		}
		m, ok := gatewayMetrics[base]
		if !ok {
			return nil
		}
		labels := slices.Concat(m.labels, targetLabels)
		if m.histogram && strings.HasSuffix(metric, "_bucket") {
			labels = append(labels, "le")
		}
		return labels
	}
	known := func(metric string) bool { return labelsOf(metric) != nil }

	for _, m := range promMatchers.FindAllStringSubmatch(expr, -1) {
		metric := m[1]
		if metric == "" || !known(metric) {
			continue // reported below as an unknown metric
		}
		for _, part := range strings.Split(m[2], ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			mm := promMatcher.FindStringSubmatch(part)
			if mm == nil {
				problems = append(problems, fmt.Sprintf("cannot read the matcher %q of %s", strings.TrimSpace(part), metric))
				continue
			}
			label, op, value := mm[1], mm[2], mm[3]
			if !slices.Contains(labelsOf(metric), label) {
				problems = append(problems, fmt.Sprintf("%s has no label %s (it has %v)", metric, label, labelsOf(metric)))
				continue
			}
			if values, closed := labelValues[label]; closed && (op == "=" || op == "!=") {
				if v, _ := strconv.Unquote(value); !slices.Contains(values, v) {
					problems = append(problems, fmt.Sprintf("%s=%s: the gateway never sets %s to that (it uses %v)", label, value, label, values))
				}
			}
		}
	}
	rest := promMatchers.ReplaceAllString(expr, "$1")
	rest = promStrings.ReplaceAllString(rest, "")
	rest = promRanges.ReplaceAllString(rest, "")

	// Metrics first, so that groupings can be checked against the labels they have.
	for _, id := range promIdents.FindAllString(promGrouping.ReplaceAllString(promNumbers.ReplaceAllString(rest, ""), ""), -1) {
		name := strings.TrimSpace(id)
		switch {
		case strings.HasSuffix(name, "("):
			if fn := strings.TrimSpace(strings.TrimSuffix(name, "(")); !slices.Contains(promFunctions, fn) {
				problems = append(problems, fmt.Sprintf("unknown function %s", fn))
			}
		case slices.Contains(promKeywords, strings.ToLower(name)):
		case known(name):
			used[name] = true
		default:
			problems = append(problems, fmt.Sprintf("%s is not a metric the gateway exports", name))
		}
	}
	if len(used) == 0 {
		problems = append(problems, "uses no metric of the gateway")
	}
	for _, g := range promGrouping.FindAllStringSubmatch(rest, -1) {
		for _, label := range strings.Split(g[2], ",") {
			label = strings.TrimSpace(label)
			if label == "" {
				continue
			}
			ok := false
			for metric := range used {
				ok = ok || slices.Contains(labelsOf(metric), label)
			}
			if !ok {
				problems = append(problems, fmt.Sprintf("%s (%s): no metric of the expression has the label %s", g[1], g[2], label))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s:\n  %s", expr, strings.Join(problems, "\n  "))
	}
	return nil
}

func TestCheckPromQLCatchesMistakes(t *testing.T) {
	for expr, want := range map[string]string{
		`mcp_gateway_lockout_active == 1`:                                                "",
		`sum by (robot, le) (rate(mcp_gateway_audit_write_duration_seconds_bucket[5m]))`: "",
		`mcp_gateway_lockouts_active == 1`:                                               "not a metric the gateway exports",
		`up{job="mcp-gateway"} == 0`:                                                     "not a metric the gateway exports",
		`mcp_gateway_guard_findings_total{action="deny"}`:                                "never sets action",
		`mcp_gateway_guard_findings_total{severity="high"}`:                              "has no label severity",
		`sum by (outcome) (mcp_gateway_lockout_active)`:                                  "no metric of the expression has the label outcome",
		`sum by (le) (mcp_gateway_tool_call_duration_seconds_count)`:                     "no metric of the expression has the label le",
		`ratee(mcp_gateway_tool_calls_total[5m])`:                                        "unknown function ratee",
		`1 > 0`: "uses no metric",
	} {
		err := checkPromQL(expr)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", expr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: got %v, want an error saying %q", expr, err, want)
		}
	}
}
