package pastable

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandRunsAsPrinted(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "my tools", "mcp-gateway")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	// A stand-in binary that prints its arguments one per line.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "cell's config.yaml")
	t.Cleanup(func() { SetBinary("mcp-gateway"); SetConfig("") })
	SetBinary(bin)
	SetConfig(cfg)
	line := Command("unlock", "robot", "--reason", "what was inspected")
	// From another directory, through a shell, as a person would paste it.
	sh := exec.Command("sh", "-c", line)
	sh.Dir = os.TempDir()
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	want := "unlock\nrobot\n--reason\nwhat was inspected\n-c\n" + cfg + "\n"
	if string(out) != want {
		t.Errorf("%s ran with\n%s\nwant\n%s", line, out, want)
	}
}

func TestBareBinaryStaysBare(t *testing.T) {
	t.Cleanup(func() { SetBinary("mcp-gateway"); SetConfig("") })
	SetBinary("mcp-gateway")
	SetConfig("")
	if got := Command("approvals", "list"); got != "mcp-gateway approvals list" {
		t.Errorf("got %q", got)
	}
	SetBinary("./bin/mcp-gateway")
	if got := Command("status"); !strings.HasPrefix(got, "/") || !strings.HasSuffix(got, "/bin/mcp-gateway status") {
		t.Errorf("a relative binary must become absolute: %q", got)
	}
}
