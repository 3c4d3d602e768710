package governor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// recordingNotifier remembers notified requests and can fail.
type recordingNotifier struct {
	mu   sync.Mutex
	ids  []string
	got  []store.Approval
	fail bool
	sent chan string
}

func (n *recordingNotifier) Notify(_ context.Context, a store.Approval) error {
	n.mu.Lock()
	n.ids = append(n.ids, a.ID)
	n.got = append(n.got, a)
	n.mu.Unlock()
	if n.sent != nil {
		n.sent <- a.ID
	}
	if n.fail {
		return &NotifyError{Channel: "webhook", Err: errors.New("the webhook did not answer within 2s (approvals.webhook.timeout)")}
	}
	return nil
}

func approvalCall() *Call {
	return &Call{ID: "c1", Name: "arm__pick", Args: json.RawMessage(`{"object":"red_cup"}`), Principal: "planner",
		Tool: &Tool{Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: &config.Server{Name: "arm"}}}
}

func TestApprovalApprovedRunsOnce(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1), fail: true} // a failing channel drops nothing
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	done := make(chan Kind)
	go func() {
		k, _ := a.Request(context.Background(), approvalCall(), "destructive", "needs a person")
		done <- k
	}()
	id := <-n.sent
	pending, _ := a.Pending()
	if len(pending) != 1 || pending[0].ID != id || pending[0].Digest != a.digest("arm", "pick", json.RawMessage(`{ "object" : "red_cup" }`)) {
		t.Fatalf("pending = %+v", pending)
	}
	if _, err := a.Decide(context.Background(), id, true, "alice", "looks safe"); err != nil {
		t.Fatal(err)
	}
	if k := <-done; k != "" {
		t.Fatalf("approved call got %q", k)
	}
	if _, err := a.Decide(context.Background(), id, true, "bob", "again"); !errors.Is(err, store.ErrAlreadyDecided) {
		t.Fatalf("second approve: %v", err)
	}
	if got, _, _ := st.GetApproval(id); got.State != store.ApprovalUsed || got.DecidedBy != "alice" {
		t.Fatalf("after the call: %+v", got)
	}
}

func TestApprovalDeniedAndExpired(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	done := make(chan string)
	go func() {
		k, r := a.Request(context.Background(), approvalCall(), "destructive", "")
		done <- string(k) + "|" + r
	}()
	id := <-n.sent
	if _, err := a.Decide(context.Background(), id, false, "alice", "gripper is being serviced"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if !strings.HasPrefix(got, string(KindApprovalDenied)) || !strings.Contains(got, "gripper is being serviced") || !strings.Contains(got, "alice") {
		t.Fatalf("denied: %s", got)
	}

	short := NewApprovals(st, st.Audit(), &recordingNotifier{}, 50*time.Millisecond, quiet)
	k, reason := short.Request(context.Background(), approvalCall(), "destructive", "")
	if k != KindApprovalExpired || !strings.Contains(reason, "not run") {
		t.Fatalf("expired: %s %s", k, reason)
	}
}

// A call whose caller leaves while it waits is withdrawn, whatever ended its context, and no
// answer can run it: the request says why, and the audit log has a record of it.
func TestApprovalOfACallWhoseCallerLeftIsWithdrawn(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		end       func(cancel context.CancelCauseFunc)
	}{
		{"notifications/cancelled", "the caller cancelled it or closed its connection", func(cancel context.CancelCauseFunc) { cancel(nil) }},
		{"session closed", "the caller's session ended", func(cancel context.CancelCauseFunc) { cancel(io.EOF) }},
		{"gateway stopping", "the gateway is shutting down", func(cancel context.CancelCauseFunc) { cancel(errors.New("the gateway is shutting down")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			n := &recordingNotifier{sent: make(chan string, 1)}
			a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan string)
			go func() { k, r := a.Request(ctx, approvalCall(), "r", ""); done <- string(k) + "|" + r }()
			id := <-n.sent
			tc.end(cancel)
			got := <-done
			if !strings.HasPrefix(got, string(KindCancelled)+"|") || !strings.Contains(got, id) || !strings.Contains(got, tc.why) {
				t.Fatalf("withdrawn call: %s", got)
			}
			req, _, _ := st.GetApproval(id)
			if req.State != store.ApprovalWithdrawn || req.WithdrawReason != tc.why+"; nothing was run" || req.Withdrawn.IsZero() {
				t.Errorf("request = %+v", req)
			}
			_, err := a.Decide(context.Background(), id, true, "alice", "late")
			if !errors.Is(err, store.ErrWithdrawn) || !strings.Contains(err.Error(), "nothing was run") {
				t.Errorf("approving a withdrawn request: %v", err)
			}
			if pending, _ := a.Pending(); len(pending) != 0 {
				t.Errorf("still pending: %+v", pending)
			}
			var recs []store.Record
			_ = st.AuditScan(store.AuditFilter{Type: store.RecordApproval}, func(r store.Record) bool { recs = append(recs, r); return true })
			if len(recs) != 1 || recs[0].Action != "withdraw" || recs[0].Detail["approval"] != id || recs[0].Principal != "planner" ||
				recs[0].CallID != "c1" || !strings.Contains(recs[0].Reason, tc.why) {
				t.Errorf("audit records = %+v", recs)
			}
		})
	}
}

