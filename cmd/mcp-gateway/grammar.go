package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
)

// The grammar every command shares (docs/cli.md): `mcp-gateway COMMAND [WORDS] [FLAGS]`, with
// flags before, between or after the words; `-c`/`--config` found the same way everywhere;
// `-o table|json|jsonl` on every command that prints data; help on stdout with exit 0; a
// mistake on the command line reported once, on stderr, with exit 2.

// configEnv names the config file when no -c is given.
const configEnv = "MCP_GATEWAY_CONFIG"

// defaultConfigFile is the config file looked for in the working directory last.
const defaultConfigFile = "mcp-gateway.yaml"

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatJSONL = "jsonl"
)

var formats = []string{formatTable, formatJSON, formatJSONL}

// errHelp: the command printed its help as asked; exit 0.
var errHelp = errors.New("help printed")

// cmdFlags is a command's flag set. Its own parse reports every problem once (package flag
// would print it and the whole usage, and the caller print it again) and prints --help on
// stdout.
type cmdFlags struct {
	*flag.FlagSet
	synopsis       string
	stdout, stderr io.Writer

	config *string // -c, --config: set by addConfig
	format *string // -o, --output: set by addOutput
	// short is the one-letter flag of a long one that means the same (config: c), for the help.
	short map[string]string
}

// newFlags is the flag set of the command name; synopsis is its usage line(s) after
// "mcp-gateway ", optionally followed by a blank line and what the command does.
func newFlags(name, synopsis string, stdout, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, synopsis: synopsis, stdout: stdout, stderr: stderr, short: map[string]string{}}
}

// parse parses args with flags anywhere among the positional arguments ("--" ends the flags)
// and returns the positional ones. -h and --help print the usage on stdout (errHelp, exit 0);
// any other problem is reported on stderr (exit 2), an unknown flag with the one it most likely
// meant.
func (f *cmdFlags) parse(args []string) ([]string, error) {
	var pos []string
	for {
		err := f.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			f.printUsage(f.stdout)
			return nil, errHelp
		case err != nil:
			return nil, f.usageError("%s", f.explain(err))
		}
		rest := f.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseNone is parse for a command that takes no positional arguments.
func (f *cmdFlags) parseNone(args []string) error {
	pos, err := f.parse(args)
	if err == nil && len(pos) > 0 {
		err = f.usageError("%s takes no arguments, only flags; got %q", f.Name(), pos[0])
	}
	return err
}

// explain rewrites package flag's message for a person: the flag as it would be typed and, for
// an unknown one, the closest known flag.
func (f *cmdFlags) explain(err error) string {
	msg := err.Error()
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid value %s for %s: %s", m[1], dashed(m[2]), m[3])
	}
	name, unknown := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !unknown {
		return msg
	}
	var known []string
	f.VisitAll(func(fl *flag.Flag) { known = append(known, fl.Name) })
	msg = fmt.Sprintf("unknown flag %s", dashed(name))
	if m := suggest.Closest(name, known); m != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", dashed(m))
	}
	return msg
}

