package gateway

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func obj() map[string]any { return map[string]any{"type": "object"} }

func TestCatalogNamingAndFilters(t *testing.T) {
	arm := &config.Server{Name: "arm", Line: 5, Tools: config.Tools{
		Include:   []string{"*"},
		Exclude:   []string{"debug_*"},
		Hidden:    []string{"evaluate_run"},
		Overrides: map[string]config.ToolOverride{"pick": {Evaluated: true, Description: "Pick one object."}},
	}}
	cam := &config.Server{Name: "cam", Line: 20, Tools: config.Tools{Include: []string{"snap*"}}}
	sources := []Source{
		{Server: arm, Tools: []*mcp.Tool{
			{Name: "pick", Description: "upstream text", InputSchema: obj(), Meta: mcp.Meta{"secret": "x"}},
			{Name: "debug_dump", InputSchema: obj()},
			{Name: "evaluate_run", InputSchema: obj()},
		}},
		{Server: cam, Tools: []*mcp.Tool{{Name: "snapshot", InputSchema: obj()}, {Name: "reboot", InputSchema: obj()}}},
	}
	cat, problems := BuildCatalog(&config.Config{Path: "cell.yaml", Gateway: config.Gateway{ToolNames: config.ToolNamesPrefixed}}, sources, nil)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	var names []string
	for _, tl := range cat.Tools() {
		names = append(names, tl.Public)
	}
	if got := strings.Join(names, ","); got != "arm__pick,cam__snapshot" {
		t.Fatalf("listed = %s", got)
	}
	pick, _ := cat.Resolve("arm__pick")
	if !pick.Evaluated || pick.Definition.Description != "Pick one object." || pick.Definition.Meta != nil {
		t.Fatalf("override not applied or _meta leaked: %+v", pick.Definition)
	}
	hidden, ok := cat.Resolve("arm__evaluate_run")
	if !ok || !hidden.Hidden {
		t.Fatalf("hidden tool must resolve as hidden: %+v", hidden)
	}
	for _, gone := range []string{"arm__debug_dump", "cam__reboot"} {
		if _, ok := cat.Resolve(gone); ok {
			t.Fatalf("%s must be filtered out", gone)
		}
	}
}

func TestCatalogBareCollision(t *testing.T) {
	a := &config.Server{Name: "arm", Line: 7}
	b := &config.Server{Name: "base", Line: 19}
	_, problems := BuildCatalog(&config.Config{Path: "/etc/cell.yaml", Gateway: config.Gateway{ToolNames: config.ToolNamesBare}}, []Source{
		{Server: a, Tools: []*mcp.Tool{{Name: "stop", InputSchema: obj()}}},
		{Server: b, Tools: []*mcp.Tool{{Name: "stop", InputSchema: obj()}}},
	}, nil)
	if len(problems) != 1 || !problems[0].Fatal {
		t.Fatalf("want one fatal problem, got %v", problems)
	}
	msg := problems[0].Msg
	for _, want := range []string{"cell.yaml", `"arm" (line 7)`, `"base" (line 19)`, `"stop"`} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message %q lacks %q", msg, want)
		}
	}
}

