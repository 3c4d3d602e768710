package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// Only an operator's unlock ends a lockout (SPEC.md §11); a config change must not end one by
// the back door. lockoutConflicts says why cfg may not come into force while these lockouts are
// active: a locked out server that cfg removes (renaming it is removing it) or makes
// non-physical would be freed without an unlock, and so would every other physical server if
// lockout_scope went from global to server. oldScope is "" at start, when the scope the
// lockouts were made under is not known.
func lockoutConflicts(lockouts []store.Lockout, cfg *config.Config, oldScope string) []string {
	var problems []string
	for _, l := range lockouts {
		s := cfg.Server(l.Server)
		var why string
		switch {
		case s == nil:
			why = "the config no longer has that server (a renamed server is another server)"
		case !s.Physical:
			why = "the config makes it non-physical, which no lockout covers"
		default:
			continue
		}
		problems = append(problems, fmt.Sprintf(
			"%s: server %s is %s, and %s: that would end the lockout without an operator's unlock. "+
				"Inspect the robot and unlock it first (`%s`), or keep the server physical in the config",
			cfg.Path, l.Server, describeActiveLockout(l), why, pastable.Command("unlock", l.Server, "--reason", "what was inspected")))
	}
	if len(lockouts) > 0 && oldScope == config.LockoutGlobal && cfg.Gateway.LockoutScope == config.LockoutServer {
		problems = append(problems, fmt.Sprintf(
			"%s: gateway.lockout_scope changes from global to server while %s is locked out: that would free every other physical server without an unlock. "+
				"Unlock first, or keep lockout_scope global", cfg.Path, lockouts[0].Server))
	}
	return problems
}

// describeActiveLockout names what a lockout is, for messages: "halted by alice (reason)".
func describeActiveLockout(l store.Lockout) string {
	var b strings.Builder
	switch l.Kind {
	case store.LockoutHalt:
		b.WriteString("halted")
	case store.LockoutOperator:
		b.WriteString("locked by an operator")
	default:
		b.WriteString("locked out")
	}
	if l.By != "" {
		fmt.Fprintf(&b, " by %s", l.By)
	}
	if l.Reason != "" {
		fmt.Fprintf(&b, " (%s)", store.TruncateString(l.Reason, 200))
	}
	fmt.Fprintf(&b, " since %s", l.At.UTC().Format(time.RFC3339))
	return b.String()
}

// extendHalt puts every physical server of cfg that has no lockout under the halt in force, if
// there is one: a halt stops the whole cell, including a physical server that a reload adds or
// that was not configured when the halt was made. It returns the servers it halted.
func (g *Gateway) extendHalt(cfg *config.Config) []string {
	st := g.opts.Store
	if st == nil {
		return nil
	}
	var halt *store.Lockout
	for _, l := range st.Lockouts() {
		if l.Halted() {
			halt = &l
			break
		}
	}
	if halt == nil {
		return nil
	}
	var halted []string
	for _, s := range cfg.Servers {
		if !s.Physical {
			continue
		}
		if _, locked := st.Lockout(s.Name); locked {
			continue
		}
		l := store.Lockout{Server: s.Name, Kind: store.LockoutHalt, By: halt.By, At: time.Now(),
			Reason: fmt.Sprintf("%s (the halt of server %s, in force when this server was configured)", halt.Reason, halt.Server)}
		if _, applied, err := st.ApplyLockout(l); err != nil {
			g.log.Error("HALT NOT YET ON DISK for a server configured while halted: it is in force in memory", "server", s.Name, "error", err)
		} else if !applied {
			continue
		}
		st.Audit().Append(store.Record{Type: store.RecordLockout, Action: "halt", Principal: halt.By, Server: s.Name, Reason: l.Reason,
			Detail: map[string]any{"extended_from": halt.Server, "halted_at": halt.At}})
		g.log.Warn("a halt is in force: the physical server configured now is halted too", "server", s.Name, "halted_by", halt.By)
		halted = append(halted, s.Name)
	}
	return halted
}