// An approval that lands as the caller leaves runs nothing: the request is withdrawn even so.
func TestApprovalLandingAsTheCallerLeavesRunsNothing(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	call := approvalCall()
	call.Progress = func(*mcp.ProgressNotificationParams) {}
	done := make(chan Kind)
	go func() { k, _ := a.Request(ctx, call, "r", ""); done <- k }()
	id := <-n.sent
	cancel()
	_, _ = a.Decide(context.Background(), id, true, "alice", "just in time")
	if k := <-done; k != KindCancelled {
		t.Fatalf("a call whose caller left got %q", k)
	}
	if req, _, _ := st.GetApproval(id); req.State != store.ApprovalWithdrawn {
		t.Fatalf("request = %+v", req)
	}
}

// A client that gave a progress token hears from a waiting call at once and then every
// interval: progress counting up the seconds waited, out of the timeout, with the request id
// and the time left; nothing after the wait ends. The upstream's progress then counts on from
// there.
func TestApprovalWaitSendsProgress(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 30*time.Second, quiet)
	a.progressEvery = 20 * time.Millisecond
	var mu sync.Mutex
	var got []mcp.ProgressNotificationParams
	call := approvalCall()
	call.Progress = func(p *mcp.ProgressNotificationParams) {
		mu.Lock()
		got = append(got, *p)
		mu.Unlock()
	}
	sent := func() []mcp.ProgressNotificationParams {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	done := make(chan Kind)
	go func() { k, _ := a.Request(context.Background(), call, "r", ""); done <- k }()
	id := <-n.sent
	for deadline := time.Now().Add(5 * time.Second); len(sent()) < 4 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := a.Decide(context.Background(), id, true, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	if k := <-done; k != "" {
		t.Fatalf("approved call got %q", k)
	}
	waited := sent()
	if len(waited) < 4 {
		t.Fatalf("%d progress notifications while waiting, want at least 4", len(waited))
	}
	first := waited[0]
	if first.Progress > 1 || first.Total != 30 || first.Message != "waiting for an operator's approval "+id+"; 30 s left" {
		t.Errorf("first notification = %+v", first)
	}
	for i, p := range waited {
		if i > 0 && p.Progress <= waited[i-1].Progress {
			t.Errorf("progress went from %v to %v", waited[i-1].Progress, p.Progress)
		}
		if p.Total != 30 || !strings.Contains(p.Message, id) || !strings.HasSuffix(p.Message, " s left") {
			t.Errorf("notification %d = %+v", i, p)
		}
	}
	time.Sleep(5 * a.progressEvery)
	if after := sent(); len(after) != len(waited) {
		t.Errorf("%d notifications after the wait ended", len(after)-len(waited))
	}

	upstream := call.progressStage().sender()
	upstream(&mcp.ProgressNotificationParams{Progress: 0.5, Total: 2, Message: "driving"})
	last, moved := waited[len(waited)-1], sent()[len(waited)]
	if math.Abs(moved.Progress-(last.Progress+1.5)) > 1e-9 || math.Abs(moved.Total-(last.Progress+3)) > 1e-9 || moved.Message != "driving" {
		t.Errorf("the upstream's progress after %v arrived as %+v", last.Progress, moved)
	}
}

// A client that does not read its progress does not hold up the call: the wait still ends
// when the operator answers.
func TestApprovalWaitIsNotHeldUpByASlowClient(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 30*time.Second, quiet)
	stuck := make(chan struct{})
	defer close(stuck)
	call := approvalCall()
	call.Progress = func(*mcp.ProgressNotificationParams) { <-stuck }
	done := make(chan Kind)
	go func() { k, _ := a.Request(context.Background(), call, "r", ""); done <- k }()
	id := <-n.sent
	if _, err := a.Decide(context.Background(), id, false, "alice", "no"); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-done:
		if k != KindApprovalDenied {
			t.Fatalf("denied call got %q", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not end while the client's progress was stuck")
	}
}

// TestConcurrentAnswersOneWins races many answers on one request, many times.
func TestConcurrentAnswersOneWins(t *testing.T) {
	st := openStore(t)
	for round := 0; round < 20; round++ {
		n := &recordingNotifier{sent: make(chan string, 1)}
		a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
		done := make(chan Kind)
		go func() { k, _ := a.Request(context.Background(), approvalCall(), "r", ""); done <- k }()
		id := <-n.sent
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if _, err := a.Decide(context.Background(), id, i%2 == 0, "op", "race"); err == nil {
					wins.Add(1)
				}
			}(i)
		}
		wg.Wait()
		<-done
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d answers won", round, wins.Load())
		}
	}
}

