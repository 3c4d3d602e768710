package gateway

// Hot reload (SPEC.md §13). SIGHUP and POST /admin/reload re-read the config file the gateway
// started with. A file with any problem is refused and the running config stays. Otherwise the
// rules change at once: the chain is rebuilt and swapped whole, so a call runs under either the
// old rules or the new ones, never a mix; downstream sessions, the state file and the metrics
// stay. Upstreams whose launch settings changed are restarted; the others keep running.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/limits"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/upstream"
)

// ReloadReport says what a reload changed. Server names are in config order.
type ReloadReport struct {
	// Config is the file the config was read from.
	Config string `json:"config"`
	// Restarted servers had their launch settings changed (command, args, cwd, env, url,
	// headers_env, physical, queue_size, startup_timeout_sec, restart_backoff_max_sec); Started
	// ones were added, Stopped ones removed. Every other server kept running untouched.
	Restarted []string `json:"restarted"`
	Started   []string `json:"started"`
	Stopped   []string `json:"stopped"`
	// NotReady says which restarted or started servers were not ready within their startup
	// timeout, and why. They keep retrying; their tools are listed once they are up.
	NotReady []string `json:"not_ready,omitempty"`
	// NeedsRestart names the settings that differ from those the gateway started with and that
	// only its restart applies (its name, listen address, state directory, logging, tokens,
	// approval timeout, telemetry…).
	NeedsRestart []string `json:"needs_restart,omitempty"`
	// Warnings are what an operator should know: a change of tool names, tools left out by a
	// name collision.
	Warnings []string `json:"warnings,omitempty"`
	// Tools is the number of tools listed after the reload.
	Tools int `json:"tools"`
	// TLS names the certificate served to new connections after the reload (gateway.tls).
	TLS string `json:"tls,omitempty"`
}

// reloadApplied are the settings a reload applies, as config keys. A change to any other one
// waits for the gateway's next start: the HTTP listener, the state file, the logger, the
// tokens, the tracer provider (telemetry) and the MCP server's name are set up once, and a
// waiting approval keeps its timeout.
var reloadApplied = map[string]bool{
	"servers": true, "audit": true, "policies": true, "guardrails": true,
	"gateway.tool_names": true, "gateway.lockout_scope": true, "gateway.tls": true, // tls: as reloadTLS says
	"approvals.use": true, "approvals.webhook": true, "limits": true,
}

// reloadSplit are the sections whose changes are named key by key: those of which a reload
// applies some keys and not others, and telemetry, of which it applies none but whose report
// says which setting waits (telemetry.endpoint, telemetry.sample_ratio…).
var reloadSplit = map[string]bool{"gateway": true, "approvals": true, "telemetry": true}

// ReloadFile re-reads the config file the gateway started with and applies it with Reload. It
// is what SIGHUP and POST /admin/reload do. Every attempt, applied or refused, is logged and
// audited as an operator action "reload" by the principal by.
func (g *Gateway) ReloadFile(ctx context.Context, by string) (ReloadReport, error) {
	path := g.cfg.Path
	cfg, err := config.Load(path)
	var rep ReloadReport
	if err == nil {
		rep, err = g.Reload(ctx, cfg)
	}
	rep.Config = path
	rec := store.Record{Type: store.RecordOperator, Action: "reload", Principal: by, Detail: map[string]any{"config": path}}
	if err != nil {
		err = fmt.Errorf("config reload refused, the running config stays: %w", err)
		rec.Outcome, rec.Reason = "refused", err.Error()
		g.log.Error(err.Error(), "config", path, "by", by)
	} else {
		rec.Detail["restarted"], rec.Detail["started"], rec.Detail["stopped"] = rep.Restarted, rep.Started, rep.Stopped
		if len(rep.NeedsRestart) > 0 {
			rec.Detail["needs_restart"] = rep.NeedsRestart
		}
		g.log.Info("config reloaded", "config", path, "by", by, "restarted", rep.Restarted, "started", rep.Started,
			"stopped", rep.Stopped, "tools", rep.Tools)
		for _, w := range rep.Warnings {
			g.log.Warn("config reload: "+w, "config", path)
		}
		for _, why := range rep.NotReady {
			g.log.Warn("config reload: a server is not ready yet and keeps retrying", "config", path, "reason", why)
		}
		if len(rep.NeedsRestart) > 0 {
			g.log.Warn("config reload: these changed settings apply only when the gateway restarts",
				"config", path, "settings", rep.NeedsRestart)
		}
	}
	if st := g.opts.Store; st != nil {
		if _, auditErr := st.Audit().AppendSync(context.WithoutCancel(ctx), rec); auditErr != nil {
			g.log.Error("audit record of a reload not written", "config", path, "error", auditErr)
		}
	}
	return rep, err
}

