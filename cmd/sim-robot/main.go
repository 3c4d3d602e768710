// Command sim-robot is a stdio MCP server simulating a small robot cell (a
// table, a counter, a shelf and a drawer with a few objects). It answers in
// the result envelopes of SPEC §7 and can misbehave on request, so the
// gateway's demo, end-to-end tests and benchmarks have a believable robot to
// drive. Stdout carries the protocol; logs go to stderr. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shutdownGrace is how long a signalled process waits for the session to
// close before it exits anyway: a read blocked on stdin may never return.
const shutdownGrace = 2 * time.Second

// config holds the command-line settings.
type config struct {
	name           string
	hangOn         string
	crashOn        string
	crashAfter     int
	failStart      bool
	startDelay     time.Duration
	describeSuffix string
	lateTool       bool
	secret         bool
	inject         string
	record         string
	banner         string
	bannerBytes    int
	// travelTime is how long navigate_to takes (0: it arrives at once);
	// brakeTime how long a cancelled one brakes before it stands still.
	travelTime time.Duration
	brakeTime  time.Duration

	// screen plants text for the gateway's screening tests (screening.go).
	screen screening
}

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run serves one MCP session on stdin/stdout and returns the exit status.
func run(args []string, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	if cfg.startDelay > 0 {
		select {
		case <-time.After(cfg.startDelay):
		case <-ctx.Done():
			return 0
		}
	}
	if cfg.failStart {
		fmt.Fprintln(stderr, "sim-robot: cannot open serial port /dev/ttyUSB0")
		return 1
	}

	var rec *recorder
	if cfg.record != "" {
		if rec, err = openRecorder(cfg.record); err != nil {
			log.Error("cannot start", "err", err)
			return 1
		}
		defer rec.Close()
	}

	out := &stdout{w: os.Stdout}
	if err := printBanner(out, cfg); err != nil {
		log.Error("cannot write the banner", "err", err)
		return 1
	}
	srv := newServer(ctx, cfg, NewWorld(), rec, log, out)
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, &mcp.IOTransport{Reader: os.Stdin, Writer: out}) }()

	select {
	case err = <-served:
	case <-ctx.Done():
		select {
		case err = <-served:
		case <-time.After(shutdownGrace):
		}
	}
	switch {
	case ctx.Err() != nil:
		log.Info("stopped by signal")
	case err != nil:
		log.Error("session ended", "err", err)
		return 1
	default:
		log.Info("client closed stdin; stopping")
	}
	return 0
}

// printBanner prints what -banner and -banner-bytes ask for on stdout.
func printBanner(out *stdout, cfg config) error {
	if cfg.banner != "" {
		if err := out.println(cfg.banner); err != nil {
			return err
		}
	}
	if cfg.bannerBytes > 0 {
		return out.println(strings.Repeat("x", cfg.bannerBytes))
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("sim-robot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.name, "name", "sim-robot", "implementation `name` reported at initialization")
	fs.StringVar(&cfg.hangOn, "hang-on", "", "calls of `tool` block until cancelled")
	fs.StringVar(&cfg.crashOn, "crash-on", "", fmt.Sprintf("calls of `tool` make the process exit with status %d mid-call", crashExitCode))
	fs.IntVar(&cfg.crashAfter, "crash-after", 0, fmt.Sprintf("serve `n` tool calls, then exit with status %d in the middle of the next one (0: never)", crashExitCode))
	fs.BoolVar(&cfg.failStart, "fail-start", false, "print a serial-port error and exit 1 before serving")
	fs.DurationVar(&cfg.startDelay, "start-delay", 0, "sleep this `duration` before serving")
	fs.StringVar(&cfg.describeSuffix, "describe-suffix", "", "append `text` to every tool description")
	fs.BoolVar(&cfg.lateTool, "late-tool", false, "add the tool calibrate 500ms after the client initializes")
	fs.BoolVar(&cfg.secret, "secret", false, "put a fake AWS access key in get_scene's observation")
	fs.StringVar(&cfg.inject, "inject", "", "append `text` (say, a prompt injection) to get_scene's observation, as if read from a label in the cell")
	fs.StringVar(&cfg.record, "record", "", "append one JSON line {\"tool\",\"args\",\"at\"} per call to `file`")
	fs.StringVar(&cfg.banner, "banner", "", "print `text` as a line on stdout before serving, as a driver that logs to the wrong stream would")
	fs.IntVar(&cfg.bannerBytes, "banner-bytes", 0, "print a line of `n` bytes (x…) on stdout before serving, after -banner")
	fs.DurationVar(&cfg.travelTime, "travel-time", 0, "navigate_to takes this `duration` to arrive, and can be cancelled or stopped on the way (0: it arrives at once)")
	fs.DurationVar(&cfg.brakeTime, "brake-time", 500*time.Millisecond, "a navigate_to cancelled on the way brakes for this `duration` before it answers")
	addScreeningFlags(fs, &cfg.screen)
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments %q", fs.Args())
		fmt.Fprintln(stderr, "sim-robot:", err)
		return config{}, err
	}
	for _, c := range []struct {
		bad  bool
		what string
	}{
		{cfg.bannerBytes < 0, "-banner-bytes"},
		{cfg.crashAfter < 0, "-crash-after"},
		{cfg.travelTime < 0, "-travel-time"},
		{cfg.brakeTime < 0, "-brake-time"},
	} {
		if c.bad {
			err := errors.New(c.what + " must not be negative")
			fmt.Fprintln(stderr, "sim-robot:", err)
			return config{}, err
		}
	}
	return cfg, nil
}
