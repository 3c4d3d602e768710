package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// Restart backoff: it starts at backoffMin, doubles after every failed start or crash up to the
// server's restart_backoff_max_sec, and starts over once a server stayed ready for stableAfter.
const (
	backoffMin  = 200 * time.Millisecond
	stableAfter = 30 * time.Second
)

// clientName is how the gateway introduces itself to upstream servers.
const clientName = "mcp-gateway"

var (
	errStopping        = errors.New("the gateway is stopping the server")
	errOperatorRestart = errors.New("restart requested by an operator")
)

// State is where a server is in its life cycle.
type State int

const (
	// Starting: launching, initializing and listing tools.
	Starting State = iota
	// Ready: calls are dispatched.
	Ready
	// Backoff: the server failed or crashed and waits to be started again.
	Backoff
	// Stopped: not started yet, or stopped by Close.
	Stopped
)

func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Ready:
		return "ready"
	case Backoff:
		return "backoff"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Upstream is one supervised server. Its methods are safe for concurrent use.
type Upstream struct {
	cfg  config.Server
	log  *slog.Logger
	opts Options
	// dial prepares the transport of a new session: it starts the child of a stdio server.
	dial func(*session) (mcp.Transport, error)
	// httpTransport carries an HTTP server's requests; nil for stdio.
	httpTransport *http.Transport
	tokens        *tokenSource  // an HTTP server's OAuth token, across sessions; set by dial
	pingInterval  time.Duration // how often an HTTP server is pinged

	ready    atomic.Pointer[session] // the session calls go to; nil unless Ready
	queue    *fifo                   // turns of a physical server; nil otherwise
	progress progressRoutes
	stderr   ring        // the current child's last stderr lines
	output   outputStats // what the server wrote that was refused (output.go)
	refusals refusals    // HTTP answers replaced by boundedTransport (httpbody.go)

	origins      origins             // requests in flight and the downstream sessions they serve
	elicitations elicitationSessions // URL elicitations awaiting their completion
	subsMu       sync.Mutex
	subs         map[string]bool // resource URIs the gateway is subscribed to

	started    atomic.Bool     // Manager.Start ran: a supervisor exists
	restartReq chan chan error // operator resets, answered after the next start attempt
	done       chan struct{}   // closed when the supervisor has returned
	notifyMu   sync.Mutex      // keeps OnToolsChanged calls for this server apart

	mu        sync.Mutex
	state     State
	lastErr   string
	errStderr []string // the stderr lines of the child lastErr is about
	restarts  int
	tools     []*mcp.Tool
	features  Features
	changed   chan struct{} // closed and replaced at every state change
}

func newUpstream(cfg config.Server, opts Options) *Upstream {
	u := &Upstream{
		cfg:          cfg,
		log:          opts.Logger.With("server", cfg.Name),
		opts:         opts,
		progress:     progressRoutes{prefix: "gw-" + cfg.Name + "-"},
		restartReq:   make(chan chan error),
		done:         make(chan struct{}),
		state:        Stopped,
		changed:      make(chan struct{}),
		pingInterval: pingInterval,
	}
	switch {
	case cfg.URL != "":
		u.httpTransport = http.DefaultTransport.(*http.Transport).Clone()
		u.dial = u.dialHTTP
		u.origins.linger = logLinger
	case cfg.Command != "":
		u.dial = u.dialStdio
	default:
		u.dial = func(*session) (mcp.Transport, error) {
			return nil, errors.New("neither command nor url is configured")
		}
	}
	if cfg.Physical {
		limit := cfg.QueueSize
		if limit <= 0 {
			limit = config.DefaultQueueSize
		}
		u.queue = &fifo{limit: limit}
	}
	return u
}

// Name is the server's configured name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Config is the server's configuration.
func (u *Upstream) Config() config.Server { return u.cfg }

// State is the server's current state.
func (u *Upstream) State() State {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.state
}

// Tools is the last complete tool list the server gave (all pages), nil before the first
// discovery. It stays available while the server restarts. Callers must not modify it.
func (u *Upstream) Tools() []*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
}

