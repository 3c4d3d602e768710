package limits

import (
	"path"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Request is what a limit looks at of a call. The strings are used as map keys as they are:
// nothing is built per call.
type Request struct {
	Principal string
	Roles     []string
	Session   string
	Server    string
	// Tool is the public tool name.
	Tool string
	// Physical is set when the call is a physical action: a tool of a physical server that is
	// not annotated read-only (governor.Tool.PhysicalAction).
	Physical bool
}

// keyOf is the request's key for a limit counted per per ("" for global).
func keyOf(per string, r *Request) string {
	switch per {
	case config.PerPrincipal:
		return r.Principal
	case config.PerSession:
		if r.Session == "" {
			// A request without a session (MCP 2026-07-28 requests stand alone) is counted
			// with its principal's other sessionless requests, not with every client's.
			return "\x00" + r.Principal
		}
		return r.Session
	case config.PerServer:
		return r.Server
	case config.PerTool:
		return r.Tool
	}
	return ""
}

// matcher is a limit's match section.
type matcher struct {
	principals, roles, servers, tools []string
	physicalOnly                      bool
}

func (m *matcher) matches(r *Request) bool {
	if m.physicalOnly && !r.Physical {
		return false
	}
	if !anyGlob(m.principals, r.Principal) || !anyGlob(m.servers, r.Server) || !anyGlob(m.tools, r.Tool) {
		return false
	}
	if len(m.roles) == 0 {
		return true
	}
	for _, role := range r.Roles {
		if anyGlob(m.roles, role) {
			return true
		}
	}
	return false
}

// anyGlob reports whether s matches one of the globs; no globs match everything.
func anyGlob(globs []string, s string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if g == s {
			return true
		}
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}
