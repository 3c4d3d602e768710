package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The end-to-end tests of distributed tracing (docs/operations.md, "Tracing"), against a real
// Jaeger (jaeger_test.go) receiving OTLP from three real processes: the test's MCP client, which
// traces its own step with the OpenTelemetry SDK; the gateway; and a traced upstream server
// (e2e/tracedserver) that continues the trace from the _meta the gateway sends it.

// gatewayService is gateway.name in tracingConfig: the service.name of the gateway's spans.
const gatewayService = "lab-gateway"

// upstreamService is the traced upstream's service.name.
const upstreamService = "traced-upstream"

// tracingConfig: the traced upstream, a policy denying one item, telemetry exporting to Jaeger
// with the audit records as OTLP logs, and the profiler on for the goroutine check.
const tracingConfig = `
gateway: {listen: "{{listen}}", name: ` + gatewayService + `, pprof: true, log_format: json}
servers:
  - name: up
    command: "{{traced}}"
    args: ["-name", "{{marker}}", "-otlp", "{{otlp}}", "-service", "` + upstreamService + `", "-record", "{{dir}}/upstream.jsonl"]
policies:
  default: allow
  rules:
    - id: no-vault
      effect: deny
      when: 'tool == "up__lookup" && args.item == "vault"'
      reason: the vault is off limits
{{telemetry}}`

// tracingTelemetry is the telemetry section of tracingConfig when telemetry is on.
const tracingTelemetry = `
telemetry:
  endpoint: "{{otlp}}"
  audit_logs: true
`

// writeTracingConfig writes tracingConfig with the gateway and the traced upstream exporting to
// otlp, or, when otlp is "", with neither exporting (telemetry off).
func writeTracingConfig(t *testing.T, otlp string) (cfg, addr string) {
	t.Helper()
	yaml := tracingConfig
	if otlp == "" {
		yaml = strings.NewReplacer(`"-otlp", "{{otlp}}", `, "", "{{telemetry}}", "").Replace(yaml)
	} else {
		yaml = strings.ReplaceAll(yaml, "{{telemetry}}", tracingTelemetry)
	}
	return writeConfig(t, strings.NewReplacer("{{traced}}", tracedServerBin(t), "{{otlp}}", otlp).Replace(yaml))
}

// noOTelEnv blanks the OTEL_* variables that would turn the gateway's telemetry on or off from
// the developer's environment, so that the file alone decides.
func noOTelEnv(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(name, "")
	}
}

// TestTracedServerJoinsTheCallersTrace checks the test's own instruments without the gateway:
// the client's span and the traced server's span reach Jaeger as one trace, the server's a
// child of the client's, so that what the gateway test finds is the gateway's doing.
func TestTracedServerJoinsTheCallersTrace(t *testing.T) {
	j := startJaeger(t, "")
	tr := clientTracer(t, j)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.Command(tracedServerBin(t), "-name", marker(t), "-otlp", j.otlpHTTP, "-service", upstreamService)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sc, res, err := tracedCall(t, tr, cs, "lookup", map[string]any{"item": "sponge"})
	if err != nil || res.IsError {
		t.Fatalf("lookup: %v %s", err, mustJSON(res))
	}
	got := j.waitTrace(t, sc.TraceID().String(), "the client's and the server's spans", func(tr *jTrace) bool {
		return tr.find(clientService, "agent step") != nil && tr.find(upstreamService, "tools/call lookup") != nil
	})
	if up := got.find(upstreamService, "tools/call lookup"); up.parent() != sc.SpanID().String() {
		t.Errorf("the traced server's span is not the child of the client's:\n%s", got.outline())
	}
}

