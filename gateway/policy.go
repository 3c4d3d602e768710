package gateway

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// CompilePolicies compiles the config's policy rules (its policy files, then its inline rules)
// once. Every problem of every rule is reported, with file, line and column.
func CompilePolicies(cfg *config.Config) (*policies.Engine, error) {
	var rules []policies.Rule
	var errs []string
	for _, f := range cfg.Policies.Files {
		rs, err := policies.LoadRuleFile(f)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		rules = append(rules, rs...)
	}
	for _, r := range cfg.Policies.Rules {
		rules = append(rules, policies.Rule{ID: r.ID, Effect: r.Effect, When: r.When, Reason: r.Reason, Mode: r.Mode,
			File: r.File, Line: r.Line, Column: r.Column})
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	engine, err := policies.Compile(rules, policies.Options{Default: cfg.Policies.Default, CostLimit: cfg.Policies.CostLimit})
	if err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	return engine, nil
}

// policyInput builds what the rules see of a call from the call and the gateway's state. It
// notes the call in g.recent after reading the counts, so the call is in the rate of the calls
// after it, not in its own.
func (g *Gateway) policyInput(c *governor.Call) *policies.Input {
	t := c.Tool
	r := g.recent.Counts(c.Principal, c.Session, t.Server)
	g.recent.Note(c.Principal, c.Session, t.Server, t.PhysicalAction())
	in := &policies.Input{
		Tool: c.Name, Server: t.Server, UpstreamTool: t.Upstream, Args: c.Args,
		Principal: policies.Principal{ID: c.Principal, Roles: c.Roles},
		Session:   policies.Session{ID: c.Session, Calls: c.SessionCalls},
		ToolMeta:  policies.ToolMeta{Physical: t.Physical(), Evaluated: t.Evaluated, Annotations: t.Annotations},
		Labels:    c.Labels,
		State:     policies.State{InFlight: g.inFlight.get(t.Server)},
		Rate: policies.Rate{Principal: policies.RateCounts(r.Principal), Session: policies.RateCounts(r.Session),
			Server: policies.RateCounts(r.Server)},
	}
	if g.lockouts != nil && t.Physical() {
		_, in.State.Locked = g.lockouts.For(t.Server)
	}
	return in
}
