package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestAdminToolsListsTheCatalog(t *testing.T) {
	arm := &config.Server{Name: "arm", Physical: true, Tools: config.Tools{
		Include: []string{"*"},
		Hidden:  []string{"eval"},
		Overrides: map[string]config.ToolOverride{
			"halt":      {Stop: true},
			"get_scene": {AllowWhileLocked: true},
			"pick":      {AllowWhileLocked: true},
		},
	}}
	cam := &config.Server{Name: "cam", Tools: config.Tools{Include: []string{"*"}}}
	cat, _ := BuildCatalog(&config.Config{Gateway: config.Gateway{ToolNames: config.ToolNamesPrefixed}}, []Source{
		{Server: arm, Tools: []*mcp.Tool{
			{Name: "halt", InputSchema: obj()},
			{Name: "get_scene", InputSchema: obj(), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			{Name: "pick", InputSchema: obj(), Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)}},
			{Name: "eval", InputSchema: obj()},
		}},
		{Server: cam, Tools: []*mcp.Tool{{Name: "snap", InputSchema: obj()}}},
	}, nil)
	cat.Quarantine("cam__snap", "changed")
	g := &Gateway{}
	g.catalog.Store(cat)
	mux := http.NewServeMux()
	g.registerToolRoutes(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/admin/tools", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /admin/tools: %d %s", rec.Code, rec.Body)
	}
	var list []ToolStatus
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]ToolStatus{}
	for _, s := range list {
		got[s.Public] = s
	}
	want := map[string]ToolStatus{
		"arm__eval":      {Public: "arm__eval", Server: "arm", Upstream: "eval", Physical: true, Hidden: true},
		"arm__get_scene": {Public: "arm__get_scene", Server: "arm", Upstream: "get_scene", Physical: true, AllowWhileLocked: true},
		"arm__halt":      {Public: "arm__halt", Server: "arm", Upstream: "halt", Physical: true, Stop: true},
		"arm__pick":      {Public: "arm__pick", Server: "arm", Upstream: "pick", Physical: true},
		"cam__snap":      {Public: "cam__snap", Server: "cam", Upstream: "snap", Quarantined: true},
	}
	if len(list) != len(want) {
		t.Fatalf("listed %d tools, want %d: %s", len(list), len(want), rec.Body)
	}
	for name, w := range want {
		g := got[name]
		// Every tool but the hidden one carries the definition clients are listed.
		if listed := g.Definition != nil; listed == w.Hidden || (listed && g.Definition.Name != name) {
			t.Errorf("%s: definition %+v (hidden %v)", name, g.Definition, w.Hidden)
		}
		g.Annotations, g.Definition = nil, nil
		if g != w {
			t.Errorf("%s = %+v, want %+v", name, g, w)
		}
	}
	if a := got["arm__get_scene"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("get_scene's annotations: %+v", a)
	}
	if a := got["arm__pick"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
		t.Errorf("pick's annotations: %+v", a)
	}
}

// Pins keep the annotations the server last listed, outside the digest: a change of hints
// quarantines nothing, and is kept.
func TestPinsKeepAnnotations(t *testing.T) {
	g, st, cfg := pinsGateway(t)
	look := func(readOnly bool) *mcp.Tool {
		return &mcp.Tool{Name: "look", Description: "Look.", InputSchema: obj(), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}}
	}
	bare := &mcp.Tool{Name: "poke", Description: "Poke.", InputSchema: obj()}
	if _, problems := pinCatalog(t, g, cfg, look(true), bare); len(problems) != 0 {
		t.Fatal(problems)
	}
	first, _, _ := st.GetPin("arm", "look")
	if string(first.Annotations) != `{"idempotentHint":false,"readOnlyHint":true}` {
		t.Errorf("look's pinned annotations: %s", first.Annotations)
	}
	if p, _, _ := st.GetPin("arm", "poke"); string(p.Annotations) != "null" {
		t.Errorf("a tool without annotations must pin null (none given), not nothing (unknown): %q", p.Annotations)
	}
	cat, problems := pinCatalog(t, g, cfg, look(false), bare)
	if len(problems) != 0 || listed(cat) != "arm__look,arm__poke" {
		t.Fatalf("changed hints: listed %s, problems %v", listed(cat), problems)
	}
	again, _, _ := st.GetPin("arm", "look")
	if again.Digest != first.Digest || again.Pending != "" || string(again.Annotations) != `{"idempotentHint":false,"readOnlyHint":false}` {
		t.Errorf("pin after the hints changed: digest kept %v, pending %q, annotations %s", again.Digest == first.Digest, again.Pending, again.Annotations)
	}
}
