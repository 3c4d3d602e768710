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
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/agent"
	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/console"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/internal/printable"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// runAgent runs the built-in agent on one task over the governed catalog, in-process: the
// gateway is built as serve builds it (state file, policies, guards). While the run lasts it
// serves its operators on gateway.listen (or --listen): the admin API, so that `mcp-gateway
// approvals` answers the run's held calls, and /metrics, /healthz, /readyz; never /mcp. With
// the listener off nobody could answer an approval, so a call that needs one is refused at once.
// The exit code is the run's (agent.Exit).
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agent", `agent --task "…" | --task-file FILE [-c FILE] [--transcript FILE] [--record FILE] [--listen ADDR|off]`, stdout, stderr)
	fs.addConfig("")
	task := fs.String("task", "", "the task, in plain words")
	taskFile := fs.String("task-file", "", "read the task from this file")
	transcript := fs.String("transcript", "", "write the transcript as JSONL to this file")
	record := fs.String("record", "", "record the model's answers to this file, for replay with provider mock")
	listen := fs.String("listen", "", "serve the admin API, /metrics, /healthz and /readyz on this `ADDR` instead of gateway.listen while the run lasts; "+
		"off serves nothing, and a call that needs an operator's approval is then refused at once")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if (*task == "") == (*taskFile == "") {
		return fs.usageError("agent needs exactly one of --task and --task-file: the task, in plain words")
	}
	if *taskFile != "" {
		b, err := os.ReadFile(*taskFile)
		if err != nil {
			return fmt.Errorf("reading the task: %w", err)
		}
		*task = strings.TrimSpace(string(b))
		if *task == "" {
			return fmt.Errorf("the task file %s is empty", *taskFile)
		}
	}
	cfg, err := fs.loadAgentConfig() // settings helper (issue 21): the llm section's problems at their lines
	if err != nil {
		return err
	}
	if cfg.LLM.Provider == "" {
		return fmt.Errorf("%s: llm.provider is not set; choose one of %s", cfg.Path, strings.Join(model.Providers(), ", "))
	}
	settings, err := agent.ModelSettings(cfg.LLM)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Path, err)
	}
	var jsonl io.Writer
	if *transcript != "" {
		f, err := os.Create(*transcript)
		if err != nil {
			return fmt.Errorf("creating the transcript: %w", err)
		}
		defer f.Close()
		jsonl = f
	}

	addr, off := cfg.Gateway.Listen, `gateway.listen is ""`
	if flagGiven(fs, "listen") {
		addr, off = *listen, "--listen off"
	}
	if addr == "off" {
		addr = ""
	}
	// Telemetry (off without an endpoint) traces the run, its model requests and its calls
	// through the chain as one trace; its spans are flushed when everything else has stopped.
	p, logger, stopTelemetry, err := startTelemetry(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer stopTelemetry()
	gv, err := openGovernance(cfg, logger, stderr, p)
	if err != nil {
		return err
	}
	defer gv.close(logger)
	opts := gateway.Options{Logger: logger, Store: gv.store, Registry: gv.registry, Policies: gv.policies, Guards: gv.guards, Telemetry: p}
	var creds []gateway.Credential
	if addr == "" {
		opts.NoApprover = fmt.Sprintf("this agent serves no HTTP listener (%s), so no operator can reach its admin API to answer; "+
			"start the gateway with an HTTP listener: set gateway.listen in %s or pass --listen HOST:PORT to mcp-gateway agent", off, cfg.Path)
	} else {
		if creds, err = gateway.LoadCredentials(cfg, os.LookupEnv); err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
		if opts.AdminToken, err = adminToken(cfg); err != nil {
			return err
		}
		// The admin API and metrics are served over TLS as serve's are: the CLI of an
		// operator reaches this gateway by gateway.listen and gateway.tls alike.
		var warnings []string
		opts.TLS, warnings, err = gateway.LoadTLS(cfg)
		for _, w := range warnings {
			logger.Warn(w)
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
	}
	// The agent's metrics go on the gateway's registry; the transport reports its retries to
	// them, so the model is built after the registry.
	metrics := agent.NewMetrics(gv.registry, cfg.LLM.Provider)
	settings.OnRetry = metrics.OnRetry
	if p.On() {
		// Model requests carry the model request span as their traceparent.
		settings.InjectHeader = p.InjectHeader
	}
	m, err := model.New(settings)
	if err != nil {
		return fmt.Errorf("%s: llm: %w", cfg.Path, err)
	}
	if *record != "" {
		rec, err := model.NewRecorder(m, *record)
		if err != nil {
			return err
		}
		defer rec.Close()
		m = rec
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
			return fmt.Errorf("cannot listen on %s for the admin API and metrics (gateway.listen, or --listen ADDR; --listen off for none): %w", addr, err)
		}
	}
	if err := g.Start(ctx); err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	if ln != nil {
		g.MountConsole(console.New(g, console.Options{Credentials: creds, Config: cfg, Logger: logger}))
		stop := serveOperators(g, ln, creds, opts.TLS, logger)
		defer stop() // first: the admin API stops before the upstreams and the state file
		list := []string{"approvals", "list"}
		if addr != cfg.Gateway.Listen {
			list = append(list, "--addr", ln.Addr().String())
		}
		fmt.Fprintf(stderr, "mcp-gateway agent: answer approvals with `%s` (admin API and metrics at %s://%s)\n",
			pastable.Command(list...), scheme(opts.TLS), ln.Addr())
	}

	runID, err := newRunID()
	if err != nil {
		return err
	}
	r := &agent.Runner{
		Model:        m,
		Caller:       g,
		Tools:        g.Catalog().Tools(),
		Options:      agent.OptionsOf(cfg),
		InputGuards:  gv.guards.Input,
		OutputGuards: gv.guards.Output,
		Out:          stdout,
		Transcript:   jsonl,
		RunID:        runID,
		Metrics:      metrics,
		Provider:     cfg.LLM.Provider,
		ModelName:    settings.RequestModel(),
	}
	if p.On() {
		r.Tracer = p.Tracer()
	}
	// ctx is cancelled on SIGINT and SIGTERM (see main): the model request in flight and any
	// tool call in flight stop, and the run ends with agent.ExitError.
	report, err := r.Run(p.FromHeader(ctx, envTraceContext(os.Getenv)), *task)
	// The error may quote the provider (its error message): shown with its control characters
	// escaped, like the run's printout.
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "mcp-gateway agent: %s\n", printable.Lines(report.Reason))
	case err != nil:
		fmt.Fprintf(stderr, "mcp-gateway agent: %s\n", printable.Lines(err.Error()))
	}
	if report.Exit == agent.ExitAnswered {
		return nil
	}
	return exitError{int(report.Exit)}
}

