package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// A name typed on the command line that the gateway does not know (a server, a tool, a failure
// kind, an approval id) gets the name it most likely meant, as the config loader does for keys.

// didYouMean is ` (did you mean "x"?)` for the candidate name most likely meant, "" when none is
// close.
func didYouMean(name string, candidates []string) string {
	if m := suggest.Closest(name, candidates); m != "" && m != name {
		return fmt.Sprintf(" (did you mean %q?)", m)
	}
	return ""
}

// serverNames are the servers of the config, in its order.
func serverNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Servers))
	for i, s := range cfg.Servers {
		names[i] = s.Name
	}
	return names
}

// serverHint is "; the config has no server X (did you mean Y?)" for a server the config does not
// name, "" for one it does.
func serverHint(cfg *config.Config, server string) string {
	if cfg.Server(server) != nil {
		return ""
	}
	return fmt.Sprintf("; %s has no server named %q%s", cfg.Path, server, didYouMean(server, serverNames(cfg)))
}

// pinHint is didYouMean for a tool of server that has no pin, among the server's pinned tools
// (their upstream names, as `pins accept SERVER/TOOL` takes them).
func pinHint(ctx context.Context, acc *stateAccess, server, tool string) string {
	var names []string
	if acc.api != nil {
		var list []gateway.PinStatus
		if acc.api.getJSON(ctx, "/admin/pins", &list) != nil {
			return ""
		}
		for _, p := range list {
			if p.Server == server {
				names = append(names, p.Tool)
			}
		}
	} else {
		pins, err := acc.st.ListPins(server)
		if err != nil {
			return ""
		}
		for _, p := range pins {
			names = append(names, p.Tool)
		}
	}
	if slices.Contains(names, tool) {
		return ""
	}
	return didYouMean(tool, names)
}

// approvalHint is didYouMean for an approval id the running gateway does not know, among the
// requests it has; "" for any other error.
func approvalHint(ctx context.Context, api *adminClient, id string, err error) string {
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusNotFound {
		return ""
	}
	var list []store.Approval
	if api.getJSON(ctx, "/admin/approvals?state=all", &list) != nil {
		return ""
	}
	ids := make([]string, len(list))
	for i, a := range list {
		ids[i] = a.ID
	}
	return didYouMean(id, ids)
}

// filterHints says, for a filter that matched no record, which of its names is none the gateway
// knows, and the one it most likely meant. A name it does not know may still be right (a server
// since removed from the config, a kind of an upstream's own), so this is a hint, not an error.
func filterHints(ctx context.Context, cfg *config.Config, acc *stateAccess, f store.AuditFilter) []string {
	var hints []string
	if f.Server != "" && cfg.Server(f.Server) == nil {
		hints = append(hints, fmt.Sprintf("%s has no server named %q%s", cfg.Path, f.Server, didYouMean(f.Server, serverNames(cfg))))
	}
	if f.Tool != "" {
		if names := knownTools(ctx, cfg, acc); len(names) > 0 && !slices.Contains(names, f.Tool) {
			hints = append(hints, fmt.Sprintf("the gateway has no tool named %q%s", f.Tool, didYouMean(f.Tool, names)))
		}
	}
	if f.Kind != "" {
		kinds := make([]string, len(governor.Kinds))
		for i, k := range governor.Kinds {
			kinds[i] = string(k)
		}
		if !slices.Contains(kinds, f.Kind) {
			hints = append(hints, fmt.Sprintf("%q is none of the gateway's failure kinds%s (an upstream's own kinds are kept as it reports them)",
				f.Kind, didYouMean(f.Kind, kinds)))
		}
	}
	return hints
}

// knownTools are the public tool names the gateway knows: the running gateway's catalog, else the
// tools pinned in the state file; none when neither can be read.
func knownTools(ctx context.Context, cfg *config.Config, acc *stateAccess) []string {
	var names []string
	if acc.api != nil {
		var tools []gateway.ToolStatus
		if acc.api.getJSON(ctx, "/admin/tools", &tools) != nil {
			return nil
		}
		for _, t := range tools {
			names = append(names, t.Public)
		}
		return names
	}
	pins, err := acc.st.ListPins("")
	if err != nil {
		return nil
	}
	for _, p := range pins {
		names = append(names, gateway.PublicName(cfg.Gateway.ToolNames, p.Server, p.Tool))
	}
	return names
}
