package gateway

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// What the operator console (package console) needs of a gateway. The console is a handler of
// its own, mounted here; it acts only through the methods the admin API uses (Halt, Lock,
// Unlock, DecideApproval, AcceptPins, ReloadFile), so an action from the page is the same
// action, audited the same way, as one from `mcp-gateway`.

// MountConsole serves h at /console and below, on the gateway's HTTP listener (Handler and
// OperatorHandler). Call it before building the HTTP server.
func (g *Gateway) MountConsole(h http.Handler) { g.console = h }

// Authenticate is the principal whose bearer token is token, among creds and the admin token,
// compared as /admin compares them (in constant time, on digests), or, with auth.oidc, the
// principal of the identity provider's access token, with its roles; nil when none is. until
// is when the principal's standing ends: the provider's token's expiry, zero for a static
// token (which stands until the config changes).
func (g *Gateway) Authenticate(ctx context.Context, creds []Credential, token string) (p *Principal, until time.Time) {
	if p := matchToken(withAdminToken(creds, g.opts.AdminToken), token); p != nil {
		return p, time.Time{}
	}
	if g.oidc == nil || strings.Count(token, ".") != 2 {
		return nil, time.Time{}
	}
	ip, err := g.oidc.Verify(ctx, token)
	if err != nil {
		return nil, time.Time{}
	}
	return &Principal{ID: ip.ID, Roles: ip.Roles}, ip.Expiry
}

// DecideApproval approves or denies a pending request on the operator's word, as POST
// /admin/approvals/{id}/approve and /deny do: only one answer can claim it, and the decision is
// audited.
func (g *Gateway) DecideApproval(ctx context.Context, id string, approve bool, operator, reason string) (store.Approval, error) {
	return g.approvals.Decide(ctx, id, approve, operator, reason)
}

// Pins is what GET /admin/pins reports: every pin and what tool_definition guards withhold.
func (g *Gateway) Pins() ([]PinStatus, error) {
	pins, err := g.opts.Store.ListPins("")
	if err != nil {
		return nil, err
	}
	return WithWithheld(PinStatuses(pins), g.withheld.all()), nil
}

// Store is the gateway's state file; nil when it runs without one.
func (g *Gateway) Store() *store.Store { return g.opts.Store }
