package gateway

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
)

// Source is one upstream server's contribution to the catalog: its configuration, the tools it
// listed last, and how to reach it.
type Source struct {
	Server     *config.Server
	Tools      []*mcp.Tool
	Dispatcher governor.Dispatcher
}

// Catalog is the flat tool list of SPEC.md §5: every upstream tool that passes its server's
// filters, under its public name. It is immutable once built; a change builds a new one.
type Catalog struct {
	byName map[string]*governor.Tool
	listed []*governor.Tool // sorted by public name, hidden tools excluded
}

// Problem is a tool left out of the catalog and why.
type Problem struct {
	Server, Tool string
	// Fatal problems (a bare-name collision) must stop start-up.
	Fatal bool
	Msg   string
}

func (p Problem) String() string { return p.Msg }

// BuildCatalog builds the catalog from the servers' tool lists, in the order given (config
// order). It never fails on an upstream's definitions: a tool that cannot be served is left out
// and reported as a Problem.
//
// compile, when not nil, compiles each listed tool's input schema for argument validation; a
// tool whose schema does not compile is left out, or served unvalidated when its server's
// tools.on_invalid_schema says so.
func BuildCatalog(cfg *config.Config, sources []Source, compile CompileFunc) (*Catalog, []Problem) {
	naming := cfg.Gateway.ToolNames
	c := &Catalog{byName: make(map[string]*governor.Tool)}
	var problems []Problem
	for _, src := range sources {
		problems = append(problems, missingStopTool(cfg, src)...)
		for _, up := range src.Tools {
			if up == nil || up.Name == "" {
				continue
			}
			public := PublicName(naming, src.Server.Name, up.Name)
			filters := &src.Server.Tools
			hidden := matchAny(filters.Hidden, up.Name)
			if !hidden && !Included(filters, up.Name) {
				continue
			}
			t := &governor.Tool{
				Public:       public,
				Server:       src.Server.Name,
				Upstream:     up.Name,
				Hidden:       hidden,
				Evaluated:    filters.Overrides[up.Name].Evaluated,
				Stop:         filters.Overrides[up.Name].Stop && src.Server.Physical,
				ServerConfig: src.Server,
				Dispatcher:   src.Dispatcher,

				UpstreamDefinition: up,
			}
			if prev, ok := c.byName[public]; ok {
				problems = append(problems, collision(cfg.Path, prev, t))
				continue
			}
			if !hidden {
				def, err := definition(public, up, filters.Overrides[up.Name])
				if err != nil {
					problems = append(problems, Problem{Server: src.Server.Name, Tool: up.Name,
						Msg: fmt.Sprintf("server %s: tool %s is left out: %v", src.Server.Name, up.Name, err)})
					continue
				}
				t.Definition = def
				t.Annotations = annotationMap(up.Annotations)
				if o := filters.Overrides[up.Name]; o.AllowWhileLocked {
					if why := inspectionRefused(o, up); why != "" {
						problems = append(problems, Problem{Server: src.Server.Name, Tool: up.Name, Msg: fmt.Sprintf(
							"%s:%d: servers %s: tools.overrides.%s.allow_while_locked is refused: %s; the tool is served, but refused like every other tool of the server during a lockout",
							filepath.Base(cfg.Path), o.Line, src.Server.Name, up.Name, why)})
					} else {
						t.AllowWhileLocked = true
					}
				}
				if compile != nil {
					schema, err := compile(public, def.InputSchema)
					switch {
					case err == nil:
						t.Schema = schema
					case filters.OnInvalidSchema == config.OnInvalidSchemaUnvalidated:
						problems = append(problems, Problem{Server: src.Server.Name, Tool: up.Name,
							Msg: fmt.Sprintf("server %s: tool %s is served WITHOUT argument validation (tools.on_invalid_schema: unvalidated): %v", src.Server.Name, up.Name, err)})
					default:
						problems = append(problems, Problem{Server: src.Server.Name, Tool: up.Name,
							Msg: fmt.Sprintf("server %s: tool %s is left out: %v (set tools.on_invalid_schema: unvalidated to serve it without argument validation)", src.Server.Name, up.Name, err)})
						continue
					}
				}
				c.listed = append(c.listed, t)
			}
			c.byName[public] = t
		}
	}
	sort.Slice(c.listed, func(i, j int) bool { return c.listed[i].Public < c.listed[j].Public })
	return c, problems
}

// missingStopTool reports a stop tool the server does not list: a halt then has nothing to
// call, and models and clients have no way to stop the robot through the gateway. Nothing is
// reported before the server's first listing.
func missingStopTool(cfg *config.Config, src Source) []Problem {
	if src.Tools == nil || !src.Server.Physical {
		return nil
	}
	for name, o := range src.Server.Tools.Overrides {
		if !o.Stop || slices.ContainsFunc(src.Tools, func(t *mcp.Tool) bool { return t != nil && t.Name == name }) {
			continue
		}
		return []Problem{{Server: src.Server.Name, Tool: name, Msg: fmt.Sprintf(
			"%s:%d: servers %s: tools.overrides.%s.stop names a tool the server does not list, so the server has no stop tool: a halt cannot stop the robot through the gateway; name one of the tools the server lists",
			filepath.Base(cfg.Path), o.Line, src.Server.Name, name)}}
	}
	return nil
}

