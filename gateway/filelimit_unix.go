//go:build unix

package gateway

import "syscall"

// openFileLimit is the process's soft limit on open files, or 0 when it cannot be read.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return uint64(rl.Cur)
}
