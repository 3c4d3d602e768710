package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// agentApprovalConfig fronts the simulated robot (recording every call it receives) with a rule
// that holds a wait of more than 50 ms for an operator. Argument values under keys containing
// "timeout" are redacted in what the gateway writes, so the wait's length is a value the
// approval request must not show. The scripted model waits once, then answers.
const agentApprovalConfig = `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/calls.jsonl"]
    physical: true
    call_timeout_sec: 10
policies:
  default: allow
  rules:
    - id: long-wait
      effect: require_approval
      when: 'tool == "robot__wait" && args.timeout_sec > 0.05'
      reason: a person decides on holding the cell
audit:
  redact_keys: [timeout]
approvals:
  timeout: 60s
{{approvals}}
llm:
  provider: scripted
  replies:
    - tool_calls: [{name: robot__wait, arguments: {timeout_sec: 0.123456}}]
    - text: The cell was held as asked.
`

// waitValue is the redacted argument value: the robot must get it, no approval output may
// show it.
const waitValue = "0.123456"

// listedApproval is one entry of `approvals list -o json`.
type listedApproval struct {
	ID, Digest, Server, Tool, Principal, Session, Rule, Reason, State string
	DecidedBy                                                         string `json:"decided_by"`
	DecisionReason                                                    string `json:"decision_reason"`
	Args                                                              json.RawMessage
	Created, Expires, Decided                                         time.Time
}

// agentProc is `mcp-gateway agent` running in the background.
type agentProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
}

// startAgent starts `mcp-gateway agent -c cfg` on the task with a transcript beside cfg and
// stops it at the end of the test.
func startAgent(t *testing.T, cfg string, args ...string) *agentProc {
	t.Helper()
	transcript := filepath.Join(filepath.Dir(cfg), "transcript.jsonl")
	cmd := exec.Command(gatewayBin, append([]string{"agent", "-c", cfg, "--task", "hold the cell for a moment", "--transcript", transcript}, args...)...)
	cmd.Env = append(os.Environ(), "MCP_GATEWAY_ADMIN_TOKEN=")
	p := &agentProc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{}), code: -1}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("agent stdout:\n%s\nagent stderr:\n%s", p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// wait waits for the agent to exit and returns its exit code.
func (p *agentProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(within):
		t.Fatalf("the agent did not finish within %s", within)
		return -1
	}
}

// pendingListed waits until `approvals list --json` shows one pending request and returns it.
func pendingListed(t *testing.T, cfg string, agent *agentProc) listedApproval {
	t.Helper()
	var list []listedApproval
	waitFor(t, 20*time.Second, "a pending approval in `approvals list --json`", func() bool {
		select {
		case <-agent.done:
			t.Fatalf("the agent exited (%d) before its call was approved", agent.code)
		default:
		}
		out, _, code := cli(t, "approvals", "list", "--json", "-c", cfg)
		if code != 0 {
			return false
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("approvals list --json: %v\n%s", err, out)
		}
		return len(list) == 1
	})
	return list[0]
}

// compactJSON is raw on one line.
func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkListed checks every field an operator decides on, and that the redacted value is not
// among them.
func checkListed(t *testing.T, a listedApproval) {
	t.Helper()
	if !approvalID.MatchString(a.ID) || a.State != "pending" || a.Server != "robot" || a.Tool != "robot__wait" ||
		a.Principal != "agent" || !strings.HasPrefix(a.Session, "agent-") || a.Rule != "long-wait" ||
		a.Reason != "a person decides on holding the cell" || !hexDigest.MatchString(a.Digest) {
		t.Errorf("listed request = %+v", a)
	}
	if got := compactJSON(t, a.Args); got != `{"timeout_sec":"[REDACTED]"}` {
		t.Errorf("listed arguments = %s, want them as the audit keeps them", got)
	}
	if d := a.Expires.Sub(a.Created); d != 60*time.Second || time.Until(a.Expires) <= 0 {
		t.Errorf("created %s, expires %s: want a minute later, in the future", a.Created, a.Expires)
	}
}

