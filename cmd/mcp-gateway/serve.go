package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve -c FILE [--stdio] [--listen ADDR] [--require-all]", stderr)
	file := fs.String("c", "", "config file (required)")
	stdio := fs.Bool("stdio", false, "serve one MCP session on stdin/stdout; HTTP is then off unless --listen is given")
	listen := fs.String("listen", "", "serve HTTP on this address instead of gateway.listen")
	requireAll := fs.Bool("require-all", false, "fail start-up when any upstream is not ready within its startup timeout")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		fs.Usage()
		return exitError{2}
	}
	cfg, err := config.Load(*file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	addr := cfg.Gateway.Listen
	switch {
	case *listen != "":
		addr = *listen
	case *stdio:
		addr = ""
	}
	logger := newLogger(cfg, stderr)

	g := gateway.New(cfg, gateway.Options{Logger: logger, RequireAll: *requireAll})
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

	errc := make(chan error, 2)
	var srv *http.Server
	if ln != nil {
		srv = &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		go func() { errc <- srv.Serve(ln) }()
		url := "http://" + ln.Addr().String() + "/mcp"
		logger.Info("serving MCP over streamable HTTP", "url", url)
		if !*stdio {
			fmt.Fprintf(stderr, "\nmcp-gateway is serving %d tools at %s\n"+
				"  Connect any MCP client with the streamable HTTP transport to that URL, for example the MCP Inspector:\n"+
				"    npx @modelcontextprotocol/inspector  (Transport: Streamable HTTP, URL: %s)\n"+
				"  Health: http://%s/healthz  Readiness: http://%s/readyz\n  Stop with Ctrl-C.\n\n",
				len(g.Catalog().Tools()), url, url, ln.Addr(), ln.Addr())
		}
	}
	if *stdio {
		logger.Info("serving MCP over stdio")
		go func() { errc <- g.ServeStdio(ctx) }()
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
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}
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
