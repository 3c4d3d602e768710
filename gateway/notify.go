package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// The approval channels announce a pending request with everything a person needs to decide:
// tool, server, arguments (as the audit keeps them: redacted), principal, session, rule and
// reason, and when it expires. A channel that fails returns a *governor.NotifyError naming it;
// the governor logs, audits and counts the failure, and the request stays pending.

// consoleArgsBytes bounds the arguments quoted in a console line; the whole of them (as the
// audit keeps them) is in `approvals list --json`.
const consoleArgsBytes = 1024

// newNotifier is the approval channel the config names; callback is Options.ApprovalCallback.
func newNotifier(cfg *config.Config, logger *slog.Logger, callback func(context.Context, store.Approval) error) (governor.Notifier, error) {
	switch cfg.Approvals.Use {
	case "memory":
		return memoryNotifier{}, nil
	case "callback":
		if callback == nil {
			return nil, errors.New(noCallback(cfg))
		}
		return callbackNotifier{fn: callback}, nil
	case "webhook":
		headers := http.Header{}
		for name, env := range cfg.Approvals.Webhook.HeadersEnv {
			v := os.Getenv(env)
			if v == "" {
				return nil, fmt.Errorf("approvals.webhook.headers_env: %s names %s, which is not set", name, env)
			}
			headers.Set(name, v)
		}
		timeout := time.Duration(cfg.Approvals.Webhook.Timeout)
		if timeout <= 0 {
			timeout = config.DefaultWebhookTimeout // a config built in code
		}
		return &webhookNotifier{url: cfg.Approvals.Webhook.URL, headers: headers, timeout: timeout, client: &http.Client{Timeout: timeout}}, nil
	default:
		return consoleNotifier{log: logger}, nil
	}
}

// CheckApprovals is what of cfg's approvals section the mcp-gateway binary cannot serve, for
// `mcp-gateway check`: approvals.use callback, which only a program that embeds the gateway can
// give (Options.ApprovalCallback). Each problem is one line, "FILE:LINE: …".
func CheckApprovals(cfg *config.Config) []string {
	if cfg.Approvals.Use == "callback" {
		return []string{noCallback(cfg)}
	}
	return nil
}

// noCallback says why approvals.use callback cannot be served without an ApprovalCallback.
func noCallback(cfg *config.Config) string {
	at := cfg.Path
	if cfg.Approvals.UseLine > 0 {
		at = fmt.Sprintf("%s:%d", cfg.Path, cfg.Approvals.UseLine)
	}
	return at + ": approvals.use: callback calls a function of a program that embeds the gateway (gateway.Options.ApprovalCallback), " +
		"and none was given; the mcp-gateway binary has no callback: use memory, console or webhook"
}

// callbackNotifier hands each request to the ApprovalCallback of a program that embeds the
// gateway. The callback runs in a goroutine of its own, so that the call waits for it no
// longer than the request lives: one still running at the expiry (ctx's deadline) has failed.
// It announces: its return value decides nothing. An operator decides through the gateway
// (DecideApproval, the admin API), from any goroutine — the callback's own included, since no
// lock is held while it runs and the call's waiter exists before it is called — and only the
// first answer claims the request.
type callbackNotifier struct {
	fn func(context.Context, store.Approval) error
}

func (n callbackNotifier) Notify(ctx context.Context, a store.Approval) error {
	done := make(chan error, 1) // the callback's goroutine never blocks on it, even after the expiry
	go func() { done <- n.call(ctx, a) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = errors.New("the callback had not returned when the request expired")
	}
	if err != nil {
		return &governor.NotifyError{Channel: "callback", Err: err}
	}
	return nil
}

// call runs the callback, turning a panic into an error.
func (n callbackNotifier) call(ctx context.Context, a store.Approval) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the callback panicked: %v", v)
		}
	}()
	return n.fn(ctx, a)
}

