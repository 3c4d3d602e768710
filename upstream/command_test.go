package upstream

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
)

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "driver")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		command, why string
	}{
		{"", ""}, // a url server
		{"sh", ""},
		{exe, ""},
		{"no-such-driver-for-this-test", "cannot be found on PATH"},
		{filepath.Join(dir, "missing"), "does not exist"},
		{plain, "is not executable"},
		{dir, "is a directory"},
	} {
		err := CheckCommand(config.Server{Name: "robot", Command: tc.command})
		var ce *CommandError
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%q: %v, want it runnable", tc.command, err)
		case tc.why != "" && (!errors.As(err, &ce) || !strings.Contains(ce.Why, tc.why)):
			t.Errorf("%q: %v, want %q", tc.command, err, tc.why)
		}
	}
}