// Reload makes cfg the config in force, without dropping downstream sessions. It checks cfg
// fully first, as `mcp-gateway check` does, and also refuses tool names that would collide;
// on any problem it returns an error listing every one and nothing has changed.
//
// Then policies, guards, tool filters, hidden tools, overrides, tool_names, lockout_scope,
// audit.redact_keys, limits and the approval channel change at once: calls that start afterwards run
// under the new rules, calls in flight finish under the old ones. The catalog is rebuilt (clients
// get tools/list_changed). Servers are restarted, started and stopped as
// upstream.Manager.Reconfigure does; calls in flight on a restarted or stopped server fail as
// when it crashes (on a physical server that locks out), so reload with the robot idle.
//
// The MCP server, its sessions, the state file, the metrics and waiting approvals are kept.
// Settings that only a restart applies are listed in the report. A server added by a reload
// counts 0 calls in flight for policies' state.in_flight until the gateway restarts.
func (g *Gateway) Reload(ctx context.Context, cfg *config.Config) (ReloadReport, error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	rep := ReloadReport{Config: cfg.Path, Restarted: []string{}, Started: []string{}, Stopped: []string{}}

	var problems []string
	engine, err := CompilePolicies(cfg)
	if err != nil {
		problems = append(problems, err.Error())
	}
	sets, err := BuildGuards(cfg)
	if err != nil {
		problems = append(problems, err.Error())
	}
	var notifier governor.Notifier
	if g.notifier != nil {
		if notifier, err = newNotifier(cfg, g.log, g.opts.ApprovalCallback); err != nil { // judge (issue 21): the callback channel
			problems = append(problems, err.Error())
		}
	}
	problems = append(problems, g.collisions(cfg)...)
	applyTLS, tlsProblems := g.reloadTLS(cfg)
	problems = append(problems, tlsProblems...)
	if st := g.opts.Store; st != nil {
		problems = append(problems, lockoutConflicts(st.Lockouts(), cfg, g.config().Gateway.LockoutScope)...)
	}
	if len(problems) > 0 {
		return rep, errors.New(strings.Join(problems, "\n"))
	}

	old := g.config()
	rep.NeedsRestart = restartOnly(g.cfg, cfg) // those settings are still the ones of the start
	if old.Gateway.ToolNames != cfg.Gateway.ToolNames {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf(
			"gateway.tool_names changed from %s to %s: clients see every tool under a different name, and calls under the old names get unknown_tool",
			old.Gateway.ToolNames, cfg.Gateway.ToolNames))
	}
	var lockouts *governor.Lockouts
	if st := g.opts.Store; st != nil {
		lockouts = governor.NewLockouts(st, cfg.Gateway.LockoutScope)
	}
	// Limits whose id, per, rate, burst and concurrent are unchanged keep their counters and
	// the calls they hold in flight; the others start afresh.
	g.limiter = limits.New(cfg.Limits, limits.Options{Previous: g.limiter, Metrics: g.limitMetrics})
	chain := g.buildChain(cfg, engine, sets, lockouts)

	g.syncMu.Lock()
	g.guards = sets
	g.live.Store(&generation{cfg: cfg, chain: chain, guards: sets})
	if g.lockouts != nil {
		g.lockouts.cur.Store(lockouts)
	}
	if g.notifier != nil {
		g.notifier.set(notifier)
	}
	g.syncMu.Unlock()
	applyTLS(&rep)
	// Before any added server starts: a halt in force covers it too.
	if halted := g.extendHalt(cfg); len(halted) > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("a halt is in force, so the physical servers %s are halted too", strings.Join(halted, ", ")))
	}
	g.refresh() // the new filters, names and overrides over the servers that keep running

	restarted, started, stopped, err := g.ups.Reconfigure(ctx, cfg.Servers)
	rep.Restarted = append(rep.Restarted, restarted...)
	rep.Started = append(rep.Started, started...)
	rep.Stopped = append(rep.Stopped, stopped...)
	var notReady *upstream.StartError
	switch {
	case errors.As(err, &notReady):
		for _, n := range notReady.NotReady {
			rep.NotReady = append(rep.NotReady, n.Reason)
		}
	case err != nil:
		rep.Warnings = append(rep.Warnings, "the upstream servers were not reconfigured: "+err.Error())
	}
	for _, p := range g.refresh() {
		rep.Warnings = append(rep.Warnings, p.Msg)
	}
	rep.Tools = len(g.Catalog().Tools())
	return rep, nil
}

