package gateway

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolStatus is one tool of the catalog as GET /admin/tools reports it: what `mcp-gateway
// check` verifies stop and allow_while_locked overrides against without starting a server.
type ToolStatus struct {
	// Public is the name callers use; Server and Upstream where it lives.
	Public   string `json:"public"`
	Server   string `json:"server"`
	Upstream string `json:"upstream"`
	// Annotations are the hints as the server listed them; left out when it gave none, which
	// MCP reads as not read-only.
	Annotations *mcp.ToolAnnotations `json:"annotations,omitempty"`
	Physical    bool                 `json:"physical"`
	// Stop: the server's stop tool. AllowWhileLocked: granted, callable during a lockout (a
	// refused allow_while_locked is false here).
	Stop             bool `json:"stop"`
	AllowWhileLocked bool `json:"allow_while_locked"`
	Hidden           bool `json:"hidden"`
	Quarantined      bool `json:"quarantined"`
	Evaluated        bool `json:"evaluated"`
	Passthrough      bool `json:"passthrough"`
	// Definition is the tool as MCP clients see it in tools/list (renamed, overrides applied),
	// with MCP's own field names; left out for a hidden tool, which is never listed.
	Definition *mcp.Tool `json:"definition,omitempty"`
}

// ToolStatuses reports every tool the catalog resolves, hidden and quarantined ones included,
// sorted by public name.
func ToolStatuses(cat *Catalog) []ToolStatus {
	out := []ToolStatus{}
	if cat == nil {
		return out
	}
	for _, t := range cat.All() {
		s := ToolStatus{
			Public: t.Public, Server: t.Server, Upstream: t.Upstream, Physical: t.Physical(),
			Stop: t.Stop, AllowWhileLocked: t.AllowWhileLocked, Hidden: t.Hidden, Quarantined: t.Quarantine != "",
			Evaluated: t.Evaluated, Passthrough: t.Passthrough(), Definition: t.Definition,
		}
		if t.UpstreamDefinition != nil {
			s.Annotations = t.UpstreamDefinition.Annotations
		}
		out = append(out, s)
	}
	return out
}

// registerToolRoutes adds GET /admin/tools, the catalog.
func (g *Gateway) registerToolRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/tools", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, ToolStatuses(g.catalog.Load()))
	})
}
