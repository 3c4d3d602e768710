package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The children of this program: every one runs in its own process group, so that stopping it
// stops what it spawned too (the bench client's stdio servers), and dies with this program
// (Pdeathsig). The gateway puts its own servers in process groups of their own with Pdeathsig,
// so they go when the gateway goes.
var children = struct {
	sync.Mutex
	closed bool
	m      map[int]*exec.Cmd
}{m: map[int]*exec.Cmd{}}

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// start starts cmd as a tracked child.
func start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = sysProcAttr()
	children.Lock()
	defer children.Unlock()
	if children.closed {
		return errors.New("stopping")
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	children.m[cmd.Process.Pid] = cmd
	return nil
}

// wait waits for a tracked child and forgets it.
func wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.Lock()
	delete(children.m, cmd.Process.Pid)
	children.Unlock()
	return err
}

// run runs cmd to its end as a tracked child, its output into out (the combined output is
// returned when out is nil).
func run(cmd *exec.Cmd, out io.Writer) ([]byte, error) {
	var buf strings.Builder
	if out == nil {
		cmd.Stdout, cmd.Stderr = &buf, &buf
	} else {
		cmd.Stdout, cmd.Stderr = out, out
	}
	if err := start(cmd); err != nil {
		return nil, err
	}
	err := wait(cmd)
	return []byte(buf.String()), err
}

// stop asks a child's process group to end (SIGTERM), then kills it after grace.
func stop(cmd *exec.Cmd, grace time.Duration) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = wait(cmd); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
	// Anything left in the group (a grandchild that outlived its parent) goes too.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// stopAll kills every tracked child's process group and refuses new ones.
func stopAll() {
	children.Lock()
	children.closed = true
	var pids []int
	for pid := range children.m {
		pids = append(pids, pid)
	}
	children.Unlock()
	for _, pid := range pids {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := statFields(string(b))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// statFields are the fields of /proc/PID/stat after the command name: [0] is the state
// (field 3 of proc(5)), [1] the parent, [11] utime, [12] stime.
func statFields(s string) []string {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// cpuTicks is utime+stime of pid, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := statFields(string(b))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return u + s, nil
}

// memKB reads VmRSS and VmHWM of pid in kB.
func memKB(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS/VmHWM", pid)
	}
	return rss, hwm, sc.Err()
}

// descendant finds a process under root (any depth) whose executable has the base name exe.
func descendant(root int, exe string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := statFields(string(b))
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pid] = pp
	}
	for pid := range parent {
		if pid == root {
			continue
		}
		under := false
		for p, i := parent[pid], 0; p != 0 && i < 64; p, i = parent[p], i+1 {
			if p == root {
				under = true
				break
			}
		}
		if !under {
			continue
		}
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && filepath.Base(target) == exe {
			return pid
		}
	}
	return 0
}

// clockTicks is the kernel's USER_HZ from getconf CLK_TCK, else 100 (said so in the report).
func clockTicks() (int64, bool) {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n, true
		}
	}
	return 100, false
}
