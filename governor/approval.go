package governor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// Notifier tells operators that a call waits for their approval (SPEC.md §9). It is called after
// the request is stored, with a context that ends when the request expires. A failure drops
// nothing: the request stays pending and can be answered with `mcp-gateway approvals`; it is
// logged, audited and counted (mcp_gateway_approval_notify_failures_total).
type Notifier interface {
	Notify(ctx context.Context, a store.Approval) error
}

// NotifyError is a channel's failure to deliver a request. Channel names the channel (console,
// webhook, callback) in the audit record and the metric's label; Err says what failed and holds no
// credential (a webhook's URL is left out of it).
type NotifyError struct {
	Channel string
	Err     error
}

func (e *NotifyError) Error() string { return "approval channel " + e.Channel + ": " + e.Err.Error() }

func (e *NotifyError) Unwrap() error { return e.Err }

// NotifyChannels are the channels that can fail, whose failure counters exist from the start.
var NotifyChannels = []string{"console", "webhook", "callback"}

// ApprovalProgressEvery is how often a call that waits for an operator's approval sends its
// client a progress notification, when the client gave a progress token. It is well under the
// request timeouts of common clients (the TypeScript SDK's 60 s, the MCP Inspector's 10 s), so a
// client that resets its timeout on progress keeps waiting as long as the approval may take.
const ApprovalProgressEvery = 2 * time.Second

// Approvals routes calls that need an operator's approval: it stores the request, notifies the
// channel, and holds the call until an operator decides or the timeout passes, telling a client
// that asked for progress how long it may still wait. A call whose caller leaves meanwhile is
// withdrawn: its request can no longer be answered, so nothing runs for nobody. Approval never
// goes through the MCP client or the model, which could approve themselves.
type Approvals struct {
	store         store.ApprovalStore
	audit         store.AuditLog
	notify        Notifier
	timeout       time.Duration
	progressEvery time.Duration
	log           *slog.Logger
	now           func() time.Time

	// Set before the first Request (RegisterMetrics, Unanswerable).
	failures     *prometheus.CounterVec // by channel; nil counts nothing
	unanswerable string                 // why nobody can answer and how to change that; "" when someone can

	mu      sync.Mutex
	waiters map[string]chan struct{} // request id → closed when an operator decided
}

// NewApprovals holds calls for at most timeout.
func NewApprovals(st store.ApprovalStore, audit store.AuditLog, notify Notifier, timeout time.Duration, logger *slog.Logger) *Approvals {
	return &Approvals{store: st, audit: audit, notify: notify, timeout: timeout, progressEvery: ApprovalProgressEvery,
		log: logger, now: time.Now, waiters: make(map[string]chan struct{})}
}

// RegisterMetrics counts the requests a channel failed to deliver, by channel, in reg
// (mcp_gateway_approval_notify_failures_total). Call it before the first Request.
func (a *Approvals) RegisterMetrics(reg prometheus.Registerer) {
	a.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace,
		Name:      "approval_notify_failures_total",
		Help:      "Approval requests the channel could not deliver (webhook error or timeout, console write failing), by channel; the request stays pending.",
	}, []string{"channel"})
	reg.MustRegister(a.failures)
	for _, ch := range NotifyChannels {
		a.failures.WithLabelValues(ch)
	}
}

// Unanswerable makes every request fail at once, never stored or announced, for a gateway that
// no operator can answer: nothing serves its admin API, so an approval could only expire. how
// says why and how to enable approvals; it ends the reason the caller gets. Call it before the
// first Request.
func (a *Approvals) Unanswerable(how string) { a.unanswerable = how }

// Request asks for approval of exactly this call and waits. It returns "" when the call was
// approved (and the approval consumed, so it runs once), otherwise the failure kind and reason.
//
// While it waits, a client that gave a progress token (c.Progress) is sent a progress
// notification at once and then every ApprovalProgressEvery, naming the request and the time
// left. When ctx ends first (the client cancelled the call, closed its connection or session,
// or the gateway stops), the request is withdrawn and audited, and KindCancelled returned: an
// operator's answer then gets store.ErrWithdrawn and runs nothing.
//
// The request keeps the arguments as the call's audit record does (c.Redact: after the tool_call
// guards and audit redaction; see shownArgs) and a keyed digest of the arguments the call would
// run with.
//
// The wait is the call's "approval wait" span (telemetry on), with the rule and the request's
// id, and an event for how it ended: approved, denied, expired, withdrawn, or refused when no
// request could be made or used. Who decided is left out: an operator's name may be one they
// gave, not a principal of the config; the audit record of the decision has it.
func (a *Approvals) Request(ctx context.Context, c *Call, rule, why string) (Kind, string) {
	_, span := telemetry.Child(ctx, spanApprovalWait)
	kind, reason, end := a.request(ctx, span, c, rule, why)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrRule.String(rule))
		span.AddEvent(end)
		if kind != "" {
			telemetry.Fail(span, string(kind))
		}
	}
	span.End()
	return kind, reason
}

