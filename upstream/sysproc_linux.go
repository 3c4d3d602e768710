package upstream

import "syscall"

// sysProcAttr puts the child in its own process group, so that stopping it reaches everything
// it spawned, and has the kernel kill it if the gateway dies without stopping it. (Pdeathsig
// follows the thread that started the child; Go keeps its threads alive unless a goroutine
// exits while locked to one, which this program does not do.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