// collisions are the bare-name collisions cfg would make among the tools the servers list now,
// which a running gateway cannot serve. Servers that restart may list others; a collision that
// appears later leaves a tool out, as after tools/list_changed.
func (g *Gateway) collisions(cfg *config.Config) []string {
	var sources []Source
	for i := range cfg.Servers {
		if u := g.ups.Get(cfg.Servers[i].Name); u != nil {
			sources = append(sources, Source{Server: &cfg.Servers[i], Tools: u.Tools()})
		}
	}
	_, problems := BuildCatalog(cfg, sources, nil)
	var msgs []string
	for _, p := range problems {
		if p.Fatal {
			msgs = append(msgs, p.Msg)
		}
	}
	return msgs
}

// restartOnly names the settings changed from old to cfg that a reload does not apply.
func restartOnly(old, cfg *config.Config) []string {
	a, b := settings(old), settings(cfg)
	var changed []string
	for _, key := range unionKeys(a, b) {
		if !reloadSplit[key] {
			if !reloadApplied[key] && string(a[key]) != string(b[key]) {
				changed = append(changed, key)
			}
			continue
		}
		sa, sb := section(a[key]), section(b[key])
		for _, sub := range unionKeys(sa, sb) {
			if name := key + "." + sub; !reloadApplied[name] && string(sa[sub]) != string(sb[sub]) {
				changed = append(changed, name)
			}
		}
	}
	return changed
}

// settings is the config as its keys and their JSON values, which hold no secrets: the file
// only names the variables that do.
func settings(cfg *config.Config) map[string]json.RawMessage {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil
	}
	return section(b)
}

func section(raw json.RawMessage) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(raw, &m)
	return m
}

func unionKeys(a, b map[string]json.RawMessage) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// serveReload is POST /admin/reload: 200 with the ReloadReport, or 400 with the problems of a
// refused config. The reload is audited under the caller's principal.
func (g *Gateway) serveReload(w http.ResponseWriter, r *http.Request) {
	by := adminPrincipal
	if p := PrincipalFromContext(r.Context()); p != nil {
		by = p.ID
	}
	rep, err := g.ReloadFile(r.Context(), by)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// generation is a config in force and the call chain and guards built from it, swapped
// together.
type generation struct {
	cfg    *config.Config
	chain  governor.Handler
	guards *GuardSets
}

// config is the config in force: the one the gateway started with, or the last one reloaded.
func (g *Gateway) config() *config.Config { return g.live.Load().cfg }

// physical reports whether the config in force marks the server physical.
func (g *Gateway) physical(server string) bool {
	s := g.config().Server(server)
	return s != nil && s.Physical
}

// lockoutView answers lockout questions under the lockout_scope in force.
type lockoutView struct {
	cur atomic.Pointer[governor.Lockouts]
}

func newLockoutView(l *governor.Lockouts) *lockoutView {
	v := &lockoutView{}
	v.cur.Store(l)
	return v
}

// For returns the lockout that blocks calls to the physical server, if any.
func (v *lockoutView) For(server string) (store.Lockout, bool) { return v.cur.Load().For(server) }

// admit is upstream.Options.Admit under the scope in force.
func (v *lockoutView) admit(physical func(server string) bool) func(server string) error {
	return func(server string) error { return v.cur.Load().Admit(physical)(server) }
}

// liveNotifier announces approval requests on the channel in force.
type liveNotifier struct {
	cur atomic.Pointer[governor.Notifier]
}

func newLiveNotifier(n governor.Notifier) *liveNotifier {
	l := &liveNotifier{}
	l.set(n)
	return l
}

func (l *liveNotifier) set(n governor.Notifier) { l.cur.Store(&n) }

// Notify implements governor.Notifier.
func (l *liveNotifier) Notify(ctx context.Context, a store.Approval) error {
	return (*l.cur.Load()).Notify(ctx, a)
}
