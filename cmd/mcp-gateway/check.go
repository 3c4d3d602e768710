package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/agent"
	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/policies"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// checkReport is what check found, as -o json prints it. Problems make the config unusable
// (exit 1); warnings and notes do not. Each is one line as the text output prints it,
// "FILE:LINE: …" where a line is known.
type checkReport struct {
	File     string   `json:"file"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	Warnings []string `json:"warnings"`
	Notes    []string `json:"notes"`
	// The summary of a config that loaded: its servers, how tools are named, its policy rules
	// and their default; left out when it did not load.
	Servers       *int   `json:"servers,omitempty"`
	ToolNames     string `json:"tool_names,omitempty"`
	PolicyRules   *int   `json:"policy_rules,omitempty"`
	PolicyDefault string `json:"policy_default,omitempty"`
	// StopTools are the public names of the stop tools; InspectionTools those of the tools
	// callable during a lockout (allow_while_locked), "(not verified yet)" after a name whose
	// annotations the gateway has not seen.
	StopTools       []string `json:"stop_tools"`
	InspectionTools []string `json:"inspection_tools"`
	// Telemetry is where a gateway started in this environment would send its traces
	// ("off" when nowhere); left out when the config did not load.
	Telemetry string `json:"telemetry,omitempty"`
	// LLM is the built-in agent's model provider and the model of a request that names none,
	// when the config has an llm section; left out when it did not load.
	LLM string `json:"llm,omitempty"`
}

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "check [-c FILE] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]\n\n"+
		"Loads the config and checks it without starting anything: every problem with its line, in one\n"+
		"pass (the guards are built as serve builds them, the agent's model provider as mcp-gateway\n"+
		"agent builds it), the stop and inspection tools verified against what the gateway has seen\n"+
		"(the running gateway's catalog, else the pins in the state file). Exit 1 when the config has\n"+
		"a problem.", stdout, stderr)
	o := addOpsFlags(fs)
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	rep := checkReport{Problems: []string{}, Warnings: []string{}, Notes: []string{}, StopTools: []string{}, InspectionTools: []string{}}
	rep.File, _ = fs.configPath()
	// The model provider is built as mcp-gateway agent builds it, and the guards and policies as
	// serve builds them; their problems are listed with the file's, at their lines, even when
	// another section has problems too. The policies compiled then are those of the summary.
	var llmWarnings []string
	var engine *policies.Engine
	cfg, err := fs.readConfigWith(config.Options{CheckLLM: func(l *config.LLM) []config.LLMProblem {
		problems, unset := agent.CheckLLM(l, os.Getenv)
		for _, u := range unset {
			llmWarnings = append(llmWarnings, fmt.Sprintf("%s:%d: llm.%s: warning: %s here; mcp-gateway agent would not start without it",
				rep.File, l.Line(u.Key), u.Key, u.Msg))
		}
		return problems
	}, CheckGuardrails: gateway.CheckGuards, CheckPolicies: func(c *config.Config) []config.PolicyProblem {
		var problems []config.PolicyProblem
		engine, problems = gateway.PolicyCheck(c)
		return problems
	}})
	var cerr *config.Errors
	switch {
	case errors.As(err, &cerr):
		rep.Problems = lines(err)
		rep.Warnings = append(rep.Warnings, llmWarnings...)
		return printCheck(stdout, stderr, fs.output(), rep)
	case err != nil:
		return err
	}
	pastable.SetConfig(cfg.Path)
	rep.File = cfg.Path
	tlsProblems, tlsWarnings := gateway.CheckTLS(cfg) // the files of gateway.tls, which loading does not read
	rep.Problems, rep.Warnings = append(rep.Problems, tlsProblems...), append(rep.Warnings, tlsWarnings...)
	rep.Problems = append(rep.Problems, gateway.CheckApprovals(cfg)...) // judge (issue 21): approvals.use callback, which this binary cannot serve
	// Loading compiled the policies (a file whose policies section is not a mapping does not load).
	if engine == nil {
		return fmt.Errorf("%s: loading did not compile the policies", cfg.Path)
	}
	ex := checkExemptTools(ctx, cfg, o)
	rep.Problems = append(append(rep.Problems, ex.problems...), gateway.StopToolRules(cfg, engine.Rules())...)
	rep.Notes = append(rep.Notes, ex.notes...)
	// A command that cannot be found is a warning, not an error: it may be installed before the
	// gateway starts, and a gateway retries a server that does not start.
	for i, s := range cfg.Servers {
		var ce *upstream.CommandError
		if errors.As(upstream.CheckCommand(s), &ce) {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s:%d: servers[%d] (%s): warning: command %q %s; the gateway would retry starting it (serve --require-all stops instead)",
				cfg.Path, s.CommandLine, i, s.Name, ce.Command, ce.Why))
		}
	}
	rep.Warnings = append(rep.Warnings, config.EnvWarnings(cfg)...)
	rep.Warnings = append(rep.Warnings, llmWarnings...)
	if cfg.LLM.Provider != "" {
		s, _ := agent.ModelSettings(cfg.LLM) // its problems are reported above
		rep.LLM = "provider " + cfg.LLM.Provider
		if m := s.RequestModel(); m != "" {
			rep.LLM += ", model " + m
		}
	}
	servers, rules := len(cfg.Servers), len(engine.Rules())
	rep.Servers, rep.ToolNames, rep.PolicyRules, rep.PolicyDefault = &servers, cfg.Gateway.ToolNames, &rules, cfg.Policies.Default
	rep.StopTools = append(rep.StopTools, ex.stops...)
	rep.InspectionTools = append(rep.InspectionTools, ex.inspection...)
	var telWarnings []string
	rep.Telemetry, telWarnings = checkTelemetry(cfg, os.Getenv)
	rep.Warnings = append(rep.Warnings, telWarnings...)
	rep.Warnings = append(rep.Warnings, oauthSecretWarnings(cfg, os.Getenv)...)
	return printCheck(stdout, stderr, fs.output(), rep)
}

// loadAgentConfig is loadConfig for mcp-gateway agent: the model provider is built from the llm
// section as check builds it (agent.CheckLLM), and the guards and policies as check builds
// them (the agent's llm.judge guards depend on the llm section), and their problems are
// printed with the file's, at their lines, in one pass as check prints them; a headers_env
// variable that is not set is one of them.
func (f *cmdFlags) loadAgentConfig() (*config.Config, error) {
	return f.loadConfigWith(config.Options{CheckLLM: agent.AgentLLMCheck(os.Getenv), CheckGuardrails: gateway.CheckGuards,
		CheckPolicies: gateway.CheckPolicies})
}

// oauthSecretWarnings warns of a servers[].oauth.client_secret_env variable that is not set in
// check's environment, which may not be the gateway's: serve would not start that server's
// connection without it. The value is never read further than whether it is empty.
func oauthSecretWarnings(cfg *config.Config, getenv func(string) string) []string {
	var warnings []string
	for i, s := range cfg.Servers {
		if o := s.OAuth; o != nil && o.ClientSecretEnv != "" && getenv(o.ClientSecretEnv) == "" {
			warnings = append(warnings, fmt.Sprintf("%s:%d: servers[%d] (%s): oauth.client_secret_env: warning: names the environment variable %s, which is not set here; the gateway could not get a token for this server without it",
				cfg.Path, s.Line, i, s.Name, o.ClientSecretEnv))
		}
	}
	return warnings
}

// checkTelemetry says where a gateway started with cfg in the environment getenv reads would
// send its traces, and warns of what would stop it from starting there: an OTEL_ variable it
// cannot use, a telemetry.headers_env variable that is not set. The config's own checks are
// the loader's; the environment of check may not be the gateway's, so these are warnings.
func checkTelemetry(cfg *config.Config, getenv func(string) string) (where string, warnings []string) {
	s, err := telemetry.Resolve(cfg.Telemetry, getenv)
	if err != nil {
		return "not started: " + err.Error(), []string{fmt.Sprintf("%s: telemetry: warning: %v; mcp-gateway serve would not start in this environment", cfg.Path, err)}
	}
	if !s.On {
		return "off", nil
	}
	where = fmt.Sprintf("traces to %s over OTLP %s (telemetry.endpoint)", s.Endpoint, s.Protocol)
	if s.Endpoint == "" {
		// The variable's value is not printed: it may carry credentials.
		where = fmt.Sprintf("traces to the endpoint in $%s over OTLP %s", s.EndpointFromEnv, s.Protocol)
	}
	names := make([]string, 0, len(cfg.Telemetry.HeadersEnv))
	for name := range cfg.Telemetry.HeadersEnv {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if env := cfg.Telemetry.HeadersEnv[name]; getenv(env) == "" {
			warnings = append(warnings, fmt.Sprintf("%s: telemetry.headers_env.%s: warning: names the environment variable %s, which is not set here; mcp-gateway serve would not start without it",
				cfg.Path, name, env))
		}
	}
	return where, warnings
}

// printCheck prints the report: the problems, warnings and notes on stderr and the summary of a
// good config on stdout, or the whole report as JSON on stdout. Problems exit 1.
func printCheck(stdout, stderr io.Writer, format string, rep checkReport) error {
	rep.OK = len(rep.Problems) == 0
	if format != formatTable {
		if err := writeJSON(stdout, format, rep); err != nil {
			return err
		}
	} else {
		for _, l := range slices.Concat(rep.Notes, rep.Warnings, rep.Problems) {
			fmt.Fprintln(stderr, l)
		}
		if rep.OK {
			fmt.Fprintf(stdout, "%s: ok (%d servers, tool names %s, %d policy rules, default %s, %s, %s)\n",
				rep.File, *rep.Servers, rep.ToolNames, *rep.PolicyRules, rep.PolicyDefault,
				count(len(rep.StopTools), "stop tool"), count(len(rep.InspectionTools), "inspection tool"))
			if len(rep.StopTools) > 0 {
				fmt.Fprintf(stdout, "stop tools (always callable, sent beside the call in flight): %s\n", strings.Join(rep.StopTools, ", "))
			}
			if len(rep.InspectionTools) > 0 {
				fmt.Fprintf(stdout, "inspection tools (allow_while_locked, callable during a lockout): %s\n", strings.Join(rep.InspectionTools, ", "))
			}
			if rep.Telemetry != "" {
				fmt.Fprintf(stdout, "telemetry: %s\n", rep.Telemetry)
			}
			if rep.LLM != "" {
				fmt.Fprintf(stdout, "agent model: %s\n", rep.LLM)
			}
		}
	}
	if !rep.OK {
		return exitError{1}
	}
	return nil
}

// lines splits an error of several problems, one a line.
func lines(err error) []string {
	return strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// exemptCheck is what check found about the tools that stay callable during a lockout.
type exemptCheck struct {
	stops, inspection []string // public names, for the summary
	problems, notes   []string
}

// override is one stop or allow_while_locked override, where it is written.
type override struct {
	index  int // of the server in servers
	server *config.Server
	tool   string
	config.ToolOverride
}

// where is the override's key as config errors name it: "file:line: servers[i] (name): tools.overrides.tool.key".
func (o override) where(cfg *config.Config, key string) string {
	return fmt.Sprintf("%s:%d: servers[%d] (%s): tools.overrides.%s.%s", cfg.Path, o.Line, o.index, o.server.Name, o.tool, key)
}

// checkExemptTools verifies allow_while_locked against the annotations the gateway has seen:
// those of the running gateway's catalog (GET /admin/tools), else those pinned in the state file.
// It never starts a server: that would start a second driver on a robot. What cannot be known yet
// is a note; the gateway verifies it when the server lists its tools, and refuses the tool
// during a lockout unless the server annotates it read-only.
func checkExemptTools(ctx context.Context, cfg *config.Config, o *opsFlags) exemptCheck {
	var ex exemptCheck
	var overrides []override
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		for name, ov := range s.Tools.Overrides {
			if !ov.Stop && !ov.AllowWhileLocked {
				continue
			}
			overrides = append(overrides, override{index: i, server: s, tool: name, ToolOverride: ov})
		}
	}
	if len(overrides) == 0 {
		return ex
	}
	sort.Slice(overrides, func(i, j int) bool {
		a, b := overrides[i], overrides[j]
		return a.index < b.index || (a.index == b.index && a.Line < b.Line)
	})
	seen, from, why := seenTools(ctx, cfg, o)
	for _, ov := range overrides {
		public := gateway.PublicName(cfg.Gateway.ToolNames, ov.server.Name, ov.tool)
		if ov.Stop {
			ex.stops = append(ex.stops, public)
			if tools, known := seen[ov.server.Name]; known {
				if _, listed := tools[ov.tool]; !listed {
					ex.notes = append(ex.notes, fmt.Sprintf("%s: note: %s has no tool %s of server %s; if the server does not list it, it has no stop tool",
						ov.where(cfg, "stop"), from, ov.tool, ov.server.Name))
				}
			}
			continue
		}
		if !ov.server.Physical {
			ex.notes = append(ex.notes, fmt.Sprintf("%s: note: has no effect: server %s is not physical, so it is never locked out", ov.where(cfg, "allow_while_locked"), ov.server.Name))
			continue
		}
		tool, listed := seen[ov.server.Name][ov.tool]
		ann := tool.hints
		switch {
		case from == "":
			ex.inspection = append(ex.inspection, public+" (not verified yet)")
			ex.notes = append(ex.notes, fmt.Sprintf("%s: note: cannot be verified yet: %s; the gateway verifies it when server %s lists its tools, and refuses the tool during a lockout unless the server annotates it readOnlyHint: true",
				ov.where(cfg, "allow_while_locked"), why, ov.server.Name))
		case !listed || !tool.hintsKnown:
			ex.inspection = append(ex.inspection, public+" (not verified yet)")
			ex.notes = append(ex.notes, fmt.Sprintf("%s: note: cannot be verified yet: %s has no annotations of tool %s of server %s; the gateway verifies it when the server lists the tool",
				ov.where(cfg, "allow_while_locked"), from, ov.tool, ov.server.Name))
		case ann == nil || !ann.ReadOnlyHint:
			hints := "without annotations"
			if ann != nil {
				hints = "with readOnlyHint false"
			}
			ex.problems = append(ex.problems, fmt.Sprintf("%s: tool %s of server %s is not read-only: %s lists it %s, so calling it during a lockout could move the robot; "+
				"only a tool whose server annotates it readOnlyHint: true may stay callable; remove allow_while_locked",
				ov.where(cfg, "allow_while_locked"), ov.tool, ov.server.Name, from, hints))
		default:
			ex.inspection = append(ex.inspection, public)
		}
	}
	return ex
}

// seenTool is what the gateway has seen of one upstream tool: that its server lists it, and its
// annotations when they are known (hints nil: the server gave none).
type seenTool struct {
	hints      *mcp.ToolAnnotations
	hintsKnown bool
}

// seenTools returns the tools the gateway has seen, by server and upstream tool name, and where
// they come from: the running gateway's catalog, else the pins of the state file. When neither
// can be read, from is "" and why says why.
func seenTools(ctx context.Context, cfg *config.Config, o *opsFlags) (seen map[string]map[string]seenTool, from, why string) {
	seen = map[string]map[string]seenTool{}
	add := func(server, tool string, t seenTool) {
		if seen[server] == nil {
			seen[server] = map[string]seenTool{}
		}
		seen[server][tool] = t
	}
	acc, err := openState(cfg, o, true)
	switch {
	case errors.Is(err, errNoStateFile):
		return nil, "", "no gateway has run with this state_dir, so no server has listed its tools yet"
	case err != nil:
		return nil, "", err.Error()
	}
	defer acc.Close()
	if acc.api != nil {
		var tools []gateway.ToolStatus
		if err := acc.api.getJSON(ctx, "/admin/tools", &tools); err != nil {
			return nil, "", err.Error()
		}
		for _, t := range tools {
			add(t.Server, t.Upstream, seenTool{hints: t.Annotations, hintsKnown: true})
		}
		return seen, "the running gateway", ""
	}
	pins, err := acc.st.ListPins("")
	if err != nil {
		return nil, "", err.Error()
	}
	for _, p := range pins {
		var t seenTool
		// A pin stored before pins kept annotations has none: they are unknown.
		if len(p.Annotations) > 0 && json.Unmarshal(p.Annotations, &t.hints) == nil {
			t.hintsKnown = true
		}
		add(p.Server, p.Tool, t)
	}
	return seen, "the state file " + acc.st.Path() + " (the tools as last pinned)", ""
}

func runSchema(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("schema", "schema\n\nPrints the JSON Schema of the config file.", stdout, stderr)
	if err := fs.parseNone(args); err != nil {
		return err
	}
	b, err := config.JSONSchema()
	if err != nil {
		return err
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}
