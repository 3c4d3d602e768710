package upstream

//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them for clients is what this file does.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server without a child process is pinged every pingInterval; no answer within pingTimeout
// counts as a lost connection.
const (
	pingInterval = 15 * time.Second
	pingTimeout  = 10 * time.Second
)

// session is one life of a server: a started child (stdio) or an HTTP connection, with the MCP
// client session over it, from a start to the teardown after it.
type session struct {
	ctx    context.Context // done when the session is down; its cause says why
	cancel context.CancelCauseFunc
	proc   *process       // the child of a stdio server; nil for HTTP
	conn   mcp.Connection // the transport connection: closing it fails in-flight calls at once
	cs     *mcp.ClientSession
	// release frees what dial acquired besides the child (idle HTTP connections); may be nil.
	release func()
	relist  chan struct{}       // tools/list_changed arrived; capacity 1 coalesces bursts
	notes   notes               // log and progress notifications of a stdio server, read and handled (order.go)
	impl    *mcp.Implementation // how the client introduced itself, as sent in the _meta of requests
	// relistFeatures: resources or prompts list_changed arrived; capacity 1 coalesces bursts.
	relistFeatures chan struct{}
	wg             sync.WaitGroup // the session's goroutines
}

// settle gives the child of a session that failed a moment to finish exiting, so that its exit
// status, rather than the broken pipe it caused, explains the failure.
func (s *session) settle() {
	if s.proc != nil {
		s.proc.awaitExit(exitGrace)
	}
}

// connTransport records the connection its transport makes. Teardown closes that connection
// directly: ClientSession.Close would wait for the calls in flight, closing the connection
// fails them at once. The connection itself is handed to the SDK unwrapped, so the SDK still
// sees the optional interfaces it implements.
type connTransport struct {
	mcp.Transport
	conn mcp.Connection
}

func (t *connTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	t.conn = c
	return c, err
}