// The request shows what the call's audit record keeps — never a value audit.redact_keys or a
// guard removes — and a digest of the real arguments that only the state file's key makes.
func TestApprovalShowsRedactedArgsAndDigestsTheRealOnes(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	engine, err := policies.Compile([]policies.Rule{
		{ID: "drawer-needs-person", Effect: policies.RequireApproval, When: `upstream_tool == "pick"`, Reason: "picking needs a person"},
	}, policies.Options{Default: policies.Allow})
	if err != nil {
		t.Fatal(err)
	}
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: &config.Server{Name: "arm", CallTimeoutSec: 1}, Dispatcher: srv}}
	input := func(c *Call) *policies.Input {
		return &policies.Input{Tool: c.Name, Server: c.Tool.Server, UpstreamTool: c.Tool.Upstream, Args: c.Args}
	}
	redact := NewAuditRedactor(config.Audit{RedactKeys: []string{"password"}})
	h := Chain(Dispatch(), Audit(st, redact, quiet), Resolve(tools), Policy(engine, input, a, nil, quiet))
	const secret = "zq-hunter2-zq"
	args := json.RawMessage(`{"object":"red_cup","password":"` + secret + `"}`)
	done := make(chan *Outcome)
	go func() {
		done <- h.Handle(context.Background(), &Call{ID: "c7", Name: "arm__pick", Args: args, Principal: "planner", Session: "s-42", Start: time.Now()})
	}()
	id := <-n.sent
	pending, err := a.Pending()
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	p := pending[0]
	if string(p.Args) != `{"object":"red_cup","password":"[REDACTED]"}` {
		t.Errorf("stored arguments = %s, want them as the audit keeps them", p.Args)
	}
	if n.got[0].ID != id || string(n.got[0].Args) != string(p.Args) {
		t.Errorf("the channel was given %+v", n.got[0])
	}
	if p.Server != "arm" || p.Tool != "arm__pick" || p.Principal != "planner" || p.Session != "s-42" ||
		p.Rule != "drawer-needs-person" || p.Reason != "picking needs a person" || p.Expires.Sub(p.Created) != 10*time.Second {
		t.Errorf("request = %+v", p)
	}
	if p.Digest != a.digest("arm", "pick", json.RawMessage(`{"password":"`+secret+`", "object":"red_cup"}`)) ||
		p.Digest == a.digest("arm", "pick", p.Args) {
		t.Errorf("the digest is not of the real arguments")
	}
	plain := sha256.Sum256([]byte("arm\x00pick\x00" + `{"object":"red_cup","password":"` + secret + `"}`))
	if p.Digest == hex.EncodeToString(plain[:]) {
		t.Error("the digest is an unkeyed SHA-256, which a reader could try values against")
	}
	if _, err := a.Decide(context.Background(), id, true, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	if out := <-done; out.Kind != "" || srv.calls != 1 {
		t.Fatalf("approved call: %+v", out)
	}
	var rec store.Record
	_ = st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool { rec = r; return true })
	if rec.Detail["approval"] != id || rec.Decision != "approved:drawer-needs-person" {
		t.Errorf("the call's record does not name its approval: %+v", rec)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Error("the redacted value is in the state file")
	}
}

