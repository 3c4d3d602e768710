package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// heldYAML holds every call to move for an operator's approval; {{approvals}} is the approvals
// section (memoryApprovals is the memory channel).
const heldYAML = `servers:
{{servers}}policies:
  default: allow
  rules:
    - {id: move-needs-person, effect: require_approval, when: 'upstream_tool == "move"', reason: a person watches the arm move}
audit:
  redact_keys: [pin]
approvals:
{{approvals}}
`

// heldGateway starts a gateway on heldYAML over the test server robot, with its state file and
// metrics, and returns it with its store and registry.
func heldGateway(t *testing.T, approvals string, opts Options) (*Gateway, *store.Store, *prometheus.Registry) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer("{{exe}}", exe, "{{approvals}}", approvals).Replace(withServers(heldYAML, server("robot", "")))
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "gateway.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	engine, err := CompilePolicies(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Store, opts.Registry, opts.Policies = st, reg, engine
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return g, st, reg
}

// callMove calls robot__move in the background; the outcome arrives on the channel.
func callMove(g *Gateway) <-chan *governor.Outcome {
	done := make(chan *governor.Outcome, 1)
	go func() {
		done <- g.Call(context.Background(), &governor.Call{Name: "robot__move", Args: json.RawMessage(`{"pin":"4711","to":"table"}`), Principal: "planner", Session: "s-1"})
	}()
	return done
}

func outcomeWithin(t *testing.T, done <-chan *governor.Outcome, d time.Duration) *governor.Outcome {
	t.Helper()
	select {
	case out := <-done:
		return out
	case <-time.After(d):
		t.Fatalf("the held call did not end within %s", d)
		return nil
	}
}

// pendingWithin waits for the one pending request.
func pendingWithin(t *testing.T, g *Gateway, d time.Duration) store.Approval {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if list, _ := g.approvals.Pending(); len(list) == 1 {
			return list[0]
		}
	}
	t.Fatal("no pending request")
	return store.Approval{}
}

