package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// newNotifier is the approval channel the config names.
func newNotifier(cfg config.Approvals, logger *slog.Logger) (governor.Notifier, error) {
	switch cfg.Use {
	case "memory":
		return memoryNotifier{}, nil
	case "webhook":
		headers := http.Header{}
		for name, env := range cfg.Webhook.HeadersEnv {
			v := os.Getenv(env)
			if v == "" {
				return nil, fmt.Errorf("approvals.webhook.headers_env: %s names %s, which is not set", name, env)
			}
			headers.Set(name, v)
		}
		return &webhookNotifier{url: cfg.Webhook.URL, headers: headers, client: &http.Client{Timeout: 10 * time.Second}}, nil
	default:
		return consoleNotifier{log: logger}, nil
	}
}

// memoryNotifier announces nothing: requests are seen with `mcp-gateway approvals list` or the
// admin API.
type memoryNotifier struct{}

func (memoryNotifier) Notify(context.Context, store.Approval) error { return nil }

// consoleNotifier announces a request in the gateway's log, with the commands to answer it.
type consoleNotifier struct{ log *slog.Logger }

func (n consoleNotifier) Notify(_ context.Context, a store.Approval) error {
	n.log.Warn(fmt.Sprintf("APPROVAL NEEDED: %s wants to call %s (rule %s: %s). Answer with `mcp-gateway approvals approve %s` or `mcp-gateway approvals deny %s --reason ...` before %s",
		a.Principal, a.Tool, a.Rule, a.Reason, a.ID, a.ID, a.Expires.Format(time.RFC3339)),
		"approval", a.ID, "tool", a.Tool, "rule", a.Rule)
	return nil
}

// webhookNotifier POSTs each request as JSON. Arguments are left out: a chat channel is not
// the place for them; the operator sees them with `approvals list`.
type webhookNotifier struct {
	url     string
	headers http.Header
	client  *http.Client
}

func (n *webhookNotifier) Notify(ctx context.Context, a store.Approval) error {
	body, err := json.Marshal(map[string]any{
		"id": a.ID, "server": a.Server, "tool": a.Tool, "principal": a.Principal, "rule": a.Rule,
		"reason": a.Reason, "created": a.Created, "expires": a.Expires, "digest": a.Digest,
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = n.headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("approval webhook: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("approval webhook answered %s", resp.Status)
	}
	return nil
}