// LastError says why the server is not ready: which server, what failed (for a child that
// exited, its exit status) and the last lines it printed on stderr. It is "" when ready.
func (u *Upstream) LastError() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.state == Ready:
		return ""
	case u.lastErr != "":
		return u.lastErr
	}
	return fmt.Sprintf("server %q is %s", u.cfg.Name, u.state)
}

// Restarts counts the start attempts after the first one: restarts after crashes, retries of
// failed starts and operator resets.
func (u *Upstream) Restarts() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.restarts
}

// Queued is the number of calls waiting for a physical server's one call at a time; 0 for a
// server that is not physical.
func (u *Upstream) Queued() int {
	if u.queue == nil {
		return 0
	}
	return u.queue.queued()
}

// Restart stops the current session and child, if any, and starts the server again at once, as
// an operator reset; a pending backoff is skipped. Calls in flight fail as crashed. It returns
// when the new start attempt has finished: nil if the server is ready, else why not.
func (u *Upstream) Restart(ctx context.Context) error {
	if !u.started.Load() {
		return fmt.Errorf("server %q: not started", u.cfg.Name)
	}
	reply := make(chan error, 1)
	select {
	case u.restartReq <- reply:
	case <-u.done:
		return fmt.Errorf("server %q: stopped", u.cfg.Name)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// supervise runs the server until ctx ends: start, serve until the session goes down or an
// operator asks for a restart, tear down, back off, start again.
func (u *Upstream) supervise(ctx context.Context) {
	defer close(u.done)
	var pending []chan error // operator resets waiting for the next start attempt
	answer := func(err error) {
		for _, r := range pending {
			r <- err
		}
		pending = nil
	}
	delay := backoffMin
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			u.mu.Lock()
			u.restarts++
			u.mu.Unlock()
			u.setState(Starting, nil)
		}
		s, tools, features, err := u.connect(ctx)
		if ctx.Err() != nil {
			if s != nil {
				u.teardown(s, errStopping)
			}
			break
		}
		if err != nil {
			answer(err)
			wait := jitter(delay)
			u.setError(err.Error())
			u.setState(Backoff, nil)
			u.log.Warn("upstream failed to start", "error", err.Error(), "retry_in", wait)
			if !u.pause(ctx, wait, &pending, &delay) {
				break
			}
			continue
		}

		readyAt := time.Now()
		u.mu.Lock()
		u.tools = tools
		u.features = features
		u.mu.Unlock()
		u.toolsChanged() // before Ready: whoever waits for Ready finds the catalog told
		u.setState(Ready, s)
		answer(nil)
		u.log.Info("upstream ready", "tools", len(tools))
		s.wg.Add(2)
		go u.watch(s)
		go u.relistLoop(s)
		if s.proc == nil {
			s.wg.Add(1)
			go u.healthLoop(s)
		}

		select {
		case <-s.ctx.Done():
		case r := <-u.restartReq:
			pending = append(pending, r)
		case <-ctx.Done():
		}
		u.ready.Store(nil) // new calls wait for the next session from here on
		if ctx.Err() != nil {
			u.teardown(s, errStopping)
			break
		}
		if s.ctx.Err() == nil { // an operator reset
			u.log.Info("restarting upstream on operator request")
			u.setState(Starting, nil)
			u.teardown(s, errOperatorRestart)
			delay = backoffMin
			continue
		}
		cause := context.Cause(s.ctx)
		s.settle()
		u.setError(u.describe(s, false, cause))
		u.setState(Backoff, nil)
		u.teardown(s, cause)
		if time.Since(readyAt) >= stableAfter {
			delay = backoffMin
		}
		wait := jitter(delay)
		msg := u.describe(s, false, cause) // now with all the child printed
		u.setError(msg)
		u.log.Warn("upstream lost", "error", msg, "retry_in", wait)
		if !u.pause(ctx, wait, &pending, &delay) {
			break
		}
	}
	answer(fmt.Errorf("server %q: stopped", u.cfg.Name))
	u.setError(fmt.Sprintf("server %q: stopped", u.cfg.Name))
	u.setState(Stopped, nil)
	u.log.Info("upstream stopped")
}