// connect starts one session: dial, initialize and list every tool within
// startup_timeout_sec. On failure everything it started is torn down, and the error says which
// server, what failed and what the child printed on stderr.
func (u *Upstream) connect(ctx context.Context) (*session, []*mcp.Tool, Features, error) {
	s := &session{relist: make(chan struct{}, 1), relistFeatures: make(chan struct{}, 1)}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	t, err := u.dial(s)
	if err != nil {
		s.cancel(err)
		return nil, nil, Features{}, fmt.Errorf("server %q: %w", u.cfg.Name, err)
	}
	relistFeatures := func() {
		select {
		case s.relistFeatures <- struct{}{}:
		default: // a re-list is already due
		}
	}
	version := u.opts.Version
	if version == "" {
		version = "dev"
	}
	s.impl = &mcp.Implementation{Name: clientName, Version: version}
	client := mcp.NewClient(s.impl, &mcp.ClientOptions{
		Logger: u.log,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default: // a re-list is already due; it will see this change too
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			defer s.notes.handledOne()
			u.progress.deliver(req.Params)
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { relistFeatures() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { relistFeatures() },
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			if f := u.opts.OnResourceUpdated; f != nil {
				f(u.cfg.Name, req.Params)
			}
		},
		// Roots are not carried (the SDK answers roots/list from the client's own list, with no
		// hook to ask the client behind the gateway), so none are declared; sampling and
		// elicitation are declared by the SDK for the handlers below.
		Capabilities: &mcp.ClientCapabilities{},
		// Requests and log messages the server sends while serving a request go to the
		// downstream client whose request it is (forward.go).
		CreateMessageWithToolsHandler: u.handleCreateMessage,
		ElicitationHandler:            u.handleElicit,
		ElicitationCompleteHandler:    u.handleElicitationComplete,
		LoggingMessageHandler: func(ctx context.Context, req *mcp.LoggingMessageRequest) {
			defer s.notes.handledOne()
			u.handleLog(ctx, req)
		},
		// Input requests in results (MCP 2026-07-28) are passed to the downstream client as
		// they are, with the request state, and its answers passed back: the gateway does not
		// answer them itself.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	timeout := u.startupTimeout()
	startCtx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	ct := &connTransport{Transport: t}
	cs, err := client.Connect(startCtx, ct, &mcp.ClientSessionOptions{ProtocolVersion: u.cfg.ProtocolVersion})
	s.conn = ct.conn
	var tools []*mcp.Tool
	var features Features
	if err == nil {
		s.cs = cs
		tools, err = listTools(startCtx, cs)
	}
	if err == nil {
		features = u.listFeatures(startCtx, cs)
		u.resubscribe(startCtx, cs)
	}
	if err != nil {
		if errors.Is(startCtx.Err(), context.DeadlineExceeded) && s.ctx.Err() == nil {
			err = fmt.Errorf("did not initialize and list its tools within %s", timeout)
		} else {
			s.settle()
		}
		u.teardown(s, err)
		return nil, nil, Features{}, errors.New(u.describe(s, true, err))
	}
	return s, tools, features, nil
}

// listTools returns every tool the server lists, following pagination.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	tools := []*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing tools: %w", err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// teardown ends a session and everything it owns; it returns when all of it is gone. A child is
// asked to exit by closing its stdin, then its process group is signalled, and it is reaped.
func (u *Upstream) teardown(s *session, cause error) {
	s.cancel(cause)
	if s.proc != nil {
		s.proc.stop()
	}
	if s.conn != nil {
		_ = s.conn.Close()
	}
	if s.cs != nil {
		_ = s.cs.Close()
	}
	if s.proc != nil {
		s.proc.closeOutput()
	}
	if s.release != nil {
		s.release()
	}
	s.wg.Wait()
}

// watch marks the session down when its connection ends.
func (u *Upstream) watch(s *session) {
	defer s.wg.Done()
	err := s.cs.Wait()
	if err == nil {
		err = errors.New("the server closed the connection")
	}
	s.cancel(fmt.Errorf("session ended: %w", err))
}

// relistLoop lists the tools again after tools/list_changed, for as long as the session lives.
func (u *Upstream) relistLoop(s *session) {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.relist:
		case <-s.relistFeatures:
			ctx, cancel := context.WithTimeout(s.ctx, u.startupTimeout())
			f := u.listFeatures(ctx, s.cs)
			cancel()
			u.mu.Lock()
			current := s.ctx.Err() == nil
			if current {
				u.features = f
			}
			u.mu.Unlock()
			if current {
				u.log.Info("upstream resources or prompts changed", "resources", len(f.Resources), "templates", len(f.Templates), "prompts", len(f.Prompts))
				u.toolsChanged()
			}
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, u.startupTimeout())
		tools, err := listTools(ctx, s.cs)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil {
				u.log.Warn("re-listing tools after tools/list_changed failed", "error", err.Error())
			}
			continue
		}
		u.mu.Lock()
		current := s.ctx.Err() == nil // a session being torn down no longer speaks for the server
		if current {
			u.tools = tools
		}
		u.mu.Unlock()
		if current {
			u.log.Info("upstream tools changed", "tools", len(tools))
			u.toolsChanged()
		}
	}
}

// healthLoop pings a server that has no child process: unlike a child's exit, a server that
// went away is otherwise only noticed when something is sent to it.
func (u *Upstream) healthLoop(s *session) {
	defer s.wg.Done()
	tick := time.NewTicker(u.pingInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, pingTimeout)
		err := s.cs.Ping(ctx, nil)
		cancel()
		if err != nil && transportFailed(err) && s.ctx.Err() == nil { // an error answer is an answer
			s.cancel(fmt.Errorf("no answer to ping: %w", err))
			return
		}
	}
}

// describe says what ended a session: which server, a child's exit status or the error, and
// the child's last stderr lines.
func (u *Upstream) describe(s *session, starting bool, cause error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %q: ", u.cfg.Name)
	switch {
	case s.proc != nil && s.proc.exitedByItself():
		if starting {
			fmt.Fprintf(&b, "process exited during startup with %s", s.proc.status())
		} else {
			fmt.Fprintf(&b, "process exited unexpectedly with %s", s.proc.status())
		}
	case starting:
		fmt.Fprintf(&b, "startup failed: %v", cause)
	default:
		fmt.Fprintf(&b, "connection lost: %v", cause)
	}
	if s.proc != nil {
		b.WriteString(u.output.sessionNote())
		if lines := u.stderr.lines(); len(lines) > 0 {
			b.WriteString("; last stderr lines:\n  ")
			b.WriteString(strings.Join(lines, "\n  "))
		}
	}
	return b.String()
}
