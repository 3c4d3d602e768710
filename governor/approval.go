package governor

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// Notifier tells operators that a call waits for their approval (SPEC.md §9). It is called after
// the request is stored; an error is logged and the request stays pending, so a failing channel
// never drops a request.
type Notifier interface {
	Notify(ctx context.Context, a store.Approval) error
}

// Approvals routes calls that need an operator's approval: it stores the request, notifies the
// channel, and holds the call until an operator decides or the timeout passes. Approval never
// goes through the MCP client or the model, which could approve themselves.
type Approvals struct {
	store   store.ApprovalStore
	audit   store.AuditLog
	notify  Notifier
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time

	mu      sync.Mutex
	waiters map[string]chan struct{} // request id → closed when an operator decided
}

// NewApprovals holds calls for at most timeout.
func NewApprovals(st store.ApprovalStore, audit store.AuditLog, notify Notifier, timeout time.Duration, logger *slog.Logger) *Approvals {
	return &Approvals{store: st, audit: audit, notify: notify, timeout: timeout, log: logger, now: time.Now, waiters: make(map[string]chan struct{})}
}

// Request asks for approval of exactly this call and waits. It returns "" when the call was
// approved (and the approval consumed, so it runs once), otherwise the failure kind and reason.
func (a *Approvals) Request(ctx context.Context, c *Call, rule, why string) (Kind, string) {
	id, err := newApprovalID()
	if err != nil {
		return KindApprovalDenied, "the gateway could not create an approval request: " + err.Error()
	}
	now := a.now().UTC()
	req := store.Approval{
		ID: id, Digest: CallDigest(c.Tool.Server, c.Tool.Upstream, c.Args),
		Server: c.Tool.Server, Tool: c.Name, Principal: c.Principal, Session: c.Session,
		Rule: rule, Reason: why, Args: c.Args, Created: now, Expires: now.Add(a.timeout),
		State: store.ApprovalPending,
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
		return KindApprovalDenied, fmt.Sprintf("the approval request for %s could not be stored (%v); the call was not run", c.Name, err)
	}
	if err := a.notify.Notify(ctx, req); err != nil {
		a.log.Error("approval channel failed; the request stays pending and can be decided with `mcp-gateway approvals`",
			"approval", id, "tool", c.Name, "error", err)
	}
	timer := time.NewTimer(time.Until(req.Expires))
	defer timer.Stop()
	select {
	case <-wait:
	case <-timer.C:
		return KindApprovalExpired, fmt.Sprintf(
			"nobody approved the call to %s (approval %s, rule %s) within %s, so it was not run. Ask the operator, or try a call that needs no approval.",
			c.Name, id, rule, a.timeout)
	case <-ctx.Done():
		// Nobody waits for the result any more: make sure a late approval cannot run it.
		_, _ = a.store.DecideApproval(id, store.ApprovalDenied, "gateway", "the caller cancelled the call while it waited for approval", a.now())
		return KindCancelled, fmt.Sprintf("the call to %s was cancelled while it waited for approval %s; it was not run", c.Name, id)
	}
	got, _, err := a.store.GetApproval(id)
	if err != nil {
		return KindApprovalDenied, fmt.Sprintf("approval %s could not be read (%v); the call was not run", id, err)
	}
	if got.State == store.ApprovalDenied {
		reason := fmt.Sprintf("operator %s denied the call to %s (approval %s, rule %s)", got.DecidedBy, c.Name, id, rule)
		if got.DecisionReason != "" {
			reason += ": " + got.DecisionReason
		}
		return KindApprovalDenied, reason + ". Do not retry it unchanged."
	}
	if _, err := a.store.ConsumeApproval(id); err != nil {
		return KindApprovalDenied, fmt.Sprintf("approval %s cannot be used (%v); the call was not run", id, err)
	}
	return "", ""
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

// CallDigest identifies one exact call: server, upstream tool and canonical arguments (object
// keys sorted, numbers as written).
func CallDigest(server, tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(canonicalJSON(args))
	return hex.EncodeToString(h.Sum(nil))
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