// The scripted run's wait is held for an operator, who sees everything needed to decide (with
// the wait's length redacted) in `approvals list`, and approves it from another process through
// the agent's admin API; the call reaches the robot once and the run completes. Prometheus can
// scrape the run's model metrics meanwhile.
func TestAgentApprovalAnsweredFromAnotherProcess(t *testing.T) {
	cfg, addr := writeConfig(t, strings.ReplaceAll(agentApprovalConfig, "{{approvals}}", "  use: console"))
	record := filepath.Join(cfgDir(cfg), "calls.jsonl")
	agent := startAgent(t, cfg)
	a := pendingListed(t, cfg, agent)
	checkListed(t, a)
	if b, _ := os.ReadFile(record); strings.Contains(string(b), `"wait"`) {
		t.Fatal("a call waiting for approval reached the robot")
	}
	table, _ := cliOK(t, "approvals", "list", "-c", cfg)
	for _, want := range []string{a.ID, "pending", "agent-", "robot__wait", "long-wait", `{"timeout_sec":"[REDACTED]"}`} {
		if !strings.Contains(table, want) {
			t.Errorf("approvals list lacks %s:\n%s", want, table)
		}
	}
	var console string
	for _, line := range lines(agent.stderr.String(), "APPROVAL NEEDED") {
		console = line
	}
	if !strings.Contains(console, a.ID) || !strings.Contains(console, "robot__wait") || !strings.Contains(console, "[REDACTED]") ||
		!strings.Contains(console, "long-wait") || !strings.Contains(console, a.Session) {
		t.Errorf("console line = %q", console)
	}
	for what, text := range map[string]string{"approvals list": table, "the console line": console, "approvals list --json": mustJSON(a)} {
		if strings.Contains(text, waitValue) {
			t.Errorf("%s shows the redacted value %s", what, waitValue)
		}
	}
	metrics := getBody(t, "http://"+addr+"/metrics", 200)
	for _, want := range []string{"mcp_gateway_model_requests_total{", "mcp_gateway_approvals_pending 1", `mcp_gateway_approval_notify_failures_total{channel="console"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the agent's /metrics lack %s", want)
		}
	}
	if code := getStatus(t, "http://"+addr+"/mcp"); code != http.StatusNotFound {
		t.Errorf("/mcp answered %d; the agent serves no MCP", code)
	}

	out, _ := cliOK(t, "approvals", "approve", a.ID, "-c", cfg, "--operator", "alice", "--reason", "the cell is clear")
	if !strings.Contains(out, "approved "+a.ID) {
		t.Errorf("approve printed %q", out)
	}
	if code := agent.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the agent exited %d, want 0 (answered)", code)
	}
	if recorded := readFile(t, record); strings.Count(recorded, `"wait"`) != 1 || !strings.Contains(recorded, waitValue) {
		t.Fatalf("the robot recorded: %s", recorded)
	}
	if !strings.Contains(agent.stdout.String(), "answer: The cell was held as asked.") {
		t.Errorf("the run did not complete:\n%s", agent.stdout.String())
	}
	calls := agentCalls(t, cfg)
	if len(calls) != 1 || calls[0].Outcome != "ok" || calls[0].Decision != "approved:long-wait" || calls[0].Detail["approval"] != a.ID {
		t.Errorf("audited agent calls = %+v", calls)
	}
	approve := findRecord(auditJSONL(t, "-c", cfg, "--type", "operator"), func(r auditRecord) bool { return r.Action == "approve" })
	if approve == nil || approve.Principal != "alice" || approve.Reason != "the cell is clear" || approve.Detail["approval"] != a.ID {
		t.Errorf("operator record of the approval = %+v", approve)
	}
	all, _ := cliOK(t, "approvals", "list", "--json", "--all", "-c", cfg)
	var after []listedApproval
	if err := json.Unmarshal([]byte(all), &after); err != nil || len(after) != 1 || after[0].State != "used" || after[0].DecidedBy != "alice" ||
		after[0].DecisionReason != "the cell is clear" || after[0].Decided.IsZero() {
		t.Errorf("after the run: %v %s", err, all)
	}
}

// getStatus is the HTTP status of GET url.
func getStatus(t *testing.T, url string) int {
	t.Helper()
	code, err := httpGet(url)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// Without a listener nobody can answer, so the held call fails at once — long before the
// approval timeout — with a reason that says how to enable approvals, and is audited.
func TestAgentWithoutListenerRefusesAHeldCallAtOnce(t *testing.T) {
	for _, c := range []struct {
		name, listen string
		flags        []string
		off          string
	}{
		{"flag", `"{{listen}}"`, []string{"--listen", "off"}, "--listen off"},
		{"config", `""`, nil, `gateway.listen is ""`},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.ReplaceAll(agentApprovalConfig, "{{approvals}}", "  use: console")
			text = strings.Replace(text, `listen: "{{listen}}"`, "listen: "+c.listen, 1)
			cfg, addr := writeConfig(t, text)
			start := time.Now()
			agent := startAgent(t, cfg, c.flags...)
			code := agent.wait(t, 30*time.Second)
			took := time.Since(start)
			if took > 20*time.Second {
				t.Errorf("the run took %s; the held call must fail at once, not near the 60s approval timeout", took)
			}
			if code != 0 {
				t.Errorf("the agent exited %d, want 0: the model read the refusal and answered", code)
			}
			events := readTranscript(t, filepath.Join(cfgDir(cfg), "transcript.jsonl"), code, agent.stdout.String()+agent.stderr.String())
			var refused *agentEvent
			for i, ev := range events {
				if ev.Type == "tool" && ev.Tool == "robot__wait" {
					refused = &events[i]
				}
			}
			if refused == nil || refused.Kind != "approval_denied" || !strings.Contains(refused.Reason, "start the gateway with an HTTP listener") ||
				!strings.Contains(refused.Reason, c.off) || !strings.Contains(refused.Reason, "long-wait") {
				t.Fatalf("the held call = %+v", refused)
			}
			if b, _ := os.ReadFile(filepath.Join(cfgDir(cfg), "calls.jsonl")); strings.Contains(string(b), `"wait"`) {
				t.Error("the refused call reached the robot")
			}
			calls := agentCalls(t, cfg)
			if len(calls) != 1 || calls[0].Kind != "approval_denied" || !strings.Contains(calls[0].Reason, "start the gateway with an HTTP listener") {
				t.Errorf("audited agent calls = %+v", calls)
			}
			if out, _ := cliOK(t, "approvals", "list", "--all", "-c", cfg); !strings.Contains(out, "no approval requests") {
				t.Errorf("a request was stored that nobody could answer:\n%s", out)
			}
			if _, err := httpGet("http://" + addr + "/healthz"); err == nil && c.name == "flag" {
				t.Error("something answers on gateway.listen with --listen off")
			}
		})
	}
}

// A webhook that does not answer within approvals.webhook.timeout is a failed delivery: the
// agent counts it and audits it with the channel and the error (and not the webhook's URL, whose
// path is its secret); the request stays pending and is approved as usual. The webhook got the
// request with the arguments redacted.
func TestAgentWebhookTimeoutIsAuditedAndCounted(t *testing.T) {
	var (
		mu   sync.Mutex
		body []byte
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		body = b
		mu.Unlock()
		<-r.Context().Done() // never answers: the gateway gives up and closes the connection
	}))
	defer hook.Close()
	approvals := "  use: webhook\n  webhook:\n    url: " + hook.URL + "/hooks/zz-webhook-secret\n    timeout: 300ms"
	cfg, addr := writeConfig(t, strings.ReplaceAll(agentApprovalConfig, "{{approvals}}", approvals))
	agent := startAgent(t, cfg)
	a := pendingListed(t, cfg, agent)
	checkListed(t, a)
	waitFor(t, 10*time.Second, "the webhook failure counted", func() bool {
		return strings.Contains(getBody(t, "http://"+addr+"/metrics", 200), `mcp_gateway_approval_notify_failures_total{channel="webhook"} 1`)
	})
	cliOK(t, "approvals", "approve", a.ID, "-c", cfg, "--operator", "alice", "--reason", "the cell is clear")
	if code := agent.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the agent exited %d, want 0", code)
	}

	mu.Lock()
	sent := body
	mu.Unlock()
	var got struct {
		ID, Server, Tool, Principal, Session, Rule, Reason, Digest string
		Args                                                       json.RawMessage
		Expires                                                    time.Time
	}
	if err := json.Unmarshal(sent, &got); err != nil {
		t.Fatalf("webhook body %q: %v", sent, err)
	}
	if got.ID != a.ID || got.Server != "robot" || got.Tool != "robot__wait" || got.Principal != "agent" || got.Session != a.Session ||
		got.Rule != "long-wait" || got.Reason != a.Reason || got.Digest != a.Digest || !got.Expires.Equal(a.Expires) ||
		compactJSON(t, got.Args) != `{"timeout_sec":"[REDACTED]"}` || bytes.Contains(sent, []byte(waitValue)) {
		t.Errorf("webhook body = %s", sent)
	}

	recs := auditJSONL(t, "-c", cfg, "--type", "approval")
	if len(recs) != 1 {
		t.Fatalf("approval records = %+v, want the one failed delivery", recs)
	}
	r := recs[0]
	if r.Action != "notify_failed" || r.Tool != "robot__wait" || r.Principal != "agent" || r.Detail["approval"] != a.ID ||
		r.Detail["channel"] != "webhook" || !strings.Contains(mustJSON(r.Detail["error"]), "did not answer within 300ms (approvals.webhook.timeout)") ||
		!strings.Contains(r.Reason, "stays pending") {
		t.Errorf("record of the failed delivery = %+v", r)
	}
	if export := mustJSON(auditJSONL(t, "-c", cfg)); strings.Contains(export, "zz-webhook-secret") {
		t.Error("the audit log holds the webhook's URL")
	}
	if strings.Contains(agent.stderr.String(), "zz-webhook-secret") {
		t.Error("the log holds the webhook's URL")
	}
}

// `serve --stdio` without --listen has no admin API either: a held call fails at once, saying
// to add --listen.
func TestStdioWithoutListenerRefusesAHeldCallAtOnce(t *testing.T) {
	cfg, _ := writeConfig(t, withTimeout("60s"))
	cs, _ := connectStdio(t, cfg, nil)
	start := time.Now()
	_, env := call(t, cs, "robot__wait", map[string]any{"timeout_sec": 0.2})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the held call took %s; it must fail at once", took)
	}
	reason, _ := env["reason"].(string)
	if env["kind"] != "approval_denied" || !strings.Contains(reason, "start the gateway with an HTTP listener: add --listen HOST:PORT") ||
		!strings.Contains(reason, "long-wait") {
		t.Fatalf("held call over stdio: %v", env)
	}
	if b, _ := os.ReadFile(filepath.Join(cfgDir(cfg), "calls.jsonl")); strings.Contains(string(b), `"wait"`) {
		t.Error("the refused call reached the robot")
	}
}

// With gateway.tls, `mcp-gateway agent` serves its admin API and metrics over TLS as serve
// does, so the operator's CLI, which reaches a gateway by gateway.listen and gateway.tls, can
// answer the run's approval; plain HTTP is not served.
func TestAgentServesItsAdminAPIOverTLS(t *testing.T) {
	text := strings.ReplaceAll(agentApprovalConfig, "{{approvals}}", "  use: console")
	text = strings.Replace(text, `gateway: {listen: "{{listen}}"}`,
		`gateway: {listen: "{{listen}}", tls: {cert_file: tls/server.crt, key_file: tls/server.key}}`, 1)
	cfg, addr := writeConfig(t, text)
	ca := newPKI(t, "agent test CA")
	ca.writeServerCert(t, cfgDir(cfg))
	agent := startAgent(t, cfg)
	a := pendingListed(t, cfg, agent)
	if !strings.Contains(agent.stderr.String(), "https://"+addr) {
		t.Errorf("the agent does not name its admin API as https://%s:\n%s", addr, agent.stderr.String())
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to the TLS listener answered 200: %s", body)
		}
	}
	hc := httpsClient(tlsClientConfig(ca, nil), "")
	resp, err := hc.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET https://%s/metrics: %v", addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET https://%s/metrics: %d", addr, resp.StatusCode)
	}
	if out, _ := cliOK(t, "approvals", "approve", a.ID, "-c", cfg, "--operator", "alice"); !strings.Contains(out, "approved "+a.ID) {
		t.Errorf("approve printed %q", out)
	}
	if code := agent.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the agent exited %d, want 0 (answered)", code)
	}
}