func TestRepairInputSchema(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		wantErr string
	}{
		{name: "nil becomes empty object", in: nil},
		{name: "object kept", in: obj()},
		{name: "missing type repaired", in: map[string]any{"properties": map[string]any{"x": map[string]any{"type": "string"}}}},
		{name: "type list with object", in: map[string]any{"type": []any{"object", "null"}}},
		{name: "array refused", in: map[string]any{"type": "array"}, wantErr: `type "array"`},
		{name: "missing type on array schema refused", in: map[string]any{"items": map[string]any{}}, wantErr: "items"},
		{name: "not an object", in: "string", wantErr: "not a JSON object"},
		{name: "null type", in: map[string]any{"type": nil}, wantErr: "null"},
		{name: "numeric type", in: map[string]any{"type": 3.0}, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := repairInputSchema(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got["type"] != "object" {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
	orig := map[string]any{"properties": map[string]any{}}
	_, _ = repairInputSchema(orig)
	if _, changed := orig["type"]; changed {
		t.Fatal("repair must not change the upstream's schema")
	}
}

func TestCatalogLeavesOutBadSchemas(t *testing.T) {
	s := &config.Server{Name: "x"}
	cat, problems := BuildCatalog(&config.Config{Gateway: config.Gateway{ToolNames: config.ToolNamesPrefixed}}, []Source{
		{Server: s, Tools: []*mcp.Tool{{Name: "good", InputSchema: obj()}, {Name: "bad", InputSchema: map[string]any{"type": "string"}}}},
	}, nil)
	if len(cat.Tools()) != 1 || len(problems) != 1 || problems[0].Fatal || !strings.Contains(problems[0].Msg, "bad") {
		t.Fatalf("tools %d, problems %v", len(cat.Tools()), problems)
	}
}

func TestCatalogStopAndInspectionTools(t *testing.T) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	arm := &config.Server{Name: "arm", Physical: true, Tools: config.Tools{
		Include: []string{"*"},
		Overrides: map[string]config.ToolOverride{
			"halt":      {Stop: true, Line: 9},
			"get_scene": {AllowWhileLocked: true, Line: 11},
			"pick":      {AllowWhileLocked: true, Line: 13},
			"peek":      {AllowWhileLocked: true, Line: 15},
		},
	}}
	base := &config.Server{Name: "base", Physical: true, Tools: config.Tools{
		Include:   []string{"*"},
		Overrides: map[string]config.ToolOverride{"estop": {Stop: true, Line: 21}},
	}}
	sources := []Source{
		{Server: arm, Tools: []*mcp.Tool{
			{Name: "halt", InputSchema: obj()},
			{Name: "get_scene", InputSchema: obj(), Annotations: readOnly},
			{Name: "pick", InputSchema: obj(), Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}},
			{Name: "peek", InputSchema: obj()},
		}},
		{Server: base, Tools: []*mcp.Tool{{Name: "move", InputSchema: obj()}}},
	}
	cat, problems := BuildCatalog(&config.Config{Path: "/etc/cell.yaml", Gateway: config.Gateway{ToolNames: config.ToolNamesPrefixed}}, sources, nil)
	byTool := map[string]string{}
	for _, p := range problems {
		if p.Fatal {
			t.Errorf("fatal problem: %s", p.Msg)
		}
		byTool[p.Server+"/"+p.Tool] = p.Msg
	}
	for key, want := range map[string]string{
		"arm/pick":   "cell.yaml:13: servers arm: tools.overrides.pick.allow_while_locked is refused: the server does not annotate the tool as read-only",
		"arm/peek":   "cell.yaml:15: servers arm: tools.overrides.peek.allow_while_locked is refused",
		"base/estop": "cell.yaml:21: servers base: tools.overrides.estop.stop names a tool the server does not list",
	} {
		if !strings.Contains(byTool[key], want) {
			t.Errorf("problem of %s = %q, want it to contain %q", key, byTool[key], want)
		}
	}
	if len(problems) != 3 {
		t.Errorf("problems: %v", problems)
	}
	exempt := map[string]string{}
	for _, tl := range cat.All() {
		switch {
		case tl.Stop:
			exempt[tl.Public] = "stop"
		case tl.AllowWhileLocked:
			exempt[tl.Public] = "inspection"
		}
	}
	if len(exempt) != 2 || exempt["arm__halt"] != "stop" || exempt["arm__get_scene"] != "inspection" {
		t.Errorf("exempt tools: %v", exempt)
	}
	// Before a server's first listing nothing is reported about its stop tool.
	if _, problems := BuildCatalog(&config.Config{Path: "cell.yaml"}, []Source{{Server: base}}, nil); len(problems) != 0 {
		t.Errorf("problems before the first listing: %v", problems)
	}
}

func TestCatalogAllIncludesHiddenTools(t *testing.T) {
	arm := &config.Server{Name: "arm", Tools: config.Tools{Include: []string{"*"}, Hidden: []string{"eval"}}}
	cat, _ := BuildCatalog(&config.Config{Gateway: config.Gateway{ToolNames: config.ToolNamesPrefixed}}, []Source{{Server: arm, Tools: []*mcp.Tool{
		{Name: "pick", InputSchema: obj()}, {Name: "eval", InputSchema: obj()}, {Name: "drop", InputSchema: obj()},
	}}}, nil)
	cat.Quarantine("arm__drop", "changed")
	var names []string
	for _, tl := range cat.All() {
		names = append(names, tl.Public)
	}
	if got := strings.Join(names, ","); got != "arm__drop,arm__eval,arm__pick" {
		t.Errorf("All = %s", got)
	}
	if len(cat.Tools()) != 1 {
		t.Errorf("listed: %d tools, want only arm__pick", len(cat.Tools()))
	}
}
