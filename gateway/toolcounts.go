package gateway

import "github.com/mcp-gateway/mcp-gateway/store"

// ToolCounts says what became of the tools one server offers, so that a status never reports
// tools a client cannot see: Offered = Listed + Hidden + Excluded + Quarantined + Blocked +
// Missing.
type ToolCounts struct {
	// Offered is how many tools the server listed; Listed how many of them clients see.
	Offered int `json:"offered"`
	Listed  int `json:"listed"`
	// Hidden (tools.hidden) and Excluded (tools.include/exclude) are left out by the config.
	Hidden   int `json:"hidden"`
	Excluded int `json:"excluded"`
	// Quarantined: the definition changed since it was pinned; an operator must accept it.
	Quarantined int `json:"quarantined"`
	// Blocked: a tool_definition guard withheld it.
	Blocked int `json:"blocked"`
	// Missing: left out because its definition cannot be served (a schema that does not compile,
	// a name the SDK refuses, a bare-name collision); the gateway's log says why.
	Missing int `json:"missing"`
}

// countTools sorts every tool of every source into ToolCounts by server. refused names the
// tools the MCP server would not register.
func countTools(naming string, cat *Catalog, sources []Source, blocked, refused map[string]bool) map[string]ToolCounts {
	out := make(map[string]ToolCounts, len(sources))
	for _, src := range sources {
		var n ToolCounts
		filters := &src.Server.Tools
		for _, up := range src.Tools {
			if up == nil || up.Name == "" {
				continue
			}
			n.Offered++
			public := PublicName(naming, src.Server.Name, up.Name)
			t, ok := cat.byName[public]
			switch {
			case matchAny(filters.Hidden, up.Name):
				n.Hidden++
			case !Included(filters, up.Name):
				n.Excluded++
			case !ok || t.Server != src.Server.Name || t.Upstream != up.Name:
				n.Missing++ // left out, or the name is another server's
			case blocked[public]:
				n.Blocked++
			case t.Quarantine != "":
				n.Quarantined++
			case t.Definition == nil || refused[public]:
				n.Missing++
			default:
				n.Listed++
			}
		}
		out[src.Server.Name] = n
	}
	return out
}

// toolCounts is what the last catalog rebuild made of each server's tools; the zero value for a
// server not yet listed.
func (g *Gateway) toolCounts(server string) ToolCounts {
	if m := g.counts.Load(); m != nil {
		return (*m)[server]
	}
	return ToolCounts{}
}

// Readiness is the body of /readyz. Ready means the gateway serves: every upstream is up and
// has listed its tools, and the state file takes writes. A lockout or a halt does not make it
// unready (a load balancer must not take away the gateway through which an operator inspects
// and unlocks the robot); Lockouts and Halted say so instead. Tools counts what clients see,
// and what they do not and why, so that "ready" never hides an empty tool list.
type Readiness struct {
	Ready   bool     `json:"ready"`
	Waiting []string `json:"waiting"`
	// Tools sums ToolCounts over every server.
	Tools    ToolCounts `json:"tools"`
	Lockouts int        `json:"lockouts"`
	Halted   bool       `json:"halted"`
	// ApprovalsPending is how many calls wait for an operator's approval.
	ApprovalsPending int `json:"approvals_pending"`
}

func (g *Gateway) readiness(ready bool, waiting []string) Readiness {
	r := Readiness{Ready: ready, Waiting: waiting}
	if r.Waiting == nil {
		r.Waiting = []string{}
	}
	if m := g.counts.Load(); m != nil {
		for _, c := range *m {
			r.Tools.Offered += c.Offered
			r.Tools.Listed += c.Listed
			r.Tools.Hidden += c.Hidden
			r.Tools.Excluded += c.Excluded
			r.Tools.Quarantined += c.Quarantined
			r.Tools.Blocked += c.Blocked
			r.Tools.Missing += c.Missing
		}
	}
	if st := g.opts.Store; st != nil {
		for _, l := range st.Lockouts() {
			r.Lockouts++
			r.Halted = r.Halted || l.Halted()
		}
		if pending, err := st.ListApprovals(store.ApprovalPending); err == nil {
			r.ApprovalsPending = len(pending)
		}
	}
	return r
}
