package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/console"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [-c FILE] [--stdio] [--listen ADDR] [--require-all] [--insecure-listen]", stdout, stderr)
	fs.addConfig("")
	stdio := fs.Bool("stdio", false, "serve one MCP session on stdin/stdout; HTTP is then off unless --listen is given")
	listen := fs.String("listen", "", "serve HTTP on this address instead of gateway.listen")
	requireAll := fs.Bool("require-all", false, "fail start-up when any upstream is not ready within its startup timeout")
	insecureListen := fs.Bool("insecure-listen", false, "serve HTTP on an address other than loopback without auth.tokens (anyone who can reach it can call every tool) or without gateway.tls (tokens and calls travel in the clear)")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	addr := cfg.Gateway.Listen
	switch {
	case *listen != "":
		addr = *listen
	case *stdio:
		addr = ""
	}
	logger := newLogger(cfg, stderr)
	// Before the state file and the gateway, so that its flush, deferred here, runs after both
	// have closed: the spans of the last calls are exported. From here on the logger puts trace
	// and span ids on the lines of traced calls.
	tel, logger, stopTelemetry, err := startTelemetry(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	// From here on SIGHUP never stops the process: once serving, it reloads the config.
	hangup := make(chan os.Signal, 1)
	signal.Notify(hangup, syscall.SIGHUP)
	defer signal.Stop(hangup)
	creds, err := gateway.LoadCredentials(cfg, os.LookupEnv)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	// The listener's TLS is read only when there is a listener: a stdio gateway needs no key.
	var listenerTLS *gateway.ListenerTLS
	if addr != "" {
		var warnings []string
		listenerTLS, warnings, err = gateway.LoadTLS(cfg)
		for _, w := range warnings {
			logger.Warn(w)
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
	}
	if addr != "" && !gateway.LoopbackListen(addr) {
		switch {
		case !gateway.AuthOn(cfg, creds) && !listenerTLS.ClientCertificates():
			if !*insecureListen {
				fmt.Fprintf(stderr, "mcp-gateway serve: refusing to listen on %s without authentication: anyone who can reach that address could call the robot's tools.\n"+
					"  Configure auth.tokens or auth.oidc so that /mcp needs a bearer token, or listen on a loopback address (127.0.0.1),\n"+
					"  or pass --insecure-listen if only trusted hosts can reach %s.\n", addr, addr)
				return exitError{1}
			}
			logger.Warn("serving /mcp without authentication on an address other than loopback (--insecure-listen): anyone who can reach it can call every tool", "listen", addr)
		case listenerTLS == nil:
			if !*insecureListen {
				fmt.Fprintf(stderr, "mcp-gateway serve: refusing to listen on %s without TLS: the bearer tokens, and every call's arguments and results, would travel in the clear,\n"+
					"  and anyone on the network path could read a token and call the robot's tools with it.\n"+
					"  Configure gateway.tls (cert_file, key_file), or listen on a loopback address (127.0.0.1) behind a TLS proxy on this machine,\n"+
					"  or pass --insecure-listen if the network to %s is itself protected (a VPN, a private link).\n", addr, addr)
				return exitError{1}
			}
			logger.Warn("serving HTTP without TLS on an address other than loopback (--insecure-listen): bearer tokens and calls travel in the clear", "listen", addr)
		}
	}
	gv, err := openGovernance(cfg, logger, stderr, tel)
	if locked := (*store.LockedError)(nil); *stdio && errors.As(err, &locked) {
		// An IDE launching the gateway while the cell's gateway runs: point it to that one.
		fmt.Fprint(stderr, heldStateAdvice(cfg, locked))
		return exitError{1}
	}
	if err != nil {
		return err
	}
	// Last: every audit record of the calls above is flushed before the process exits.
	defer gv.close(logger)
	token, err := adminToken(cfg)
	if err != nil {
		return err
	}

	opts := gateway.Options{Logger: logger, RequireAll: *requireAll, Store: gv.store, Registry: gv.registry, AdminToken: token, Policies: gv.policies, Guards: gv.guards,
		Telemetry: tel, TLS: listenerTLS}
	if addr == "" {
		opts.NoApprover = "this gateway serves stdio only (--stdio without --listen), so no operator can reach its admin API to answer; " +
			"start the gateway with an HTTP listener: add --listen HOST:PORT to mcp-gateway serve --stdio"
	}
	g, err := gateway.New(cfg, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err := g.Close(); err != nil {
			logger.Error("stopping upstreams", "error", err)
		}
	}()

	// Bind before starting upstreams so that a port in use fails at once.
	var ln net.Listener
	if addr != "" {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("cannot listen on %s (gateway.listen): %w", addr, err)
		}
	}
	if err := g.Start(ctx); err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	stopReloads := reloadOnHangup(ctx, g, hangup)
	defer stopReloads()

	errc := make(chan error, 2)
	var srv *http.Server
	if ln != nil {
		// Bounded per request and per connection, but with no ReadTimeout or WriteTimeout: an
		// MCP stream stays open as long as its session and a call may run for minutes.
		var limited net.Listener
		g.MountConsole(console.New(g, console.Options{Credentials: creds, Config: cfg, Logger: logger}))
		srv, limited = g.NewHTTPServer(ln, creds)
		go func() { errc <- srv.Serve(limited) }()
		base := "http://" + ln.Addr().String()
		if listenerTLS != nil {
			base = "https://" + ln.Addr().String()
			logger.Info("serving over TLS", "certificate", listenerTLS.Describe(), "client_auth", listenerTLS.ClientAuth())
		}
		url := base + "/mcp"
		logger.Info("serving MCP over streamable HTTP", "url", url)
		if !*stdio {
			fmt.Fprintf(stderr, "\nmcp-gateway is serving %d tools at %s\n"+
				"  Connect any MCP client with the streamable HTTP transport to that URL, for example the MCP Inspector:\n"+
				"    npx @modelcontextprotocol/inspector  (Transport: Streamable HTTP, URL: %s)\n"+
				"  Operator console: %s/console  Health: %s/healthz  Readiness: %s/readyz\n  Stop with Ctrl-C.\n\n",
				len(g.Catalog().Tools()), url, url, base, base, base)
		}
	}
	if *stdio {
		logger.Info("serving MCP over stdio")
		// Not ctx: a signal starts the drain below, and the session must stay open until the
		// calls in flight have answered; it ends with the process.
		go func() { errc <- g.ServeStdio(context.WithoutCancel(ctx)) }()
	}
	if ln == nil && !*stdio {
		return errors.New("nothing to serve: gateway.listen is empty; give --stdio or --listen")
	}

	select {
	case <-ctx.Done():
		logger.Info("stopping", "reason", "signal")
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, context.Canceled) {
			logger.Error("serving failed", "error", err)
		} else {
			logger.Info("stopping", "reason", "client disconnected")
		}
	}
	// Stop taking work: the HTTP listener closes at once, and calls arriving on open sessions are
	// refused. The calls in flight get gateway.shutdown_grace to finish; then they are cancelled
	// (a physical one locks out) and get cancelUnwind to return: their upstreams are told to
	// stop, and their lockouts and audit records are written on the way out.
	const cancelUnwind = 10 * time.Second
	httpCtx, stopHTTP := context.WithCancel(context.Background())
	defer stopHTTP()
	httpDone := make(chan struct{})
	if srv != nil {
		go func() { _ = srv.Shutdown(httpCtx); close(httpDone) }()
	}
	grace := time.Duration(cfg.Gateway.ShutdownGrace)
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), grace+cancelUnwind)
	report := g.Drain(drainCtx, grace)
	cancelDrain()
	switch {
	case report.Abandoned > 0:
		logger.Error("calls still running after they were cancelled; stopping anyway", "calls", report.Abandoned, "grace", grace)
	case report.Cancelled > 0:
		logger.Warn("calls cancelled at the end of the shutdown grace; a cancelled physical call locks its server out",
			"cancelled", report.Cancelled, "in_flight", report.InFlight, "grace", grace)
	case report.InFlight > 0:
		logger.Info("calls in flight finished", "calls", report.InFlight, "took", report.Took)
	}
	if report.InFlight > 0 {
		// The MCP SDK writes a call's response after the call returns, and no longer does once
		// the session is closing: give the last responses a moment to leave.
		time.Sleep(250 * time.Millisecond)
	}
	if srv != nil {
		// Open MCP sessions hold their streams; close them so that Shutdown does not wait out
		// its timeout for clients that stay connected.
		for ss := range g.MCPServer().Sessions() {
			_ = ss.Close()
		}
		select {
		case <-httpDone:
		case <-time.After(5 * time.Second):
			stopHTTP()
			<-httpDone
		}
	}
	// Deferred above: the upstreams stop, then the state file closes after its last audit commit,
	// then the last spans are flushed.
	return nil
}

