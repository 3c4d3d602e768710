package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// startSlack lets a server's own startup timeout fire, and its reason be recorded, before
// Start gives up waiting for it.
const startSlack = 500 * time.Millisecond

// Options are the manager's hooks into the rest of the gateway.
type Options struct {
	// Logger receives the supervisors' logs and every stdio child's stderr, with the server's
	// name as attribute "server". Nil discards them.
	Logger *slog.Logger
	// OnToolsChanged is called after a server's tool list was (re)discovered: at first
	// discovery, after tools/list_changed and after every restart; after a (re)start it is
	// called before the server becomes Ready. Calls for one server never overlap. It must
	// return promptly and must not call Restart or Close.
	OnToolsChanged func(server string)
	// OnStateChange, if set, is called after a server's state changed. Calls for one server
	// never overlap. It must return promptly and must not call Restart or Close.
	OnStateChange func(server string, s State)
	// Admit, if set, is asked right before a call is sent (after a physical server's call got
	// its turn): an error refuses the call, which is then not sent, and Call returns that error
	// wrapped. It must be fast; the gateway checks lockouts here, so that calls that queued
	// behind a call that timed out are refused too.
	Admit func(server string) error
}

// Manager supervises every configured upstream server.
type Manager struct {
	ups    []*Upstream
	byName map[string]*Upstream

	ctx    context.Context // ends at Close; parent of every supervisor
	cancel context.CancelFunc
	wg     sync.WaitGroup // the supervisors

	mu      sync.Mutex
	started bool
	closed  bool
}

// NewManager prepares one Upstream per server, in config order. Nothing starts before Start.
// The servers are expected to be valid (names unique, command or url set), as the config
// loader ensures; a server with neither fails at every start with a clear reason.
func NewManager(servers []config.Server, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{byName: make(map[string]*Upstream, len(servers)), ctx: ctx, cancel: cancel}
	for _, cfg := range servers {
		u := newUpstream(cfg, opts)
		m.ups = append(m.ups, u)
		m.byName[cfg.Name] = u
	}
	return m
}

// Start starts every server concurrently and waits until each is ready or its
// startup_timeout_sec has passed (or ctx ends). It never fails because a server failed: such a
// server keeps retrying with backoff, and Start returns a *StartError naming every server that
// was not ready; the caller decides whether that is fatal (--require-all). Start may be called
// once, and not after Close.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return errors.New("upstream: Start called twice or after Close")
	}
	m.started = true
	begin := time.Now()
	for _, u := range m.ups {
		u.started.Store(true)
		u.setState(Starting, nil)
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			u.supervise(m.ctx)
		}()
	}
	m.mu.Unlock()

	var notReady []NotReady
	for _, u := range m.ups {
		wait, cancel := context.WithDeadline(ctx, begin.Add(u.startupTimeout()+startSlack))
		_, err := u.awaitReady(wait)
		cancel()
		if err != nil {
			notReady = append(notReady, u.notReady())
		}
	}
	if notReady != nil {
		return &StartError{NotReady: notReady}
	}
	return nil
}

// Get returns the server with that name, or nil.
func (m *Manager) Get(name string) *Upstream { return m.byName[name] }

// All returns every server in config order.
func (m *Manager) All() []*Upstream { return m.ups }

// Close stops every server: each child's process group is signalled and the child reaped, each
// HTTP session closed, and every goroutine of the package has returned when Close returns.
// Calls still in flight fail. Close is idempotent.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return nil
}

// StartError is returned by Start when some servers were not ready in time. They keep
// retrying in the background.
type StartError struct {
	NotReady []NotReady
}

// NotReady describes one server that was not ready when Start returned.
type NotReady struct {
	Server string
	State  State
	// Reason says why: the server's last failure with its last stderr lines, or that its first start
	// has not finished.
	Reason string
	// Stderr holds the last lines the child printed on stderr (stdio servers).
	Stderr []string
}

func (e *StartError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d upstream server(s) not ready:", len(e.NotReady))
	for _, n := range e.NotReady {
		b.WriteString("\n- ")
		b.WriteString(n.Reason)
	}
	return b.String()
}