// inspectionRefused says why a tool may not stay callable during a lockout: only a tool whose
// server says it is read-only, and that is not the stop action, may. "" when it may.
func inspectionRefused(o config.ToolOverride, up *mcp.Tool) string {
	switch {
	case o.Stop:
		return "the tool is the server's stop tool, which is always callable anyway"
	case up.Annotations == nil || !up.Annotations.ReadOnlyHint:
		return "the server does not annotate the tool as read-only (readOnlyHint: true), so calling it could move the robot"
	}
	return ""
}

func collision(file string, prev, t *governor.Tool) Problem {
	return Problem{Server: t.Server, Tool: t.Upstream, Fatal: true, Msg: fmt.Sprintf(
		"%s: tool name %q is exposed by server %q (line %d) and by server %q (line %d) while gateway.tool_names is bare; "+
			"set tool_names: prefixed, or exclude the tool from one server (tools.exclude)",
		filepath.Base(file), t.Upstream, prev.Server, prev.ServerConfig.Line, t.Server, t.ServerConfig.Line)}
}

// CompileFunc compiles a tool's input schema for argument validation.
type CompileFunc func(public string, schema any) (*argschema.Schema, error)

// PublicName is the name a tool is listed under: "<server>__<tool>" when naming is prefixed,
// the upstream name when it is bare.
func PublicName(naming, server, tool string) string {
	if naming == config.ToolNamesBare {
		return tool
	}
	return server + config.PrefixSeparator + tool
}

// Included reports whether a tool passes a server's include and exclude globs.
func Included(t *config.Tools, name string) bool {
	include := t.Include
	if len(include) == 0 {
		include = []string{"*"}
	}
	return matchAny(include, name) && !matchAny(t.Exclude, name)
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Quarantine takes a listed tool out of the list (it stays resolvable, and calls to it are
// refused with the reason).
func (c *Catalog) Quarantine(public, reason string) {
	t, ok := c.byName[public]
	if !ok || t.Hidden {
		return
	}
	t.Quarantine = reason
	c.listed = slices.DeleteFunc(c.listed, func(l *governor.Tool) bool { return l.Public == public })
}

// Resolve finds a tool by its public name, hidden tools included. It implements
// governor.Resolver.
func (c *Catalog) Resolve(name string) (*governor.Tool, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// Tools is the listed tools, sorted by public name.
func (c *Catalog) Tools() []*governor.Tool { return c.listed }

// All is every tool the catalog resolves, hidden and quarantined ones included, sorted by
// public name.
func (c *Catalog) All() []*governor.Tool {
	all := make([]*governor.Tool, 0, len(c.byName))
	for _, t := range c.byName {
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Public < all[j].Public })
	return all
}

// definition is the tool as callers see it: the public name, the (overridden) description, the
// repaired input schema, and the upstream's output schema, annotations and title. Nothing
// gateway-only (evaluated, physical) and no upstream _meta is shown.
func definition(public string, up *mcp.Tool, o config.ToolOverride) (*mcp.Tool, error) {
	in, err := repairInputSchema(up.InputSchema)
	if err != nil {
		return nil, err
	}
	out := up.OutputSchema
	if out != nil {
		if m, ok := out.(map[string]any); !ok || (m["type"] != nil && m["type"] != "object") {
			// An output schema must describe an object; a broken one is dropped rather than
			// passed on, since clients validate structured content against it.
			out = nil
		}
	}
	desc := up.Description
	if strings.TrimSpace(o.Description) != "" {
		desc = o.Description
	}
	return &mcp.Tool{
		Name:         public,
		Title:        up.Title,
		Description:  desc,
		InputSchema:  in,
		OutputSchema: out,
		Annotations:  up.Annotations,
	}, nil
}

// repairInputSchema returns an input schema the SDK accepts: a JSON object schema of type
// "object". A missing schema or a missing type on an object-shaped schema is repaired; anything
// else that is not an object schema is refused with the reason.
func repairInputSchema(s any) (map[string]any, error) {
	if s == nil {
		return map[string]any{"type": "object"}, nil
	}
	m, ok := s.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("its input schema is %T, not a JSON object", s)
	}
	switch typ := m["type"].(type) {
	case string:
		if typ == "object" {
			return m, nil
		}
		return nil, fmt.Errorf("its input schema has type %q; tool arguments must be an object", typ)
	case nil:
		if _, hasType := m["type"]; hasType {
			return nil, fmt.Errorf("its input schema has type null; tool arguments must be an object")
		}
		for _, k := range nonObjectKeywords {
			if _, ok := m[k]; ok {
				return nil, fmt.Errorf("its input schema has no type and uses %q, so it does not describe an object", k)
			}
		}
		fixed := make(map[string]any, len(m)+1)
		for k, v := range m {
			fixed[k] = v
		}
		fixed["type"] = "object"
		return fixed, nil
	case []any:
		for _, t := range typ {
			if t == "object" {
				fixed := make(map[string]any, len(m))
				for k, v := range m {
					fixed[k] = v
				}
				fixed["type"] = "object"
				return fixed, nil
			}
		}
		return nil, fmt.Errorf("its input schema has types %v; tool arguments must be an object", typ)
	default:
		return nil, fmt.Errorf("its input schema has a malformed type %v", typ)
	}
}

// nonObjectKeywords mark a schema without "type" as describing something other than an object,
// so adding type "object" would change its meaning.
var nonObjectKeywords = []string{"items", "prefixItems", "enum", "const", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}

// annotationMap is the upstream's annotations as policies see them: only the hints it sent.
func annotationMap(a *mcp.ToolAnnotations) map[string]any {
	m := map[string]any{}
	if a == nil {
		return m
	}
	b, err := json.Marshal(a)
	if err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}
