package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Owner is the record a Store writes beside the state file (state.db.owner) once it holds the
// file's lock, so that a second process refused the lock can say who holds it. bbolt's lock
// itself is an flock and carries no such information.
type Owner struct {
	PID      int       `json:"pid"`
	Hostname string    `json:"hostname"`
	Started  time.Time `json:"started"`
	Command  []string  `json:"command"`
}

// LockedError reports that the state file's lock is held. It wraps [ErrLocked].
type LockedError struct {
	// Path is the state file.
	Path string
	// Owner is what the owner record says, nil when there is none or it cannot be read.
	Owner *Owner
	// Stale is true when the owner record names a process on this host that is not running:
	// the lock is held by some other process that left no record.
	Stale bool
}

func (e *LockedError) Error() string {
	const advice = "stop that gateway, or use its admin API instead of opening the file directly"
	if e.Owner == nil {
		return fmt.Sprintf("state file %s is in use by another process (it left no owner record in %s); %s",
			e.Path, filepath.Base(ownerPath(e.Path)), advice)
	}
	who := fmt.Sprintf("pid %d, %s, since %s", e.Owner.PID, commandName(e.Owner.Command), e.Owner.Started.Format(time.RFC3339))
	if host, _ := os.Hostname(); e.Owner.Hostname != "" && e.Owner.Hostname != host {
		who += ", on host " + e.Owner.Hostname
	}
	switch {
	case e.Stale:
		return fmt.Sprintf("state file %s is locked, but its owner record (%s) is stale: that process is no longer running; another process holds the lock (a read-only command such as `mcp-gateway audit`, or a gateway that could not write its record); find it with `fuser %s` or `lsof %s`",
			e.Path, who, e.Path, e.Path)
	case e.Owner.PID == os.Getpid():
		return fmt.Sprintf("state file %s is already open in this process (%s); a process may open it only once", e.Path, who)
	default:
		return fmt.Sprintf("state file %s is in use by another process (%s); %s", e.Path, who, advice)
	}
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// commandName shortens a command line to the program's base name and its first argument
// ("mcp-gateway serve"): enough to recognise it, without a flag that might carry a secret.
func commandName(argv []string) string {
	if len(argv) == 0 {
		return "unknown command"
	}
	name := filepath.Base(argv[0])
	if len(argv) > 1 && !strings.HasPrefix(argv[1], "-") {
		name += " " + argv[1]
	}
	return name
}

func ownerPath(statePath string) string { return statePath + ".owner" }

// writeOwner records this process as the holder of the state file's lock. It is written to a
// temporary file and renamed so that a reader never sees half a record.
func writeOwner(statePath string, now time.Time) error {
	host, _ := os.Hostname()
	data, err := json.Marshal(Owner{PID: os.Getpid(), Hostname: host, Started: now.UTC(), Command: os.Args})
	if err != nil {
		return err
	}
	tmp := ownerPath(statePath) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, ownerPath(statePath))
}

// lockedError builds the error for a state file whose lock could not be taken.
func lockedError(statePath string) error {
	e := &LockedError{Path: statePath}
	data, err := os.ReadFile(ownerPath(statePath))
	if err != nil {
		return e
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil || o.PID <= 0 {
		return e
	}
	e.Owner = &o
	if host, _ := os.Hostname(); o.Hostname == host && !processAlive(o.PID) {
		e.Stale = true
	}
	return e
}
