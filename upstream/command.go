package upstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// CommandError says why a server's command cannot be started as it stands: it is not on PATH,
// does not exist, or is not an executable file.
type CommandError struct {
	Server, Command string
	Why             string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("server %s: command %q %s", e.Server, e.Command, e.Why)
}

// CheckCommand looks up a stdio server's command the way launching it would (a bare name on the
// gateway's PATH, a path as written), without starting anything. It returns a *CommandError
// when the command cannot be run, nil when it can or the server is reached by URL.
func CheckCommand(s config.Server) error {
	if s.Command == "" {
		return nil
	}
	_, err := exec.LookPath(s.Command)
	if err == nil {
		return nil
	}
	ce := &CommandError{Server: s.Name, Command: s.Command}
	bare := !strings.ContainsRune(s.Command, os.PathSeparator) && !strings.ContainsRune(s.Command, '/')
	info, statErr := os.Stat(s.Command)
	switch {
	case bare && errors.Is(err, exec.ErrNotFound):
		ce.Why = "cannot be found on PATH (" + os.Getenv("PATH") + "); install it, or give its full path"
	case errors.Is(statErr, fs.ErrNotExist):
		ce.Why = "does not exist; build or install it, or correct the path"
	case statErr == nil && info.IsDir():
		ce.Why = "is a directory, not an executable"
	case statErr == nil:
		ce.Why = fmt.Sprintf("is not executable (mode %v); chmod +x it, or run it through its interpreter", info.Mode().Perm())
	default:
		ce.Why = "cannot be run: " + err.Error()
	}
	return ce
}
