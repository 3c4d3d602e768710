package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Stopping a child: after its stdin is closed it has closeGrace to exit, then its process
// group gets SIGTERM and termGrace, then SIGKILL. Once it is reaped, whatever else in the group
// still holds its stderr has stderrDrain to let go before the pipe is closed under it. A child
// whose connection broke has exitGrace to exit by itself before it is stopped.
const (
	exitGrace   = 100 * time.Millisecond
	closeGrace  = 2 * time.Second
	termGrace   = 3 * time.Second
	stderrDrain = time.Second
)

const (
	stderrTailLines = 20
	maxStderrLine   = 4096 // longer lines are logged in pieces
)

// dialStdio starts the server's child and returns the transport over its stdin and stdout.
func (u *Upstream) dialStdio(s *session) (mcp.Transport, error) {
	u.stderr.reset()
	u.output.newSession()
	p, err := startProcess(u.cfg, u.log, &u.stderr, func(status string) {
		s.cancel(fmt.Errorf("process exited with %s", status))
	})
	if err != nil {
		return nil, err
	}
	s.proc = p
	u.log.Info("upstream process started", "pid", p.cmd.Process.Pid)
	return &stdioTransport{server: u.cfg.Name, limit: u.maxResultBytes(), log: u.log, stats: &u.output, r: p.stdout, w: p.stdin, notes: &s.notes}, nil
}

// process is one child of a stdio server, leader of its own process group.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // our ends of the child's pipes
	stdout *os.File
	stderr *os.File

	stopping atomic.Bool // stop has begun: an exit from now on was asked for

	exited   chan struct{} // closed once the child has been reaped; the fields below are set then
	selfExit bool          // it exited before stop began
	waitErr  error

	stderrDone chan struct{} // closed when stderr has been read to its end
}

// startProcess launches cfg.Command with cfg.Args in cfg.Cwd, in the environment childEnv makes
// for it (the base, what env_inherit names, cfg.Env; never the gateway's secrets), in a new
// process group. Each stderr line is logged and kept in tail.
// onExit is called with the exit status when the child has exited and been reaped.
func startProcess(cfg config.Server, log *slog.Logger, tail *ring, onExit func(status string)) (*process, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Env = childEnv(cfg, os.Environ())
	cmd.SysProcAttr = sysProcAttr()

	// The pipes are plain *os.File, so exec starts no copying goroutines and Wait returns as
	// soon as the child is reaped, even while a grandchild still holds one of them.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeFiles(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	closeFiles(inR, outW, errW) // the child has its own copies
	if err != nil {
		closeFiles(inW, outR, errR)
		return nil, fmt.Errorf("starting the process: %w", err)
	}
	p := &process{
		cmd:        cmd,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
	}
	go p.readStderr(log, tail)
	go p.wait(onExit)
	return p, nil
}

func (p *process) wait(onExit func(string)) {
	err := p.cmd.Wait()
	p.selfExit = !p.stopping.Load()
	p.waitErr = err
	onExit(p.status())
	close(p.exited)
}

func (p *process) readStderr(log *slog.Logger, tail *ring) {
	defer close(p.stderrDone)
	r := bufio.NewReaderSize(p.stderr, maxStderrLine)
	for {
		chunk, err := r.ReadSlice('\n')
		if line := strings.TrimRight(string(chunk), "\r\n"); line != "" {
			tail.add(line)
			log.Info(line, "stream", "stderr")
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// stop makes the child exit, however it is behaving, and reaps it and its process group. It
// returns once stderr has been read to its end.
func (p *process) stop() {
	p.stopping.Store(true)
	_ = p.stdin.Close() // a well-behaved MCP server exits at the end of its input
	if !p.awaitExit(closeGrace) {
		p.signalGroup(syscall.SIGTERM)
		if !p.awaitExit(termGrace) {
			p.signalGroup(syscall.SIGKILL)
			<-p.exited
		}
	}
	// Whatever the child left running in its group goes with it.
	p.signalGroup(syscall.SIGKILL)
	if !awaitClosed(p.stderrDone, stderrDrain) {
		_ = p.stderr.Close() // held open by something outside the group
		<-p.stderrDone
	}
}

// closeOutput closes our ends of the child's stdout and stderr, once nothing reads them.
func (p *process) closeOutput() { closeFiles(p.stdout, p.stderr) }

func (p *process) awaitExit(d time.Duration) bool { return awaitClosed(p.exited, d) }

// signalGroup signals every process in the child's group. The group keeps its id while any
// member lives, so after the leader was reaped this still reaches what it left behind.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// exitedByItself reports whether the child exited before it was asked to. Valid after exit.
func (p *process) exitedByItself() bool {
	select {
	case <-p.exited:
		return p.selfExit
	default:
		return false
	}
}

// status is the child's exit status, such as "exit status 1" or "signal: killed".
func (p *process) status() string {
	if ps := p.cmd.ProcessState; ps != nil {
		return ps.String()
	}
	return p.waitErr.Error()
}

func awaitClosed(c <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c:
		return true
	case <-t.C:
		return false
	}
}

func closeFiles(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// ring keeps the last stderrTailLines lines of a child's stderr for failure reports.
type ring struct {
	mu    sync.Mutex
	buf   [stderrTailLines]string
	next  int
	count int
}

func (r *ring) add(line string) {
	r.mu.Lock()
	r.buf[r.next] = line
	r.next = (r.next + 1) % len(r.buf)
	r.count = min(r.count+1, len(r.buf))
	r.mu.Unlock()
}

// lines returns the kept lines, oldest first, or nil.
func (r *ring) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count == 0 {
		return nil
	}
	out := make([]string, 0, r.count)
	for i := range r.count {
		out = append(out, r.buf[(r.next-r.count+i+len(r.buf))%len(r.buf)])
	}
	return out
}

func (r *ring) reset() {
	r.mu.Lock()
	r.buf, r.next, r.count = [stderrTailLines]string{}, 0, 0
	r.mu.Unlock()
}
