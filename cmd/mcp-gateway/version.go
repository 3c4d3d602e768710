package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/mcp-gateway/mcp-gateway/gateway"
)

// Set by the Makefile's build (-ldflags -X main.commit=… and so on); a plain go build leaves
// them empty, and the commit then comes from the build info Go records (vcs.*).
var (
	commit     string
	commitTime string
	modified   string // "true" or "false"
	buildDate  string
)

// versionInfo is what `version` prints.
type versionInfo struct {
	// Version is gateway.Version as the build set it, else the main module's version Go
	// recorded (a tag, or a pseudo-version of the commit), else "dev".
	Version string `json:"version"`
	// Commit is the revision the binary was built from, CommitTime when it was committed, and
	// Modified whether the tree had uncommitted changes (vcs.revision, vcs.time, vcs.modified).
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"`
	// BuildDate is when the binary was built; only a build through the Makefile knows it.
	BuildDate string `json:"build_date,omitempty"`
	Go        string `json:"go"`
}

// readVersion puts together what the build set and what Go recorded in the binary.
func readVersion() versionInfo {
	v := versionInfo{Version: gateway.Version, Commit: commit, CommitTime: commitTime, Modified: modified == "true", BuildDate: buildDate, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	if v.Commit != "" {
		return v // the build said which commit; Go's record of it would say the same
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version [-o table|json|jsonl]\n\nPrints the version, the commit the binary was built from and when it was built.", stdout, stderr)
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	v := readVersion()
	if fs.output() != formatTable {
		return writeJSON(stdout, fs.output(), v)
	}
	fmt.Fprintf(stdout, "mcp-gateway %s\n", v.Version)
	commit := orUnknown(v.Commit)
	if v.Modified {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(stdout, "commit:     %s\n", commit)
	fmt.Fprintf(stdout, "committed:  %s\n", orUnknown(v.CommitTime))
	fmt.Fprintf(stdout, "built:      %s\n", orUnknown(v.BuildDate))
	fmt.Fprintf(stdout, "go:         %s\n", v.Go)
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
