package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/agent"
	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/gateway"
)

// runAgent runs the built-in agent on one task over the governed catalog, in-process: the
// gateway is built as serve builds it (state file, policies, guards) but serves nothing. The
// exit code is the run's (agent.Exit).
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("agent", `agent -c FILE --task "…" | --task-file FILE [--transcript FILE] [--record FILE]`, stderr)
	file := fs.String("c", "", "config file (required)")
	task := fs.String("task", "", "the task, in plain words")
	taskFile := fs.String("task-file", "", "read the task from this file")
	transcript := fs.String("transcript", "", "write the transcript as JSONL to this file")
	record := fs.String("record", "", "record the model's answers to this file, for replay with provider mock")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || (*task == "") == (*taskFile == "") {
		fmt.Fprintln(stderr, "give -c and exactly one of --task and --task-file")
		fs.Usage()
		return exitError{2}
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
	cfg, err := loadConfig(fs, *file, stderr)
	if err != nil {
		return err
	}
	if cfg.LLM.Provider == "" {
		return fmt.Errorf("%s: llm.provider is not set; choose one of %s", *file, strings.Join(model.Providers(), ", "))
	}
	settings, err := agent.ModelSettings(cfg.LLM)
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
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

	logger := newLogger(cfg, stderr)
	gv, err := openGovernance(cfg, logger, stderr)
	if err != nil {
		return err
	}
	defer gv.close(logger)
	// The agent's metrics go on the gateway's registry; the transport reports its retries to
	// them, so the model is built after the registry.
	metrics := agent.NewMetrics(gv.registry, cfg.LLM.Provider)
	settings.OnRetry = metrics.OnRetry
	m, err := model.New(settings)
	if err != nil {
		return fmt.Errorf("%s: llm: %w", *file, err)
	}
	if *record != "" {
		rec, err := model.NewRecorder(m, *record)
		if err != nil {
			return err
		}
		defer rec.Close()
		m = rec
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: logger, Store: gv.store, Registry: gv.registry, Policies: gv.policies, Guards: gv.guards})
	if err != nil {
		return err
	}
	defer func() {
		if err := g.Close(); err != nil {
			logger.Error("stopping upstreams", "error", err)
		}
	}()
	if err := g.Start(ctx); err != nil {
		return err
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
	}
	// ctx is cancelled on SIGINT and SIGTERM (see main): the model request in flight and any
	// tool call in flight stop, and the run ends with agent.ExitError.
	report, err := r.Run(ctx, *task)
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "mcp-gateway agent: %s\n", report.Reason)
	case err != nil:
		fmt.Fprintf(stderr, "mcp-gateway agent: %v\n", err)
	}
	if report.Exit == agent.ExitAnswered {
		return nil
	}
	return exitError{int(report.Exit)}
}

// newRunID names one agent run; it is the session of the run's calls in the audit log.
func newRunID() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "agent-" + hex.EncodeToString(b[:]), nil
}
