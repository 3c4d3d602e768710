// Command mcp-gateway is the governed front door to robots for AI agents: an MCP server to
// agents and an MCP client to the servers that drive a robot. Run "mcp-gateway help" for the
// subcommands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"serve", "serve the gateway (streamable HTTP on gateway.listen, or stdio with --stdio)", runServe},
	{"connect", "serve one MCP session on stdin/stdout for a running gateway at URL (for IDEs that launch a command)", runConnect},
	{"agent", "run the built-in agent on a task over the governed tools (exit code: how the run ended)", runAgent},
	{"tools", "print the tool catalog: the running gateway's, else start the upstreams for it", runTools},
	{"status", "show upstreams, halts and lockouts, physical calls in flight and pending approvals (exit 3 locked or halted, 4 a server down, 5 not running)", runStatus},
	{"halt", "emergency stop: lock out every physical server, cancel its calls, send its stop tool (--reason required; audited)", runHalt},
	{"lock", "lock out one physical server now, e.g. while a person is in the cell (--reason required; audited)", runLock},
	{"unlock", "reset a server's lockout or halt after inspecting the robot (--reason required; audited)", runUnlock},
	{"audit", "print the audit log (filters); \"audit export\" archives it as JSONL; \"audit verify\" checks its hash chain", runAudit},
	{"compact", "rewrite the state file without the space pruned audit records left (gateway stopped)", runCompact},
	{"approvals", "list pending approval requests, approve or deny one", runApprovals},
	{"pins", "list pinned tool definitions; accept a changed one after reviewing it (audited)", runPins},
	{"policy", "policy test: run policy test cases against the configured rules", runPolicy},
	{"check", "load and check a config file; print every problem", runCheck},
	{"schema", "print the JSON Schema of the config file", runSchema},
	{"version", "print the version, the commit and when it was built (also --version)", runVersion},
}

// defaultMemoryLimit is the Go runtime's soft memory limit unless GOMEMLIMIT is set.
const defaultMemoryLimit = 128 << 20

// exitError carries an exit code; its message, if any, has already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	if os.Getenv("GOGC") == "" {
		// A gateway's live heap is small and a call still allocates tens of KB, so trading
		// some memory for fewer collections cuts per-call latency: with GOGC=100 the c=8 hop
		// was about a third slower (docs/benchmarks.md). GOGC in the environment still wins.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// GOGC=400 lets the heap grow to five times what is live before a collection; when
		// several large results are in flight at once, or a thousand sessions are open, that
		// is what RSS would follow. A soft limit makes the collector work harder only then, so
		// memory stays in proportion to what is in flight (docs/design.md, "Bounded
		// results"). GOMEMLIMIT still wins.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	// Commands printed for a person name the binary as it was invoked (internal/pastable).
	pastable.SetBinary(os.Args[0])
	// What MCP clients and status are told is what `version` prints.
	gateway.Version = readVersion().Version
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" {
			// "mcp-gateway help status" is "mcp-gateway status --help".
			return run(ctx, append(slices.Clone(args[1:]), "--help"), stdout, stderr)
		}
		usage(stdout)
		return 0
	case "--version":
		return run(ctx, append([]string{"version"}, args[1:]...), stdout, stderr)
	}
	c := findCommand(args[0])
	if c == nil && strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "mcp-gateway: %s is a flag; the command comes first (mcp-gateway status -c FILE); run \"mcp-gateway help\" for the list\n", args[0])
		return 2
	}
	if c == nil {
		fmt.Fprintf(stderr, "mcp-gateway: unknown command %q%s; run \"mcp-gateway help\" for the list\n", args[0], didYouMean(args[0], commandNames()))
		return 2
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(stderr, "mcp-gateway %s: %v\n", c.name, err)
		return 1
	}
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "mcp-gateway: the governed MCP gateway in front of robots.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: mcp-gateway <command> [arguments] [flags]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags go anywhere after the command. Commands that print data take -o table|json|jsonl.")
	fmt.Fprintf(w, "The config is -c FILE (or --config FILE), else $%s, else ./%s.\n", configEnv, defaultConfigFile)
	fmt.Fprintln(w, "Run \"mcp-gateway help <command>\" for a command's flags, and see docs/cli.md for the grammar,")
	fmt.Fprintln(w, "the JSON output and every exit code.")
}