// TestTracingThroughTheGateway: one gateway with telemetry on, one Jaeger, and the calls of a
// traced client.
func TestTracingThroughTheGateway(t *testing.T) {
	noOTelEnv(t)
	j := startJaeger(t, "")
	tr := clientTracer(t, j)
	cfg, addr := writeTracingConfig(t, j.otlpHTTP)
	gw := startGateway(t, cfg, addr)
	hdr := &headerTransport{}
	cs := connectWithHeaders(t, addr, hdr)
	upstreamRecord := filepath.Join(cfgDir(cfg), "upstream.jsonl")

	// An argument value that must appear on no span.
	const item = "blue-sponge-7731"
	var okTrace string

	t.Run("one trace from the client through the chain to the upstream", func(t *testing.T) {
		sc, res, err := tracedCall(t, tr, cs, "up__lookup", map[string]any{"item": item})
		if err != nil || res.IsError {
			t.Fatalf("up__lookup: %v %s", err, mustJSON(res))
		}
		okTrace = sc.TraceID().String()
		got := j.waitTrace(t, okTrace, "the client's, the gateway's and the upstream's spans", func(tr *jTrace) bool {
			return tr.find(clientService, "agent step") != nil && tr.find(gatewayService, "tools/call up__lookup") != nil &&
				tr.find(upstreamService, "tools/call lookup") != nil
		})
		client := got.find(clientService, "agent step")
		call := got.find(gatewayService, "tools/call up__lookup")
		if client.parent() != "" || call.parent() != client.SpanID {
			t.Errorf("the gateway's call span is not the child of the client's span:\n%s", got.outline())
		}
		for k, want := range map[string]string{"span.kind": "server", "mcp.method.name": "tools/call", "gen_ai.tool.name": "up__lookup"} {
			if v, _ := call.tag(k); v != want {
				t.Errorf("call span: %s = %q, want %q (%s)", k, v, want, call)
			}
		}
		if call.failed() {
			t.Errorf("a call that succeeded has an Error status: %s", call)
		}
		for _, step := range []string{"validate", "policy", "audit"} {
			if got.child(call.SpanID, step) == nil {
				t.Errorf("no %s step span under the call span:\n%s", step, got.outline())
			}
		}
		if rule, _ := got.child(call.SpanID, "policy").tag("mcp_gateway.policy.rule"); rule != "default" {
			t.Errorf("the policy span of a call no rule matched has rule %q, want default", rule)
		}
		dispatch := got.child(call.SpanID, "tools/call lookup")
		if dispatch == nil || !dispatch.is("span.kind", "client") {
			t.Fatalf("no dispatch span (a client span \"tools/call lookup\") under the call span:\n%s", got.outline())
		}
		up := got.find(upstreamService, "tools/call lookup")
		if up.parent() != dispatch.SpanID {
			t.Errorf("the upstream's span is not the child of the gateway's dispatch span:\n%s", got.outline())
		}
		// The three services, and the trace among the gateway's in Jaeger's search.
		for _, svc := range []string{clientService, gatewayService, upstreamService} {
			if !slices.Contains(j.services(t), svc) {
				t.Errorf("Jaeger's services %v lack %s", j.services(t), svc)
			}
		}
		if !slices.ContainsFunc(j.traces(t, gatewayService), func(tr *jTrace) bool { return tr.TraceID == okTrace }) {
			t.Errorf("searching the traces of %s does not find %s", gatewayService, okTrace)
		}
		for _, s := range got.Spans {
			if strings.Contains(mustJSON(s.Tags)+mustJSON(s.Logs), item) {
				t.Errorf("span %s holds an argument value", s)
			}
		}
		// What the upstream received: the gateway's context, not the client's, and no baggage.
		saw := readUpstreamRecord(t, upstreamRecord)
		if len(saw) != 1 {
			t.Fatalf("the upstream recorded %d calls: %+v", len(saw), saw)
		}
		tp, _ := saw[0].Meta["traceparent"].(string)
		if parts := strings.Split(tp, "-"); len(parts) != 4 || parts[1] != okTrace || parts[2] != dispatch.SpanID {
			t.Errorf("the upstream's _meta.traceparent = %q, want the trace %s and the dispatch span %s", tp, okTrace, dispatch.SpanID)
		}
		if _, ok := saw[0].Meta["baggage"]; ok {
			t.Errorf("the client's baggage was forwarded upstream without telemetry.forward_baggage: %v", saw[0].Meta)
		}
	})

	t.Run("the traceparent header is the parent when _meta has none", func(t *testing.T) {
		traceID, spanID := randomHex(t, 16), randomHex(t, 8)
		hdr.traceparent.Store("00-" + traceID + "-" + spanID + "-01")
		_, env := call(t, cs, "up__lookup", map[string]any{"item": "cup"})
		hdr.traceparent.Store("")
		if env != nil && env["success"] == false {
			t.Fatalf("up__lookup: %v", env)
		}
		got := j.waitTrace(t, traceID, "the gateway's call span", func(tr *jTrace) bool {
			return tr.find(gatewayService, "tools/call up__lookup") != nil
		})
		if call := got.find(gatewayService, "tools/call up__lookup"); call.parent() != spanID {
			t.Errorf("the call span's parent is %q, want the header's span %s:\n%s", call.parent(), spanID, got.outline())
		}
	})

	t.Run("a malformed traceparent is ignored", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": "00-not-a-trace-context"}, Name: "up__lookup",
			Arguments: map[string]any{"item": "fork"}})
		if err != nil || res.IsError {
			t.Fatalf("a call with a malformed traceparent: %v %s", err, mustJSON(res))
		}
	})

	t.Run("refused calls have the failure kind and an Error status", func(t *testing.T) {
		for _, c := range []struct {
			tool, kind, span string
			args             map[string]any
		}{
			{"up__lookup", "policy_denied", "tools/call up__lookup", map[string]any{"item": "vault"}},
			{"up__lookup", "invalid_tool_arguments", "tools/call up__lookup", map[string]any{"item": 7}},
			// A name the catalog does not know is the caller's text: never a span name.
			{"up__no_such_tool", "unknown_tool", "tools/call", map[string]any{}},
		} {
			sc, res, err := tracedCall(t, tr, cs, c.tool, c.args)
			if err == nil && !res.IsError {
				t.Fatalf("%s %v was not refused: %s", c.tool, c.args, mustJSON(res))
			}
			got := j.waitTrace(t, sc.TraceID().String(), "the gateway's call span", func(tr *jTrace) bool {
				return tr.find(gatewayService, c.span) != nil
			})
			call := got.find(gatewayService, c.span)
			if kind, _ := call.tag("error.type"); kind != c.kind || !call.failed() || !call.event("refused") {
				t.Errorf("%s %v: error.type %q, Error status %v, a refused event %v; want %s, true, true: %s", c.tool, c.args, kind, call.failed(), call.event("refused"), c.kind, call)
			}
			if call.parent() != sc.SpanID().String() {
				t.Errorf("%s: the call span is not the client's child:\n%s", c.kind, got.outline())
			}
			// The refusal's JSON log line carries the trace id and the id of a span of it.
			logged := loggedCall(t, gw, c.kind)
			if spanID, _ := logged["span_id"].(string); logged["trace_id"] != sc.TraceID().String() || got.byID(spanID) == nil {
				t.Errorf("%s: the log line has trace_id %v span_id %v, want %s and a span of it: %v", c.kind, logged["trace_id"], logged["span_id"], sc.TraceID(), logged)
			}
			if got.find(upstreamService, "tools/call lookup") != nil {
				t.Errorf("%s: the refused call reached the upstream:\n%s", c.kind, got.outline())
			}
			if c.kind == "policy_denied" {
				policy := got.child(call.SpanID, "policy")
				if policy == nil {
					t.Fatalf("no policy span under the denied call:\n%s", got.outline())
				}
				rule, _ := policy.tag("mcp_gateway.policy.rule")
				effect, _ := policy.tag("mcp_gateway.policy.effect")
				if rule != "no-vault" || effect != "deny" {
					t.Errorf("policy span: rule %q effect %q, want no-vault and deny: %s", rule, effect, policy)
				}
			}
		}
	})

	t.Run("the audit record's trace_id finds the trace", func(t *testing.T) {
		// A call without any trace context: the gateway's span is the root of a new trace.
		const fresh = "green-cup-4410"
		if _, env := call(t, cs, "up__lookup", map[string]any{"item": fresh}); env != nil && env["success"] == false {
			t.Fatalf("up__lookup: %v", env)
		}
		recs := traceAudit(t, cfg)
		var rec, first *traceAuditRecord
		for i := range recs {
			if strings.Contains(string(recs[i].Args), fresh) {
				rec = &recs[i]
			}
			if strings.Contains(string(recs[i].Args), item) {
				first = &recs[i]
			}
		}
		if rec == nil || first == nil {
			t.Fatalf("no audit records of the calls: %s", mustJSON(recs))
		}
		if first.TraceID != okTrace {
			t.Errorf("the traced call's record has trace_id %q, want the client's trace %s", first.TraceID, okTrace)
		}
		if len(rec.TraceID) != 32 || len(rec.SpanID) != 16 {
			t.Fatalf("the record has trace_id %q span_id %q", rec.TraceID, rec.SpanID)
		}
		got := j.waitTrace(t, rec.TraceID, "the record's span", func(tr *jTrace) bool { return tr.byID(rec.SpanID) != nil })
		span := got.byID(rec.SpanID)
		if span.Service != gatewayService || span.OperationName != "tools/call up__lookup" || span.parent() != "" {
			t.Errorf("the record's span is %s, want the root call span of %s:\n%s", span, gatewayService, got.outline())
		}
		if id, _ := span.tag("mcp_gateway.call.id"); id != rec.CallID {
			t.Errorf("the span's call id %q, the record's %q", id, rec.CallID)
		}
	})

	t.Run("exemplars on the latency histogram carry the trace id", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
			t.Fatalf("/metrics asked for OpenMetrics answered %q", ct)
		}
		var ids []string
		for _, line := range lines(string(body), "mcp_gateway_tool_call_duration_seconds_bucket") {
			if _, ex, ok := strings.Cut(line, ` # {`); ok {
				if _, id, ok := strings.Cut(ex, `trace_id="`); ok {
					ids = append(ids, strings.SplitN(id, `"`, 2)[0])
				}
			}
		}
		if len(ids) == 0 {
			t.Fatalf("no exemplar with a trace_id on mcp_gateway_tool_call_duration_seconds:\n%s",
				strings.Join(lines(string(body), "mcp_gateway_tool_call_duration_seconds"), "\n"))
		}
		for _, id := range ids {
			j.waitTrace(t, id, "the exemplar's trace", func(tr *jTrace) bool { return len(tr.Spans) > 0 })
		}
		if plain := getBody(t, "http://"+addr+"/metrics", 200); strings.Contains(plain, "trace_id=") {
			t.Errorf("the Prometheus text format (no Accept) carries exemplars")
		}
	})

	t.Run("audit records reach the collector as OTLP logs, redacted", func(t *testing.T) {
		sc, res, err := tracedCall(t, tr, cs, "up__lookup", map[string]any{"item": "key-box", "api_key": secretValue})
		if err != nil || res.IsError {
			t.Fatalf("up__lookup: %v %s", err, mustJSON(res))
		}
		var rec *traceAuditRecord
		for _, r := range traceAudit(t, cfg) {
			if strings.Contains(string(r.Args), "key-box") {
				rec = &r
			}
		}
		if rec == nil || rec.Hash == "" {
			t.Fatal("no audit record of the call")
		}
		digest := "mcp_gateway.audit.digest: Str(" + rec.Hash + ")"
		waitFor(t, 20*time.Second, "the audit record's digest in Jaeger's debug exporter output", func() bool {
			return strings.Contains(j.out.String(), digest)
		})
		out := j.out.String()
		if !strings.Contains(out, "Trace ID: "+rec.TraceID) || rec.TraceID != sc.TraceID().String() {
			t.Errorf("the log record does not carry the call's trace id %s (the audit record has %q)", sc.TraceID(), rec.TraceID)
		}
		if strings.Contains(out, secretValue) {
			t.Errorf("the collector received a redacted argument value:\n%s", lineWith(out, secretValue))
		}
		if !strings.Contains(out, "[REDACTED]") || !strings.Contains(out, rec.CallID) {
			t.Errorf("the log record does not hold the redacted record (call %s):\n%s", rec.CallID, lineWith(out, rec.Hash))
		}
	})

	t.Run("the exporter's goroutines run", func(t *testing.T) {
		if dump := goroutineDump(t, cfg, addr); !strings.Contains(dump, "go.opentelemetry.io/") {
			t.Errorf("telemetry is on and no goroutine runs OpenTelemetry code: the goroutine check cannot see them")
		}
	})
}

