package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// proc is a child started in its own process group, so that stopping it also stops whatever it
// started in turn (the suite's client shims and their gateways, for example).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *os.File
}

var (
	procsMu sync.Mutex
	procs   = map[*proc]bool{}
)

// start runs argv with env added to the runner's environment, stdout and stderr to logPath.
func start(name, logPath string, env []string, argv ...string) (*proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	procsMu.Lock()
	procs[p] = true
	procsMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		log.Close()
		// Whatever the child left running in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		procsMu.Lock()
		delete(procs, p)
		procsMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to end by itself, then stops it. timedOut reports
// whether it had to be stopped.
func (p *proc) wait(timeout time.Duration) (timedOut bool) {
	select {
	case <-p.done:
		return false
	case <-time.After(timeout):
		p.stop(5 * time.Second)
		return true
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// exitCode is the process's exit code once it has ended (-1 for a signal).
func (p *proc) exitCode() int {
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// stopAll stops every child still running.
func stopAll() {
	procsMu.Lock()
	list := make([]*proc, 0, len(procs))
	for p := range procs {
		list = append(list, p)
	}
	procsMu.Unlock()
	var wg sync.WaitGroup
	for _, p := range list {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(5 * time.Second) }()
	}
	wg.Wait()
}

// onSignal stops every child and exits when the runner is interrupted.
func onSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-c
		fmt.Fprintf(os.Stderr, "conformance: %v: stopping every child\n", s)
		stopAll()
		reapOrphans()
		os.Exit(130)
	}()
}