// How an approval wait ended, the event that ends its span.
const (
	approvalApproved  = "approved"
	approvalDenied    = "denied"
	approvalExpired   = "expired"
	approvalWithdrawn = "withdrawn"
	approvalRefused   = "refused" // no request could be made, stored, read or used
)

// request is Request without its span; span gets the request's id.
func (a *Approvals) request(ctx context.Context, span trace.Span, c *Call, rule, why string) (Kind, string, string) {
	if a.unanswerable != "" {
		about := rule
		if why != "" {
			about += ": " + why
		}
		what := "the call to " + c.Name
		if c.Dispatched {
			what = "the result of " + c.Name
		}
		return KindApprovalDenied, fmt.Sprintf("%s needs an operator's approval (rule %s), and no operator can answer one here: %s. %s",
			what, about, a.unanswerable, heldOutcome(c)), approvalRefused
	}
	id, err := newApprovalID()
	if err != nil {
		return KindApprovalDenied, "the gateway could not create an approval request: " + err.Error(), approvalRefused
	}
	start := a.now()
	now := start.UTC()
	req := store.Approval{
		ID: id, Digest: a.digest(c.Tool.Server, c.Tool.Upstream, c.Args),
		Server: c.Tool.Server, Tool: c.Name, Principal: c.Principal, Session: c.Session,
		Rule: rule, Reason: why, Args: shownArgs(ctx, c), Created: now, Expires: now.Add(a.timeout),
		State: store.ApprovalPending,
	}
	if c.Detail == nil {
		c.Detail = map[string]any{}
	}
	c.Detail["approval"] = id // the call's audit record names its request
	if span.IsRecording() {
		span.SetAttributes(attrApprovalID.String(id))
	}
	wait := make(chan struct{})
	a.mu.Lock()
	a.waiters[id] = wait
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.waiters, id)
		a.mu.Unlock()
	}()
	if err := a.store.PutApproval(req); err != nil {
		return KindApprovalDenied, fmt.Sprintf("the approval request for %s could not be stored (%v). %s", c.Name, err, heldOutcome(c)), approvalRefused
	}
	defer a.reportWaiting(ctx, c, req, start)()
	// The announcement goes out even if the caller leaves meanwhile, but never outlives the
	// request it announces.
	nctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), req.Expires)
	err = a.notify.Notify(nctx, req)
	cancel()
	if err != nil {
		a.notifyFailed(ctx, c, req, err)
	}
	timer := time.NewTimer(time.Until(req.Expires))
	defer timer.Stop()
	select {
	case <-wait:
	case <-timer.C:
		return KindApprovalExpired, fmt.Sprintf(
			"nobody approved the call to %s (approval %s, rule %s) within %s. %s Ask the operator, or try a call that needs no approval.",
			c.Name, id, rule, a.timeout, heldOutcome(c)), approvalExpired
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		// Nobody waits for the result any more, even if an answer came as the caller left: the
		// request is withdrawn, so that no answer, late or landed, runs it.
		kind, reason := a.withdraw(ctx, c, req)
		return kind, reason, approvalWithdrawn
	}
	got, _, err := a.store.GetApproval(id)
	if err != nil {
		return KindApprovalDenied, fmt.Sprintf("approval %s could not be read (%v). %s", id, err, heldOutcome(c)), approvalRefused
	}
	if got.State == store.ApprovalDenied {
		reason := fmt.Sprintf("operator %s denied the call to %s (approval %s, rule %s)", got.DecidedBy, c.Name, id, rule)
		if got.DecisionReason != "" {
			reason += ": " + got.DecisionReason
		}
		return KindApprovalDenied, reason + ". Do not retry it unchanged.", approvalDenied
	}
	if _, err := a.store.ConsumeApproval(id); err != nil {
		return KindApprovalDenied, fmt.Sprintf("approval %s cannot be used (%v). %s", id, err, heldOutcome(c)), approvalRefused
	}
	return "", "", approvalApproved
}

