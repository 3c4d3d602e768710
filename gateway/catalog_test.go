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