// invalidValue is package flag's message for a value Set refused.
var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for flag -(\S+): (.*)$`)

// dashed is a flag as it is typed: -c, --reason.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// usageError reports a mistake on the command line with the usage line and where the help is;
// exit 2.
func (f *cmdFlags) usageError(format string, a ...any) error {
	fmt.Fprintf(f.stderr, "mcp-gateway %s: %s\n", f.Name(), fmt.Sprintf(format, a...))
	line, _, _ := strings.Cut(f.synopsis, "\n\n")
	fmt.Fprintf(f.stderr, "Usage: mcp-gateway %s\nRun \"mcp-gateway %s --help\" for its flags.\n", line, f.Name())
	return exitError{2}
}

// printUsage is the command's help: its usage, what it does and its flags.
func (f *cmdFlags) printUsage(w io.Writer) {
	line, about, _ := strings.Cut(f.synopsis, "\n\n")
	fmt.Fprintf(w, "Usage: mcp-gateway %s\n", line)
	if about != "" {
		fmt.Fprintf(w, "\n%s\n", about)
	}
	fmt.Fprintln(w, "\nFlags:")
	f.printFlags(w)
	if f.config != nil {
		fmt.Fprintf(w, "\nWithout -c, the config is $%s, else ./%s.\n", configEnv, defaultConfigFile)
	}
	fmt.Fprintln(w, "\nThe grammar, the JSON output and the exit codes of every command: docs/cli.md.")
}

// printFlags lists the flags as they are typed, a one-letter flag beside its long form
// ("-c, --config FILE"), each with its usage and default.
func (f *cmdFlags) printFlags(w io.Writer) {
	long := map[string]string{}
	for l, s := range f.short {
		long[s] = l
	}
	f.VisitAll(func(fl *flag.Flag) {
		if _, isShort := long[fl.Name]; isShort {
			return
		}
		arg, usage := flag.UnquoteUsage(fl)
		if _, isSwitch := fl.Value.(interface{ IsBoolFlag() bool }); isSwitch {
			arg = ""
		} else if arg == "value" || arg == "string" {
			arg = "VALUE"
		}
		names := dashed(fl.Name)
		if s, ok := f.short[fl.Name]; ok {
			names = dashed(s) + ", " + names
		}
		if arg != "" {
			names += " " + arg
		}
		switch def := fl.DefValue; {
		case def == "" || def == "false" || def == "0":
		case fmt.Sprintf("%T", fl.Value) == "*flag.stringValue":
			usage += fmt.Sprintf(" (default %q)", def)
		default:
			usage += fmt.Sprintf(" (default %s)", def)
		}
		fmt.Fprintf(w, "  %s\n    \t%s\n", names, usage)
	})
}

// addConfig adds -c and --config, the config file; what says what the command reads from it.
func (f *cmdFlags) addConfig(what string) {
	f.config = new(string)
	usage := "config `FILE`" + what + " (default: $" + configEnv + ", else ./" + defaultConfigFile + ")"
	f.StringVar(f.config, "config", "", usage)
	f.StringVar(f.config, "c", "", "the same as --config")
	f.short["config"] = "c"
}

// configPath finds the config file: -c or --config, then $MCP_GATEWAY_CONFIG, then
// ./mcp-gateway.yaml when it exists; from says which, for messages. Both are "" when there is
// none.
func (f *cmdFlags) configPath() (path, from string) {
	if *f.config != "" {
		return *f.config, ""
	}
	if p := os.Getenv(configEnv); p != "" {
		return p, "$" + configEnv
	}
	if _, err := os.Stat(defaultConfigFile); err == nil {
		return defaultConfigFile, "./" + defaultConfigFile
	}
	return "", ""
}

// loadConfig loads the config the command line, the environment or the working directory
// names. Without any it says where it looked (exit 2); a config that does not load is printed
// with every problem (exit 1). Commands printed for a person then name it (internal/pastable).
func (f *cmdFlags) loadConfig() (*config.Config, error) {
	return f.loadConfigWith(config.Options{})
}

// loadConfigWith is loadConfig with the further checks of o (config.LoadWith).
func (f *cmdFlags) loadConfigWith(o config.Options) (*config.Config, error) {
	cfg, err := f.readConfigWith(o)
	if err != nil {
		var cerr *config.Errors
		if !errors.As(err, &cerr) {
			return nil, err
		}
		fmt.Fprintln(f.stderr, err)
		return nil, exitError{1}
	}
	pastable.SetConfig(cfg.Path)
	return cfg, nil
}

// readConfigWith is loadConfigWith without printing a config's problems: they are in the
// error, an *config.Errors. Any other error has been reported, with its exit code.
func (f *cmdFlags) readConfigWith(o config.Options) (*config.Config, error) {
	path, from := f.configPath()
	if path == "" {
		wd, _ := os.Getwd()
		return nil, f.usageError("no config file: give -c FILE (or --config FILE), set $%s, or put %s in the working directory (%s)",
			configEnv, defaultConfigFile, wd)
	}
	cfg, err := config.LoadWith(path, o)
	var cerr *config.Errors
	switch {
	case err == nil, errors.As(err, &cerr):
		return cfg, err
	case errors.Is(err, fs.ErrNotExist) && from != "":
		abs, _ := filepath.Abs(path)
		fmt.Fprintf(f.stderr, "mcp-gateway %s: the config file %s, named by %s, does not exist\n", f.Name(), abs, from)
	default:
		fmt.Fprintf(f.stderr, "mcp-gateway %s: %v\n", f.Name(), err)
	}
	return nil, exitError{1}
}

// addOutput adds -o (and --output), and --json as its alias for -o json.
func (f *cmdFlags) addOutput() {
	f.format = new(string)
	*f.format = formatTable
	usage := "output `FORMAT`: " + strings.Join(formats, ", ") + " (docs/cli.md)"
	f.Var(formatValue{f.format}, "output", usage)
	f.Var(formatValue{f.format}, "o", "the same as --output")
	f.short["output"] = "o"
	f.Var(formatAlias{f.format, formatJSON}, "json", "the same as -o json")
}

// addJSONLAlias adds --jsonl, an alias for -o jsonl.
func (f *cmdFlags) addJSONLAlias() {
	f.Var(formatAlias{f.format, formatJSONL}, "jsonl", "the same as -o jsonl")
}

// output is the -o value.
func (f *cmdFlags) output() string { return *f.format }

// formatValue is -o: one of formats, or an error naming them.
type formatValue struct{ p *string }

func (v formatValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v formatValue) Set(s string) error {
	if !slices.Contains(formats, s) {
		return fmt.Errorf("must be one of %s", strings.Join(formats, ", "))
	}
	*v.p = s
	return nil
}

// formatAlias is a boolean flag (--json, --jsonl) that sets the output format.
type formatAlias struct {
	p      *string
	format string
}

func (a formatAlias) IsBoolFlag() bool { return true }
func (a formatAlias) String() string   { return "false" }

func (a formatAlias) Set(s string) error {
	switch s {
	case "true":
		*a.p = a.format
	case "false":
	default:
		return fmt.Errorf("is a switch: give it alone, or =true or =false")
	}
	return nil
}

// writeJSON prints v: indented for -o json, on one line for -o jsonl.
func writeJSON(w io.Writer, format string, v any) error {
	enc := json.NewEncoder(w)
	if format == formatJSON {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// writeList prints items: a JSON array for -o json (never null), one item per line for
// -o jsonl.
func writeList[T any](w io.Writer, format string, items []T) error {
	if format == formatJSON {
		if items == nil {
			items = []T{}
		}
		return writeJSON(w, format, items)
	}
	enc := json.NewEncoder(w)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}