// reportWaiting sends c's client progress notifications while c waits for req, which was made
// at start: one at once, then every a.progressEvery, counting the seconds waited up to the
// approval timeout and saying how many are left. They are sent from a goroutine of their own,
// so a slow client never delays the wait; the returned function stops them at once, and what
// the call sends afterwards reaches the client after them (progressStage).
func (a *Approvals) reportWaiting(ctx context.Context, c *Call, req store.Approval, start time.Time) (stop func()) {
	stage := c.progressStage()
	if stage == nil {
		return func() {}
	}
	what := "waiting for an operator's approval " + req.ID
	if c.Dispatched {
		what = "the call ran; its result is waiting for an operator's approval " + req.ID
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(a.progressEvery)
		defer tick.Stop()
		for {
			now := a.now()
			left := max(req.Expires.Sub(now), 0)
			stage.send(&mcp.ProgressNotificationParams{
				Progress: math.Round(now.Sub(start).Seconds()*1000) / 1000,
				Total:    a.timeout.Seconds(),
				Message:  fmt.Sprintf("%s; %d s left", what, int(math.Ceil(left.Seconds()))),
			})
			select {
			case <-tick.C:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		stage.end()
		close(done)
	}
}

// withdraw records that the caller of req left before an operator released the call: the
// request moves to withdrawn (so that no answer can run it) and an audit record says why.
func (a *Approvals) withdraw(ctx context.Context, c *Call, req store.Approval) (Kind, string) {
	why := withdrawCause(ctx)
	if c.Dispatched {
		why += "; the call had run, and its result was withheld"
	} else {
		why += "; nothing was run"
	}
	_, err := a.store.WithdrawApproval(req.ID, why, a.now())
	switch {
	case errors.Is(err, store.ErrExpired):
		// It expired as the caller left: nothing can answer it either.
	case err != nil:
		a.log.ErrorContext(ctx, "approval request not marked withdrawn; no call waits on it, so an answer to it runs nothing",
			"approval", req.ID, "tool", c.Name, "error", err)
	default:
		rec := withTrace(ctx, store.Record{
			Type: store.RecordApproval, Action: "withdraw", Principal: c.Principal, Session: c.Session,
			Server: req.Server, Tool: req.Tool, CallID: c.ID,
			Reason: fmt.Sprintf("approval request %s was withdrawn: %s", req.ID, why),
			Detail: map[string]any{"approval": req.ID, "rule": req.Rule, "cause": why},
		})
		if _, err := a.audit.AppendSync(context.WithoutCancel(ctx), rec); err != nil {
			a.log.ErrorContext(ctx, "audit record of a withdrawn approval request not written", "approval", req.ID, "error", err)
		}
	}
	return KindCancelled, fmt.Sprintf("the call to %s was withdrawn while it waited for approval %s: %s.", c.Name, req.ID, why)
}

// withdrawCause says why a waiting call's context ended, from its cause: the SDK ends a
// request's context with io.EOF when its connection ends (a stdio client closing stdin), and
// without a cause of its own (context.Canceled) on notifications/cancelled or when a 2026-07-28
// request's POST ends; the gateway gives causes that say it all when a client leaves its HTTP
// session or stream and when it shuts down.
func withdrawCause(ctx context.Context) string {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, io.EOF):
		return "the caller's session ended"
	case errors.Is(cause, context.DeadlineExceeded):
		return "the call's deadline passed"
	case cause == nil || errors.Is(cause, context.Canceled):
		return "the caller cancelled it or closed its connection"
	}
	return cause.Error()
}

// heldOutcome says what became of a held call that was not released: one held before dispatch
// did not run; a result a tool_result guard escalated is withheld, and the call itself ran, so
// the model must not repeat a physical action to see it.
func heldOutcome(c *Call) string {
	if c.Dispatched {
		return "The call itself ran and its result is withheld; do not repeat it to see the result."
	}
	return "The call was not run."
}