// newLogger logs to stderr (never stdout, which carries MCP in stdio mode) in the configured
// format and level.
func newLogger(cfg *config.Config, stderr io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Gateway.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	if v := os.Getenv("MCP_GATEWAY_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Gateway.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// AdminTokenFile is the file in the state directory holding the admin token the gateway made
// at start, when gateway.admin_token_env is not set.
const AdminTokenFile = "admin.token"

// adminToken is the /admin bearer token: from gateway.admin_token_env, or a fresh random one
// written to admin.token in the state directory (mode 0600), where the CLI of the same user
// finds it.
func adminToken(cfg *config.Config) (string, error) {
	if env := cfg.Gateway.AdminTokenEnv; env != "" {
		token := os.Getenv(env)
		if len(token) < 16 {
			return "", fmt.Errorf("gateway.admin_token_env names %s, which must hold a token of at least 16 characters", env)
		}
		return token, nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := hex.EncodeToString(b[:])
	path := filepath.Join(cfg.Gateway.StateDir, AdminTokenFile)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the admin token: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return "", fmt.Errorf("writing the admin token: %w", err)
	}
	return token, nil
}

// reloadOnHangup reloads the config file at every SIGHUP until ctx ends or the returned function
// is called; that function returns once a reload in progress has finished. The gateway logs and
// audits every reload; a refused config leaves the running one in force.
func reloadOnHangup(ctx context.Context, g *gateway.Gateway, hangup <-chan os.Signal) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hangup:
				_, _ = g.ReloadFile(ctx, "signal")
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