// approvalRecords are the audit records of approval requests (notify_failed, withdraw).
func approvalRecords(t *testing.T, st *store.Store) []store.Record {
	t.Helper()
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	if err := st.AuditScan(store.AuditFilter{Type: string(store.RecordApproval)}, func(r store.Record) bool {
		recs = append(recs, r)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// okCalls counts the audited calls to robot__move that ran and succeeded.
func okCalls(t *testing.T, st *store.Store) int {
	t.Helper()
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := st.AuditScan(store.AuditFilter{Type: string(store.RecordCall), Tool: "robot__move"}, func(r store.Record) bool {
		if r.Outcome == "ok" {
			n++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// notifyFailures is mcp_gateway_approval_notify_failures_total of channel in reg.
func notifyFailures(t *testing.T, reg *prometheus.Registry, channel string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "mcp_gateway_approval_notify_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "channel" && l.GetValue() == channel {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no mcp_gateway_approval_notify_failures_total{channel=%q}", channel)
	return 0
}

// The callback is called once per request, after it is saved, with the request as the audit
// keeps it; it answers nothing, and the call waits until an operator decides.
func TestApprovalCallbackAnnouncesEachRequestOnce(t *testing.T) {
	var mu sync.Mutex
	var got []store.Approval
	saved := make(chan bool, 4)
	var g *Gateway
	g, st, _ := heldGateway(t, "  use: callback\n  timeout: 1m", Options{ApprovalCallback: func(ctx context.Context, a store.Approval) error {
		_, found, err := g.opts.Store.GetApproval(a.ID)
		saved <- found && err == nil
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline")
		}
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
		return nil
	}})
	done := callMove(g)
	if !<-saved {
		t.Fatal("the callback ran before the request was saved")
	}
	a := pendingWithin(t, g, 5*time.Second)
	select {
	case out := <-done:
		t.Fatalf("the call ended before anyone decided: %+v", out)
	case <-time.After(200 * time.Millisecond):
	}
	mu.Lock()
	if len(got) != 1 || got[0].ID != a.ID || got[0].Tool != "robot__move" || got[0].Rule != "move-needs-person" || got[0].Principal != "planner" ||
		!strings.Contains(string(got[0].Args), `"pin":"[REDACTED]"`) || got[0].Expires.IsZero() {
		t.Errorf("callback got %+v", got)
	}
	mu.Unlock()
	if _, err := g.DecideApproval(context.Background(), a.ID, true, "alice", "watched"); err != nil {
		t.Fatal(err)
	}
	if out := outcomeWithin(t, done, 5*time.Second); !out.Success {
		t.Fatalf("approved call: %+v", out)
	}
	if recs := approvalRecords(t, st); len(recs) != 0 {
		t.Errorf("approval records %+v, want none (nothing failed)", recs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Errorf("callback called %d times", len(got))
	}
}

// An embedder that decides from inside the callback, through the gateway, neither deadlocks nor
// decides twice: the first answer claims the request and releases the call at once, a second
// answer (its own or an operator's) is refused, and an approved call runs once.
func TestApprovalCallbackDecidingInLine(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approve", false: "deny"}[approve], func(t *testing.T) {
			second := make(chan error, 1)
			var g *Gateway
			g, st, _ := heldGateway(t, "  use: callback\n  timeout: 1m", Options{ApprovalCallback: func(ctx context.Context, a store.Approval) error {
				if _, err := g.DecideApproval(ctx, a.ID, approve, "embedder", "decided by the program"); err != nil {
					return err
				}
				_, err := g.DecideApproval(ctx, a.ID, !approve, "embedder", "changed its mind")
				second <- err
				return nil
			}})
			out := outcomeWithin(t, callMove(g), 5*time.Second)
			if err := <-second; err == nil {
				t.Error("a second answer from the callback claimed the request too")
			}
			if approve != out.Success || (!approve && out.Kind != governor.KindApprovalDenied) {
				t.Fatalf("outcome %+v", out)
			}
			list, err := g.approvals.Pending()
			if err != nil || len(list) != 0 {
				t.Errorf("pending %+v, %v", list, err)
			}
			want := 0
			if approve {
				want = 1
			}
			if n := okCalls(t, st); n != want {
				t.Errorf("the call ran %d times, want %d", n, want)
			}
		})
	}
}

// A callback that errors, panics or is still running when the request expires has failed: the
// failure is audited and counted as the callback channel's, and the request stays pending, for
// an operator to decide.
func TestApprovalCallbackFailureKeepsTheRequest(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	for _, c := range []struct {
		name, timeout, want string
		fn                  func(ctx context.Context, a store.Approval) error
	}{
		{"error", "1m", "the pager is down", func(context.Context, store.Approval) error { return errors.New("the pager is down") }},
		{"panic", "1m", "the callback panicked: index out of range", func(context.Context, store.Approval) error { panic("index out of range") }},
		{"stuck", "1s", "the callback had not returned when the request expired", func(context.Context, store.Approval) error { <-release; return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, st, reg := heldGateway(t, "  use: callback\n  timeout: "+c.timeout, Options{ApprovalCallback: c.fn})
			start := time.Now()
			done := callMove(g)
			a := pendingWithin(t, g, 5*time.Second)
			if c.name == "stuck" {
				// Held no longer than approvals.timeout, not as long as the callback runs.
				if out := outcomeWithin(t, done, 5*time.Second); out.Kind != governor.KindApprovalExpired || time.Since(start) > 4*time.Second {
					t.Fatalf("outcome %+v after %s", out, time.Since(start))
				}
			}
			var rec *store.Record
			for deadline := time.Now().Add(5 * time.Second); rec == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				for _, r := range approvalRecords(t, st) {
					if r.Action == "notify_failed" {
						rec = &r
					}
				}
			}
			if rec == nil || rec.Detail["channel"] != "callback" || rec.Detail["approval"] != a.ID || !strings.Contains(rec.Detail["error"].(string), c.want) {
				t.Fatalf("notify_failed record %+v", rec)
			}
			if n := notifyFailures(t, reg, "callback"); n != 1 {
				t.Errorf("callback failures counted %g", n)
			}
			if c.name == "stuck" {
				return
			}
			if list, _ := g.approvals.Pending(); len(list) != 1 {
				t.Fatalf("pending %+v: the request was dropped", list)
			}
			if _, err := g.DecideApproval(context.Background(), a.ID, true, "alice", "paged by phone"); err != nil {
				t.Fatal(err)
			}
			if out := outcomeWithin(t, done, 5*time.Second); !out.Success {
				t.Fatalf("approved call: %+v", out)
			}
		})
	}
}

// approvals.use callback needs a callback: New refuses a config naming it without one, and
// check (CheckApprovals) refuses it, since the mcp-gateway binary has none; both name the line.
func TestApprovalCallbackIsRequired(t *testing.T) {
	exe, _ := os.Executable()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := strings.NewReplacer("{{exe}}", exe, "{{approvals}}", "  use: callback").Replace(withServers(heldYAML, server("robot", "")))
	cfg, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	want := path + ":13: approvals.use: callback calls a function of a program that embeds the gateway (gateway.Options.ApprovalCallback), " +
		"and none was given; the mcp-gateway binary has no callback: use memory, console or webhook"
	if _, err := New(cfg, Options{Store: st}); err == nil || err.Error() != want {
		t.Errorf("New: %v\nwant %s", err, want)
	}
	if got := CheckApprovals(cfg); len(got) != 1 || got[0] != want {
		t.Errorf("CheckApprovals = %q", got)
	}
	g, err := New(cfg, Options{Store: st, ApprovalCallback: func(context.Context, store.Approval) error { return nil }})
	if err != nil {
		t.Fatalf("New with a callback: %v", err)
	}
	g.Close()
	cfg.Approvals.Use = "memory"
	if got := CheckApprovals(cfg); len(got) != 0 {
		t.Errorf("CheckApprovals of memory = %q", got)
	}
}

// A webhook that stalls has failed once approvals.webhook.timeout passes, not sooner and not
// later; the call keeps waiting on the pending request, which an operator then approves.
func TestStalledWebhookTimesOutAndTheRequestStaysPending(t *testing.T) {
	release := make(chan struct{})
	posted := make(chan time.Time, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posted <- time.Now()
		<-release
	}))
	defer hook.Close()
	defer close(release)
	g, st, _ := heldGateway(t, "  use: webhook\n  timeout: 1m\n  webhook:\n    url: "+hook.URL+"/hooks/secret-path-77\n    timeout: 300ms", Options{})
	done := callMove(g)
	a := pendingWithin(t, g, 5*time.Second)
	sent := <-posted
	var rec *store.Record
	for deadline := time.Now().Add(5 * time.Second); rec == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range approvalRecords(t, st) {
			if r.Action == "notify_failed" {
				rec = &r
			}
		}
	}
	if rec == nil {
		t.Fatal("no notify_failed record")
	}
	// The record's time is kept to the millisecond, so it may read a little under the timeout.
	if took := rec.Time.Sub(sent); took < 250*time.Millisecond || took > 2*time.Second {
		t.Errorf("the webhook failed %s after the POST, want about 300ms", took)
	}
	if e, _ := rec.Detail["error"].(string); rec.Detail["channel"] != "webhook" || !strings.Contains(e, "did not answer within 300ms (approvals.webhook.timeout)") || strings.Contains(e, "secret-path-77") {
		t.Errorf("notify_failed record %+v", rec)
	}
	select {
	case out := <-done:
		t.Fatalf("the call ended when the webhook failed: %+v", out)
	default:
	}
	if list, _ := g.approvals.Pending(); len(list) != 1 || list[0].ID != a.ID {
		t.Fatalf("pending %+v", list)
	}
	if _, err := g.DecideApproval(context.Background(), a.ID, true, "alice", "seen in the list"); err != nil {
		t.Fatal(err)
	}
	if out := outcomeWithin(t, done, 5*time.Second); !out.Success {
		t.Fatalf("approved call: %+v", out)
	}
}