// notifyFailed records that the channel did not deliver req: logged, counted by channel and
// audited synchronously, so an operator learns from the audit log and the metrics that a call
// waited unannounced. The request itself stays pending.
func (a *Approvals) notifyFailed(ctx context.Context, c *Call, req store.Approval, err error) {
	channel, cause := "unknown", err
	var ne *NotifyError
	if errors.As(err, &ne) {
		channel, cause = ne.Channel, ne.Err
	}
	a.log.ErrorContext(ctx, "approval channel failed; the request stays pending and can be decided with `"+pastable.Command("approvals", "list")+"`",
		"approval", req.ID, "channel", channel, "tool", c.Name, "error", cause)
	if a.failures != nil {
		a.failures.WithLabelValues(channel).Inc()
	}
	rec := withTrace(ctx, store.Record{
		Type: store.RecordApproval, Action: "notify_failed", Principal: c.Principal, Session: c.Session,
		Server: req.Server, Tool: req.Tool, CallID: c.ID,
		Reason: fmt.Sprintf("approval request %s could not be delivered on the %s channel: %v. It stays pending until %s; "+
			"see it with `%s` and answer with `%s` or `%s`.",
			req.ID, channel, cause, req.Expires.Format(time.RFC3339), pastable.Command("approvals", "list"),
			pastable.Command("approvals", "approve", req.ID), pastable.Command("approvals", "deny", req.ID, "--reason", "why not")),
		Detail: map[string]any{"approval": req.ID, "rule": req.Rule, "channel": channel, "error": cause.Error()},
	})
	if _, err := a.audit.AppendSync(context.WithoutCancel(ctx), rec); err != nil {
		a.log.ErrorContext(ctx, "audit record of an undelivered approval request not written", "approval", req.ID, "error", err)
	}
}

// Decide records an operator's answer, audits it synchronously and wakes the waiting call.
// Only one answer can claim a request; a second gets an error saying how it was decided.
func (a *Approvals) Decide(ctx context.Context, id string, approve bool, by, reason string) (store.Approval, error) {
	state, action := store.ApprovalDenied, "deny"
	if approve {
		state, action = store.ApprovalApproved, "approve"
	}
	got, err := a.store.DecideApproval(id, state, by, reason, a.now())
	if err != nil {
		return got, err
	}
	rec := store.Record{Type: store.RecordOperator, Action: action, Principal: by, Server: got.Server, Tool: got.Tool,
		Reason: reason, Detail: map[string]any{"approval": id, "rule": got.Rule, "requested_by": got.Principal, "digest": got.Digest}}
	if _, err := a.audit.AppendSync(context.WithoutCancel(ctx), rec); err != nil {
		a.log.Error("audit record of an approval decision not written", "approval", id, "error", err)
	}
	a.mu.Lock()
	if w, ok := a.waiters[id]; ok {
		close(w)
		delete(a.waiters, id)
	}
	a.mu.Unlock()
	return got, nil
}

// Pending lists the requests waiting for an answer.
func (a *Approvals) Pending() ([]store.Approval, error) {
	return a.store.ListApprovals(store.ApprovalPending)
}

// digest identifies one exact call: server, upstream tool and canonical arguments (object keys
// sorted, numbers as written), keyed with the state file's digest key, so that neither a listing
// nor a webhook's receiver can try values of a redacted argument against it.
func (a *Approvals) digest(server, tool string, args json.RawMessage) string {
	var b bytes.Buffer
	b.WriteString(server)
	b.WriteByte(0)
	b.WriteString(tool)
	b.WriteByte(0)
	b.Write(canonicalJSON(args))
	return a.store.DigestArgs(b.Bytes())
}

// shownArgs is what a request keeps of c's arguments, by the redactor of the config c runs
// under: what the call's audit record keeps (the tool_call guards' redactions, audit
// redact_keys, long values cut). One exception, by design: arguments an escalating guard holds
// are shown as they would run — the other guards' redactions applied, the flagged content not —
// since the operator must see what the guard flagged to decide. A call that never passed an
// audit step (a chain built in code without one) has no redact_keys to apply; its long values
// are still cut.
func shownArgs(ctx context.Context, c *Call) json.RawMessage {
	r := c.Redact
	if r == nil {
		r = NewRedactor(nil)
	}
	if !c.ArgsWithheld {
		return r.Redact(r.kept(ctx, c, c.Args))
	}
	args := c.Args
	if !r.guards.Empty() {
		_, args = r.guards.CheckJSON(ctx, c.Tool.Server, c.Name, c.Args)
	}
	return r.Redact(args)
}

func canonicalJSON(b json.RawMessage) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return b
	}
	out, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return b
	}
	return out
}

func newApprovalID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "apr-" + hex.EncodeToString(b[:]), nil
}