// envTraceContext is the trace context the environment gives the run, as OpenTelemetry carries
// it in environment variables (TRACEPARENT, TRACESTATE, BAGGAGE): a CI job or script that traces
// itself sets them, and the run's span is then its child. None set gives an empty header, and a
// malformed value is ignored.
func envTraceContext(getenv func(string) string) http.Header {
	h := http.Header{}
	for _, key := range []string{telemetry.KeyTraceparent, telemetry.KeyTracestate, telemetry.KeyBaggage} {
		if v := getenv(strings.ToUpper(key)); v != "" {
			h.Set(key, v)
		}
	}
	return h
}

// newRunID names one agent run; it is the session of the run's calls in the audit log.
func newRunID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "agent-" + hex.EncodeToString(b[:]), nil
}

// serveOperators serves g's OperatorHandler on ln until the returned function is called, which
// gives the requests in flight a moment and then closes every connection.
func serveOperators(g *gateway.Gateway, ln net.Listener, creds []gateway.Credential, listenerTLS *gateway.ListenerTLS, logger *slog.Logger) (stop func()) {
	srv, limited := g.NewOperatorServer(ln, creds)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(limited); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serving the admin API failed", "error", err)
		}
	}()
	logger.Info("serving the admin API and metrics while the run lasts", "url", scheme(listenerTLS)+"://"+ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}
}

// scheme is the URL scheme of a listener served with listenerTLS (nil: none).
func scheme(listenerTLS *gateway.ListenerTLS) string {
	if listenerTLS != nil {
		return "https"
	}
	return "http"
}