// memoryNotifier announces nothing: requests are seen with `mcp-gateway approvals list` or the
// admin API.
type memoryNotifier struct{}

func (memoryNotifier) Notify(context.Context, store.Approval) error { return nil }

// consoleNotifier announces a request in the gateway's log (stderr), with the commands to
// answer it. The line is written whatever the log level, and a write that fails is reported.
type consoleNotifier struct{ log *slog.Logger }

func (n consoleNotifier) Notify(ctx context.Context, a store.Approval) error {
	who := a.Principal
	if a.Session != "" {
		who += " (session " + a.Session + ")"
	}
	rule := a.Rule
	if a.Reason != "" {
		rule += ": " + a.Reason
	}
	args := store.TruncateString(string(a.Args), consoleArgsBytes)
	msg := fmt.Sprintf("APPROVAL NEEDED: %s wants to call %s on server %s with %s (rule %s). "+
		"Answer with `%s` or `%s` before %s (in %s)",
		who, a.Tool, a.Server, args, rule, pastable.Command("approvals", "approve", a.ID), pastable.Command("approvals", "deny", a.ID, "--reason", "why not"),
		a.Expires.Format(time.RFC3339), time.Until(a.Expires).Round(time.Second))
	r := slog.NewRecord(time.Now(), slog.LevelWarn, msg, 0)
	r.AddAttrs(slog.String("approval", a.ID), slog.String("server", a.Server), slog.String("tool", a.Tool),
		slog.String("principal", a.Principal), slog.String("session", a.Session), slog.String("rule", a.Rule),
		slog.Time("expires", a.Expires))
	// The handler, not the logger: the logger drops the line below the configured level and
	// swallows a write error; an operator's announcement must be written or reported.
	if err := n.log.Handler().Handle(ctx, r); err != nil {
		return &governor.NotifyError{Channel: "console", Err: fmt.Errorf("writing to the log: %w", err)}
	}
	return nil
}

// webhookNotifier POSTs each request as JSON (WebhookBody) within approvals.webhook.timeout.
type webhookNotifier struct {
	url     string
	headers http.Header
	timeout time.Duration
	client  *http.Client
}

// WebhookBody is the JSON body of the approval webhook's POST.
type WebhookBody struct {
	ID        string          `json:"id"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Principal string          `json:"principal"`
	Session   string          `json:"session"`
	Rule      string          `json:"rule"`
	Reason    string          `json:"reason"`
	Args      json.RawMessage `json:"args"` // as the audit keeps them: redacted
	Digest    string          `json:"digest"`
	Created   time.Time       `json:"created"`
	Expires   time.Time       `json:"expires"`
}

func (n *webhookNotifier) Notify(ctx context.Context, a store.Approval) error {
	body, err := json.Marshal(WebhookBody{
		ID: a.ID, Server: a.Server, Tool: a.Tool, Principal: a.Principal, Session: a.Session, Rule: a.Rule,
		Reason: a.Reason, Args: a.Args, Digest: a.Digest, Created: a.Created, Expires: a.Expires,
	})
	if err != nil {
		return &governor.NotifyError{Channel: "webhook", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return &governor.NotifyError{Channel: "webhook", Err: err}
	}
	req.Header = n.headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return &governor.NotifyError{Channel: "webhook", Err: n.cause(ctx, err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return &governor.NotifyError{Channel: "webhook", Err: fmt.Errorf("the webhook answered %s", resp.Status)}
	}
	return nil
}

// cause says why the POST failed without the webhook's URL, which often holds its secret (a
// chat service's incoming-webhook URL does).
func (n *webhookNotifier) cause(ctx context.Context, err error) error {
	var ue *url.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return errors.New("the request expired before the webhook answered")
	case errors.As(err, &ue) && ue.Timeout():
		return fmt.Errorf("the webhook did not answer within %s (approvals.webhook.timeout)", n.timeout)
	case errors.As(err, &ue):
		return ue.Err
	}
	return err
}