// pause waits out a backoff. An operator reset cuts it short and starts the backoff over;
// otherwise the next one doubles. It reports false when ctx ended.
func (u *Upstream) pause(ctx context.Context, d time.Duration, pending *[]chan error, delay *time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		*delay = min(*delay*2, max(u.backoffMax(), backoffMin))
		return true
	case r := <-u.restartReq:
		*pending = append(*pending, r)
		*delay = backoffMin
		return true
	case <-ctx.Done():
		return false
	}
}

// jitter spreads restarts of servers that failed together by up to a fifth of d.
func jitter(d time.Duration) time.Duration { return d + rand.N(d/5+1) }

func (u *Upstream) toolsChanged() {
	if u.opts.OnToolsChanged == nil {
		return
	}
	u.notifyMu.Lock()
	defer u.notifyMu.Unlock()
	u.opts.OnToolsChanged(u.cfg.Name)
}

// setState moves the server to st and wakes everything waiting for a change. s is the session
// calls go to from now on; it is nil unless st is Ready. Only the supervisor (and Start, before
// it) changes the state, so OnStateChange calls never overlap.
func (u *Upstream) setState(st State, s *session) {
	u.mu.Lock()
	u.ready.Store(s)
	was := u.state
	u.state = st
	if st == Ready {
		u.lastErr = ""
	}
	close(u.changed)
	u.changed = make(chan struct{})
	u.mu.Unlock()
	if st != was && u.opts.OnStateChange != nil {
		u.opts.OnStateChange(u.cfg.Name, st)
	}
}

// setError records why the server is not ready, with the stderr lines of the child the reason
// is about (the next start clears the lines it shows).
func (u *Upstream) setError(msg string) {
	lines := u.stderr.lines()
	u.mu.Lock()
	u.lastErr, u.errStderr = msg, lines
	u.mu.Unlock()
}

// notReady describes the server for a StartError.
func (u *Upstream) notReady() NotReady {
	lines := u.stderr.lines()
	u.mu.Lock()
	defer u.mu.Unlock()
	n := NotReady{Server: u.cfg.Name, State: u.state, Reason: u.lastErr, Stderr: lines}
	if u.lastErr == "" {
		n.Reason = fmt.Sprintf("server %q is still %s", u.cfg.Name, u.state)
	} else {
		n.Stderr = u.errStderr
	}
	return n
}

// awaitReady returns the session calls go to, waiting for the server to become ready within
// ctx. The error wraps ErrUnavailable and says the server's state and why it is not ready.
func (u *Upstream) awaitReady(ctx context.Context) (*session, error) {
	for {
		if s := u.ready.Load(); s != nil {
			return s, nil
		}
		u.mu.Lock()
		s, changed, st, why := u.ready.Load(), u.changed, u.state, u.lastErr
		u.mu.Unlock()
		if s != nil {
			return s, nil
		}
		if st != Stopped {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
			}
		}
		if why == "" {
			why = fmt.Sprintf("server %q is %s", u.cfg.Name, st)
		}
		return nil, fmt.Errorf("%w (%s): %s", ErrUnavailable, st, why)
	}
}

func (u *Upstream) startupTimeout() time.Duration {
	return seconds(u.cfg.StartupTimeoutSec, config.DefaultStartupTimeoutSec)
}

// maxResultBytes is the largest message the gateway reads from the server (max_result_bytes).
func (u *Upstream) maxResultBytes() int64 {
	if u.cfg.MaxResultBytes > 0 {
		return u.cfg.MaxResultBytes
	}
	return config.DefaultMaxResultBytes
}

func (u *Upstream) backoffMax() time.Duration {
	return seconds(u.cfg.RestartBackoffMaxSec, config.DefaultRestartBackoffMaxSec)
}
