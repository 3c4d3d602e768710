package gateway

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// TestPolicyCheckNamesRulesAndFiles checks that PolicyCheck says which inline rule (counted in
// policies.rules, after the rules of the policy files) or which policies.files entry each
// problem is in, and that it still compiles the inline rules when a policy file does not load.
func TestPolicyCheckNamesRulesAndFiles(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("rules:\n  - {id: a, effect: deny, when: \"true\"}\n  - {id: b, effect: deny, when: \"tool ==\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("rules: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Path: filepath.Join(dir, "cell.yaml"), Policies: config.Policies{Files: []string{bad, good}, Rules: []config.PolicyRule{
		{ID: "c", Effect: "deny", When: "true"},
		{ID: "d", Effect: "stop", When: "true"},
	}}}
	engine, problems := PolicyCheck(cfg)
	if engine != nil || len(problems) != 3 {
		t.Fatalf("got engine %v and problems %+v, want 3 problems", engine, problems)
	}
	type at struct {
		rule, file int
		key, path  string
	}
	want := []at{{-1, 0, "", bad}, {-1, 1, "", good}, {1, -1, "effect", ""}}
	for i, p := range problems {
		if got := (at{p.Rule, p.FileIndex, p.Key, p.File}); got != want[i] {
			t.Errorf("problem %q: %+v, want %+v", p.Msg, got, want[i])
		}
	}
	cfg.Policies.Files, cfg.Policies.Rules = []string{good}, cfg.Policies.Rules[:1]
	good2 := "rules:\n  - {id: a, effect: deny, when: \"true\"}\n"
	if err := os.WriteFile(good, []byte(good2), 0o600); err != nil {
		t.Fatal(err)
	}
	if engine, problems := PolicyCheck(cfg); engine == nil || len(problems) != 0 || len(engine.Rules()) != 2 {
		t.Errorf("good rules: engine %v, problems %+v", engine, problems)
	}
}
