package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// startSlack lets a server's own startup timeout fire, and its reason be recorded, before
// Start gives up waiting for it.
const startSlack = 500 * time.Millisecond

// Options are the manager's hooks into the rest of the gateway.
type Options struct {
	// Logger receives the supervisors' logs and every stdio child's stderr, with the server's
	// name as attribute "server". Nil discards them.
	Logger *slog.Logger
	// OnToolsChanged is called after a server's tools, resources or prompts were
	// (re)discovered: at first discovery, after a list_changed and after every restart; after
	// a (re)start it is called before the server becomes Ready. Calls for one server never
	// overlap. It must return promptly and must not call Restart or Close.
	OnToolsChanged func(server string)
	// Version is the gateway's version, announced to servers with its name.
	Version string
	// OnResourceUpdated, if set, receives the server's notifications/resources/updated.
	OnResourceUpdated func(server string, p *mcp.ResourceUpdatedNotificationParams)
	// OnStateChange, if set, is called after a server's state changed. Calls for one server
	// never overlap. It must return promptly and must not call Restart or Close.
	OnStateChange func(server string, s State)
	// Admit, if set, is asked right before a call is sent (after a physical server's call got
	// its turn): an error refuses the call, which is then not sent, and Call returns that error
	// wrapped. It must be fast; the gateway checks lockouts here, so that calls that queued
	// behind a call that timed out are refused too. It is not asked for calls marked WithStop
	// or WithInspection, which stay allowed during a lockout.
	Admit func(server string) error
	// FastPath sends the tool calls to stdio servers on the gateway's own decode-once path
	// (fastcall.go) instead of through the MCP SDK's client session: the same bytes are sent
	// and the same results and errors returned, with a fraction of the allocation. HTTP
	// servers always take the SDK's path. The gateway sets it from gateway.fast_path.
	FastPath bool
	// Telemetry, when set, sends the trace context of the gateway's span upstream (trace.go):
	// its traceparent and tracestate, and its baggage only with telemetry.forward_baggage, in
	// the _meta of the tools/call on either path (MCP SEP-414), and as the W3C headers of an
	// HTTP server's requests, so that the server's spans nest under the gateway's. Nil is
	// telemetry off: what is sent is what it always was.
	Telemetry *telemetry.Provider
}

// Manager supervises every configured upstream server.
type Manager struct {
	opts    Options
	servers atomic.Pointer[serverSet] // replaced whole by Reconfigure

	ctx    context.Context // ends at Close; parent of every supervisor
	cancel context.CancelFunc
	wg     sync.WaitGroup // the supervisors

	reconfigure sync.Mutex // one Reconfigure at a time

	mu      sync.Mutex
	started bool
	closed  bool
	stops   map[*Upstream]context.CancelFunc // ends one supervisor; set while it runs
}

// serverSet is the servers in config order, and by name.
type serverSet struct {
	ups    []*Upstream
	byName map[string]*Upstream
}

func newServerSet(ups []*Upstream) *serverSet {
	s := &serverSet{ups: ups, byName: make(map[string]*Upstream, len(ups))}
	for _, u := range ups {
		s.byName[u.Name()] = u
	}
	return s
}

// NewManager prepares one Upstream per server, in config order. Nothing starts before Start.
// The servers are expected to be valid (names unique, command or url set), as the config
// loader ensures; a server with neither fails at every start with a clear reason.
func NewManager(servers []config.Server, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{opts: opts, ctx: ctx, cancel: cancel, stops: make(map[*Upstream]context.CancelFunc)}
	var ups []*Upstream
	for _, cfg := range servers {
		ups = append(ups, newUpstream(cfg, opts))
	}
	m.servers.Store(newServerSet(ups))
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
	ups := m.servers.Load().ups
	for _, u := range ups {
		m.launch(u)
	}
	m.mu.Unlock()
	return awaitStarted(ctx, ups, begin)
}

// launch starts u's supervisor. Called with mu held, before Close.
func (m *Manager) launch(u *Upstream) {
	ctx, cancel := context.WithCancel(m.ctx)
	m.stops[u] = cancel
	u.started.Store(true)
	u.setState(Starting, nil)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		u.supervise(ctx)
	}()
}