// TestTracingOffRunsNoOTel: with no endpoint anywhere, no goroutine of the gateway runs
// OpenTelemetry code, and a client's trace context goes nowhere: not upstream, not into the
// audit record.
func TestTracingOffRunsNoOTel(t *testing.T) {
	noOTelEnv(t)
	cfg, addr := writeTracingConfig(t, "")
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := "00-" + randomHex(t, 16) + "-" + randomHex(t, 8) + "-01"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"traceparent": tp}, Name: "up__lookup", Arguments: map[string]any{"item": "cup"}})
	if err != nil || res.IsError {
		t.Fatalf("up__lookup: %v %s", err, mustJSON(res))
	}
	// Nor is trace context sent upstream: not the gateway's (it has none), nor the client's.
	if saw := readUpstreamRecord(t, filepath.Join(cfgDir(cfg), "upstream.jsonl")); len(saw) != 1 || saw[0].Meta["traceparent"] != nil {
		t.Errorf("telemetry is off and the upstream got a traceparent: %+v", saw)
	}
	if dump := goroutineDump(t, cfg, addr); strings.Contains(dump, "go.opentelemetry.io/") {
		t.Errorf("telemetry is off and a goroutine runs OpenTelemetry code:\n%s", otelGoroutines(dump))
	}
	for _, r := range traceAudit(t, cfg) {
		if r.TraceID != "" || r.SpanID != "" {
			t.Errorf("telemetry is off and the audit record %d has trace_id %q span_id %q", r.Seq, r.TraceID, r.SpanID)
		}
	}
}

// loggedCall is the gateway's JSON log line of the call refused with kind (the first one).
func loggedCall(t *testing.T, gw *gatewayProc, kind string) map[string]any {
	t.Helper()
	var logged map[string]any
	ok := pollFor(5*time.Second, func() bool {
		for _, line := range lines(gw.stderr.String(), `"msg":"tool call"`) {
			if err := json.Unmarshal([]byte(line), &logged); err == nil && logged["outcome"] == kind {
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no JSON log line of the call refused with %s:\n%s", kind, gw.stderr.String())
	}
	return logged
}

// otelGoroutines are the goroutines of dump with an OpenTelemetry frame.
func otelGoroutines(dump string) string {
	var out []string
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "go.opentelemetry.io/") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
