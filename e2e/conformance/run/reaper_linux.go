package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// becomeSubreaper makes orphaned descendants (say an upstream whose gateway died, in a process
// group of its own) children of the runner, so that reapOrphans finds them.
func becomeSubreaper() {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "conformance: prctl(PR_SET_CHILD_SUBREAPER): %v\n", errno)
	}
}

// reapOrphans kills and reaps every child of the runner that is not one it is waiting for, and
// returns their descriptions (pid and command). Call it when no child should be left.
func reapOrphans() []string {
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var left []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		j := strings.IndexByte(s, '(')
		if i < 0 || j < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if ppid != self {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:j]))
		if fields[0] != "Z" {
			left = append(left, fmt.Sprintf("%d (%s)", pid, s[j+1:i]))
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
	return left
}