// stop ends u's supervisor, if it runs, and returns when u's session and child are gone.
func (m *Manager) stop(u *Upstream) {
	m.mu.Lock()
	cancel := m.stops[u]
	delete(m.stops, u)
	m.mu.Unlock()
	if cancel != nil {
		cancel()
		<-u.done
	}
}

// awaitStarted waits until each of ups is ready or its startup_timeout_sec, counted from
// begin, has passed (or ctx ends), and names every server that was not ready.
func awaitStarted(ctx context.Context, ups []*Upstream, begin time.Time) error {
	var notReady []NotReady
	for _, u := range ups {
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

// Reconfigure brings the servers in line with servers, the configuration of a reload. A server
// whose launch settings changed (see sameLaunch) is stopped, then started again with the new
// ones; a server no longer configured is stopped; a new one is started; every other server keeps
// running untouched, with its session, child and tool list. It returns the names of each group,
// in config order.
//
// A server is stopped like at Close: calls in flight on it fail as when it crashes. Stopped
// servers are gone before any server starts, so that one robot driver never runs twice. Like
// Start, it then waits for the started servers and returns a *StartError naming those not ready
// in time; they keep retrying in the background. Before Start it only replaces the servers that
// Start will start. It fails only after Close.
func (m *Manager) Reconfigure(ctx context.Context, servers []config.Server) (restarted, started, stopped []string, err error) {
	m.reconfigure.Lock()
	defer m.reconfigure.Unlock()

	current := m.servers.Load()
	next := make([]*Upstream, 0, len(servers))
	var fresh, retired []*Upstream
	configured := make(map[string]bool, len(servers))
	for _, cfg := range servers {
		configured[cfg.Name] = true
		old := current.byName[cfg.Name]
		if old != nil && sameLaunch(old.cfg, cfg) {
			next = append(next, old)
			continue
		}
		u := newUpstream(cfg, m.opts)
		next = append(next, u)
		fresh = append(fresh, u)
		if old != nil {
			retired = append(retired, old)
			restarted = append(restarted, cfg.Name)
		} else {
			started = append(started, cfg.Name)
		}
	}
	for _, u := range current.ups {
		if !configured[u.Name()] {
			retired = append(retired, u)
			stopped = append(stopped, u.Name())
		}
	}

	var wg sync.WaitGroup
	for _, u := range retired {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop(u)
		}()
	}
	wg.Wait()

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, nil, nil, errors.New("upstream: Reconfigure called after Close")
	}
	m.servers.Store(newServerSet(next))
	if !m.started {
		m.mu.Unlock()
		return restarted, started, stopped, nil
	}
	begin := time.Now()
	for _, u := range fresh {
		m.launch(u)
	}
	m.mu.Unlock()
	return restarted, started, stopped, awaitStarted(ctx, fresh, begin)
}

// sameLaunch reports whether a running server can keep running under the configuration b: an
// Upstream is built from these settings (its process or connection, its call queue, its
// start-up and restart timing) and holds them for its life. The rest of a server's settings
// (call timeouts, contract, untrusted, tool filters) is read per call by the gateway. A setting
// the supervisor comes to read must be added here.
func sameLaunch(a, b config.Server) bool {
	return a.Name == b.Name && a.Command == b.Command && slices.Equal(a.Args, b.Args) && a.Cwd == b.Cwd &&
		sameEnv(a, b) && a.URL == b.URL && maps.Equal(a.HeadersEnv, b.HeadersEnv) && a.OAuth.Equal(b.OAuth) &&
		a.Physical == b.Physical && a.QueueSize == b.QueueSize &&
		a.StartupTimeoutSec == b.StartupTimeoutSec && a.RestartBackoffMaxSec == b.RestartBackoffMaxSec &&
		a.ProtocolVersion == b.ProtocolVersion && a.MaxResultBytes == b.MaxResultBytes
}

// Get returns the server with that name, or nil.
func (m *Manager) Get(name string) *Upstream { return m.servers.Load().byName[name] }

// All returns every server in config order. A Reconfigure after the call does not change the
// slice returned.
func (m *Manager) All() []*Upstream { return m.servers.Load().ups }

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
