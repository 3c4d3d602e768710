package gateway

import (
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

func TestStopToolRules(t *testing.T) {
	servers := []config.Server{
		{Name: "robot", Physical: true, Tools: config.Tools{Overrides: map[string]config.ToolOverride{"stop": {Stop: true}, "pick": {Evaluated: true}}}},
		{Name: "base", Physical: true, Tools: config.Tools{Overrides: map[string]config.ToolOverride{"halt": {Stop: true}}}},
		{Name: "cam"},
	}
	tests := []struct {
		when, effect, mode string
		naming             string
		want               string // "" when the rule must not be reported
	}{
		{when: `tool == "robot__stop"`, want: "the stop tool robot__stop"},
		{when: `"robot__stop" == tool && args.size() > 0`, want: "the stop tool robot__stop"},
		{when: `server == "robot" && upstream_tool == "stop"`, effect: policies.RequireApproval, want: "(require_approval) can only ever match calls to the stop tool robot__stop"},
		{when: `tool in ["robot__stop", "base__halt"] && principal.id != "operator"`, want: "the stop tools [robot__stop base__halt]"},
		{when: `upstream_tool == "stop"`, naming: config.ToolNamesBare},
		{when: `tool == "stop"`, naming: config.ToolNamesBare, want: "the stop tool stop"},
		// Not only stop tools, or not surely:
		{when: `tool == "robot__pick"`},
		{when: `tool in ["robot__stop", "robot__pick"]`},
		{when: `upstream_tool == "stop"`},                       // any server's tool named stop
		{when: `server == "robot"`},                             // every tool of robot
		{when: `tool == "robot__stop" || tool == "x__y"`},       // a disjunction
		{when: `!(tool != "robot__stop")`},                      // sure, but not read this way
		{when: `tool == "robot__stop" && tool == "base__halt"`}, // matches nothing at all
		{when: `server == "cam" && upstream_tool == "stop"`},
		// Rules that never hold back a call:
		{when: `tool == "robot__stop"`, effect: policies.Allow},
		{when: `tool == "robot__stop"`, mode: policies.LogOnly},
	}
	for _, tt := range tests {
		naming := tt.naming
		if naming == "" {
			naming = config.ToolNamesPrefixed
		}
		effect := tt.effect
		if effect == "" {
			effect = policies.Deny
		}
		cfg := &config.Config{Path: "cell.yaml", Gateway: config.Gateway{ToolNames: naming}, Servers: servers}
		rule := policies.Rule{ID: "r1", Effect: effect, When: tt.when, Mode: tt.mode, File: "rules.yaml", Line: 7, Column: 11}
		got := StopToolRules(cfg, []policies.Rule{rule})
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s (%s): reported, want nothing: %v", tt.when, naming, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want) || !strings.HasPrefix(got[0], "rules.yaml:7:11: policy rule r1 (")):
			t.Errorf("%s (%s): got %v, want one message containing %q", tt.when, naming, got, tt.want)
		}
	}
}