// Arguments a guard escalated are shown as they would run: what the escalating guard flagged
// (the operator decides on it), with the other guards' redactions and redact_keys applied.
func TestApprovalOfEscalatedArgsShowsWhatTheGuardFlagged(t *testing.T) {
	st := openStore(t)
	set, err := guards.Build(guards.StageToolCall, []guards.Spec{
		{ID: "pii", Use: "pii.regex", Action: guards.ActionEscalate},
		{ID: "secrets", Use: "secrets.scan", Action: guards.ActionRedact},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: &config.Server{Name: "arm", CallTimeoutSec: 1}, Dispatcher: srv}}
	redact := NewAuditRedactor(config.Audit{RedactKeys: []string{"pin"}}).WithGuards(set)
	h := Chain(Dispatch(), Audit(st, redact, quiet), Resolve(tools), GuardCall(set, &Guarding{Approvals: a}))
	const key = "AKIAIOSFODNN7EXAMPLE"
	args := `{"note":"mail ops@example.com","key":"` + key + `","pin":"4711"}`
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Outcome)
	go func() {
		done <- h.Handle(ctx, &Call{ID: "c9", Name: "arm__pick", Args: json.RawMessage(args), Principal: "planner", Start: time.Now()})
	}()
	<-n.sent
	pending, _ := a.Pending()
	if len(pending) != 1 {
		t.Fatalf("pending = %+v", pending)
	}
	shown := string(pending[0].Args)
	if !strings.Contains(shown, "ops@example.com") || strings.Contains(shown, key) || strings.Contains(shown, "4711") || !strings.Contains(shown, Redacted) {
		t.Errorf("shown arguments = %s", shown)
	}
	cancel()
	if out := <-done; out.Kind != KindCancelled || srv.calls != 0 {
		t.Fatalf("cancelled call: %+v", out)
	}
}

// With nobody to answer, a call that needs approval is refused at once, saying how to enable
// approvals; nothing is stored or announced.
func TestApprovalWithoutAnApproverIsRefusedAtOnce(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{}
	a := NewApprovals(st, st.Audit(), n, time.Hour, quiet)
	a.Unanswerable("this agent serves no admin API; start the gateway with an HTTP listener: --listen 127.0.0.1:8081")
	start := time.Now()
	k, reason := a.Request(context.Background(), approvalCall(), "destructive", "needs a person")
	if k != KindApprovalDenied || time.Since(start) > time.Second {
		t.Fatalf("got %q after %s", k, time.Since(start))
	}
	for _, want := range []string{"arm__pick", "rule destructive: needs a person", "start the gateway with an HTTP listener: --listen", "not run"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q lacks %q", reason, want)
		}
	}
	if all, _ := st.ListApprovals(""); len(all) != 0 || len(n.ids) != 0 {
		t.Errorf("stored %v, announced %v", all, n.ids)
	}
	// A result a tool_result guard escalated is withheld: the call ran, and the reason says so.
	ran := approvalCall()
	ran.Dispatched = true
	if k, reason := a.Request(context.Background(), ran, "guard", "injection found"); k != KindApprovalDenied ||
		strings.Contains(reason, "not run") || !strings.Contains(reason, "the result of arm__pick needs") || !strings.Contains(reason, "The call itself ran") {
		t.Errorf("held result: %q %s", k, reason)
	}
}

// A channel that fails is logged, audited with the channel and the error, and counted; the
// request stays pending and an operator still answers it.
func TestApprovalNotifyFailureIsAuditedAndCounted(t *testing.T) {
	st := openStore(t)
	reg := prometheus.NewRegistry()
	n := &recordingNotifier{sent: make(chan string, 1), fail: true}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	a.RegisterMetrics(reg)
	done := make(chan Kind)
	go func() { k, _ := a.Request(context.Background(), approvalCall(), "destructive", ""); done <- k }()
	id := <-n.sent
	var rec *store.Record
	for deadline := time.Now().Add(5 * time.Second); rec == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		_ = st.AuditScan(store.AuditFilter{Type: store.RecordApproval}, func(r store.Record) bool { rec = &r; return false })
	}
	if rec == nil {
		t.Fatal("no audit record of the failed delivery")
	}
	if rec.Action != "notify_failed" || rec.Tool != "arm__pick" || rec.Principal != "planner" || rec.CallID != "c1" ||
		rec.Detail["approval"] != id || rec.Detail["channel"] != "webhook" ||
		!strings.Contains(rec.Detail["error"].(string), "did not answer within 2s") || !strings.Contains(rec.Reason, "stays pending") {
		t.Errorf("record = %+v", rec)
	}
	if v := testutil.ToFloat64(a.failures.WithLabelValues("webhook")); v != 1 {
		t.Errorf("webhook failures counted %v, want 1", v)
	}
	if v := testutil.ToFloat64(a.failures.WithLabelValues("console")); v != 0 {
		t.Errorf("console failures counted %v, want 0", v)
	}
	if _, err := a.Decide(context.Background(), id, true, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	if k := <-done; k != "" {
		t.Fatalf("approved call got %q", k)
	}
}
