package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// The configurations bench-peers writes are ones the gateway and TBXark take: a template that
// breaks (a revision put under the wrong key, a bad indent) would otherwise show only in a run
// of bench-peers, which CI does not make.
func TestGeneratedConfigsAreTaken(t *testing.T) {
	echo, err := os.Executable() // any executable stands for the echo server
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		full     bool
		revision string
	}{
		{"minimal-default", false, ""},
		{"full-default", true, ""},
		{"minimal-like-tbxark", false, tbxarkRevision},
		{"full-like-tbxark", true, tbxarkRevision},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".yaml")
			err := writeTemplate(path, gatewayTemplate, gatewayConfig{
				Name: c.name, Listen: "127.0.0.1:0", StateDir: filepath.Join(dir, c.name), Echo: echo,
				MaxSessions: 2000, MaxConnections: 2000, Full: c.full, Revision: c.revision, TokenEnv: adminTokenEnv,
			})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("the gateway refuses the generated config: %v", err)
			}
			if len(cfg.Servers) != 1 || cfg.Servers[0].ProtocolVersion != c.revision {
				t.Fatalf("servers = %+v, want the echo server asked for revision %q", cfg.Servers, c.revision)
			}
			if got := len(cfg.Policies.Rules) > 0; got != c.full {
				t.Errorf("rules present: %v, want %v", got, c.full)
			}
		})
	}
	path := filepath.Join(dir, "tbxark.json")
	if err := writeTemplate(path, tbxarkTemplate, tbxarkConfig{Addr: "127.0.0.1:1", Echo: echo}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		MCPServers map[string]struct{ Command string } `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.MCPServers["echo"].Command != echo {
		t.Fatalf("TBXark's config %s: %v, %+v", b, err, v)
	}
}

// The newest revision is the gateway's default for its servers: what it asks for when
// servers[].protocol_version is not set, so the label of the default-revision row is true.
func TestNewestRevisionIsNewerThanTBXarks(t *testing.T) {
	if newestRevision <= tbxarkRevision {
		t.Fatalf("newestRevision %q is not newer than TBXark's %q: the default-revision row would measure nothing different", newestRevision, tbxarkRevision)
	}
}
