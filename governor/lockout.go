package governor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/pastable"
	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// Lockouts answers whether a physical server is locked out. It is built once over the store and
// asked on every call, so it reads only the store's in-memory view.
type Lockouts struct {
	store store.LockoutStore
	scope string // config.LockoutGlobal or config.LockoutServer
}

// NewLockouts is the lockout view for the configured scope.
func NewLockouts(s store.LockoutStore, scope string) *Lockouts {
	return &Lockouts{store: s, scope: scope}
}

// For returns the lockout that blocks calls to a physical server, if any: with global scope the
// oldest active lockout of any server, with server scope that server's own.
func (l *Lockouts) For(server string) (store.Lockout, bool) {
	if l.scope == config.LockoutServer {
		return l.store.Lockout(server)
	}
	active := l.store.Lockouts()
	if len(active) == 0 {
		return store.Lockout{}, false
	}
	return active[0], true
}

// LockoutError refuses a call because of an active lockout.
type LockoutError struct {
	Lockout store.Lockout
	// Server is the server the refused call was for.
	Server string
}

func (e *LockoutError) Error() string { return e.Reason() }

// Reason tells a model or an operator why physical actions are blocked and what must happen.
func (e *LockoutError) Reason() string { return lockoutReason(e.Server, e.Lockout) }

func lockoutReason(server string, l store.Lockout) string {
	var b strings.Builder
	if server != l.Server {
		fmt.Fprintf(&b, "Physical actions on every robot server are locked out (lockout_scope global), because of server %s: ", l.Server)
	} else {
		fmt.Fprintf(&b, "Physical actions on server %s are locked out: ", l.Server)
	}
	at, why := l.At.UTC().Format(time.RFC3339), strings.TrimSuffix(l.Reason, ".")
	switch l.Kind {
	case store.LockoutHalt:
		fmt.Fprintf(&b, "the operator %s halted the robot at %s (emergency stop: %s). ", l.By, at, why)
	case store.LockoutOperator:
		fmt.Fprintf(&b, "the operator %s locked it out at %s (%s). ", l.By, at, why)
	default:
		fmt.Fprintf(&b, "the call to %s (call %s) at %s left the robot in an unknown state (%s). ", l.Tool, l.CallID, at, why)
	}
	b.WriteString(operatorMust(l.Server))
	return b.String()
}

// operatorMust says what has to happen before physical actions resume.
func operatorMust(server string) string {
	return fmt.Sprintf("An operator must inspect the robot and then reset the lockout with `%s`. "+
		"Do not retry physical actions until then; tools of non-physical servers still work.", pastable.Command("unlock", server, "--reason", "what was inspected"))
}

// CheckLockout is step 2: a call to a physical server is refused with
// KindExecutionStatusUnknown while a lockout covers that server, unless the tool is exempt (the
// server's stop tool, or a read-only tool named for inspection): that call goes on, and its
// audit record names the lockout it passed ("while_locked").
func CheckLockout(l *Lockouts) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			if c.Tool.Physical() {
				if lo, locked := l.For(c.Tool.Server); locked {
					if !c.Tool.Exempt() {
						lockoutEvent(ctx, lo)
						return Refuse(KindExecutionStatusUnknown, lockoutReason(c.Tool.Server, lo))
					}
					if c.Detail == nil {
						c.Detail = map[string]any{}
					}
					c.Detail["while_locked"] = lo.Server
				}
			}
			return next.Handle(ctx, c)
		})
	}
}

// Admit is the upstream's last check before a call is sent (upstream.Options.Admit): a call that
// waited for its turn behind one that then locked the server out is not sent. The upstream does
// not ask it for the calls of exempt tools, which Dispatch marks (upstream.WithStop,
// upstream.WithInspection).
func (l *Lockouts) Admit(physical func(server string) bool) func(server string) error {
	return func(server string) error {
		if !physical(server) {
			return nil
		}
		if lo, locked := l.For(server); locked {
			return &LockoutError{Lockout: lo, Server: server}
		}
		return nil
	}
}

// LockoutJournal is the state LockOnUnknown works on: the lockouts, and the journal of
// physical calls in flight that lets the next start lock out after a gateway crash.
type LockoutJournal interface {
	store.LockoutStore
	BeginPhysical(l store.Lockout) error
}

// LockOnUnknown wraps dispatch (steps 6 and 7): when a call on a physical server ends with an
// unknown outcome, the lockout is put in force and committed to the state file, and its audit
// record queued ahead of the call's, before the failure returns. Every physical call is
// journaled before it is sent; the entry is removed in the transaction that writes the call's
// audit record (the audit step), so that a gateway killed at any moment leaves either the record
// or the entry, and the next start locks out for an entry. If the lockout cannot be written, it
// stays in force in memory and is written when the disk allows; the failure says so.
func LockOnUnknown(ls LockoutJournal, audit store.AuditLog, logger *slog.Logger) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			if !c.Tool.Physical() {
				return next.Handle(ctx, c)
			}
			// Journal the call first: if the gateway dies before the outcome is recorded, the
			// next start finds the entry and locks the server out (store.Open).
			entry := store.Lockout{Server: c.Tool.Server, Tool: c.Name, CallID: c.ID, Principal: c.Principal, Session: c.Session, At: time.Now()}
			if err := ls.BeginPhysical(entry); err != nil {
				logger.ErrorContext(ctx, "physical call not sent: it could not be journaled in the state file", "server", entry.Server, "call", c.ID, "error", err)
				return Refuse(KindAuditUnavailable, fmt.Sprintf(
					"the call to %s was not sent to any server: the gateway could not journal it in its state file (%v), and it sends no physical action it could not account for after a crash. "+
						"Tell the operator: the state file's disk must be fixed; calls work again without a restart once it takes writes.", c.Name, err))
			}
			c.Journaled = true
			out := next.Handle(ctx, c)
			if !out.Unknown {
				return out
			}
			lo := store.Lockout{
				Server:    c.Tool.Server,
				Tool:      c.Name,
				CallID:    c.ID,
				Principal: c.Principal,
				Session:   c.Session,
				Reason:    out.Reason,
				At:        time.Now(),
			}
			stored := ""
			if err := ls.PutLockout(lo); err != nil {
				logger.ErrorContext(ctx, "LOCKOUT NOT YET ON DISK: it is in force in memory and written when the state file allows",
					"server", lo.Server, "tool", lo.Tool, "call", lo.CallID, "error", err)
				stored = " The lockout is in force but not yet written to the state file (" + err.Error() + "); it is written as soon as the disk allows."
			}
			if current, ok := ls.Lockout(lo.Server); ok {
				lo = current // an earlier lockout of this server stays the one on record
			}
			// Queued ahead of the call's own record, which the caller waits for: both are on disk
			// before the failure leaves the gateway.
			if !audit.Append(withTrace(ctx, store.Record{
				Type: store.RecordLockout, Principal: c.Principal, Session: c.Session,
				Server: lo.Server, Tool: c.Name, CallID: c.ID, Kind: string(out.Kind), Reason: out.Reason,
			})) {
				logger.ErrorContext(ctx, "audit record of a lockout not queued", "server", lo.Server, "call", c.ID)
			}
			logger.WarnContext(ctx, "physical server locked out: an operator must inspect the robot and unlock it",
				"server", lo.Server, "tool", c.Name, "call", c.ID, "kind", out.Kind)
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				// The lockout in force (an earlier one stays), and the kind of the outcome that
				// called for it.
				span.AddEvent(eventLockout, trace.WithAttributes(telemetry.AttrServer.String(lo.Server),
					telemetry.AttrLockout.String(lockoutKind(lo)), telemetry.AttrErrorType.String(string(out.Kind))))
			}
			locked := Refuse(KindExecutionStatusUnknown, fmt.Sprintf("%s Physical actions on server %s are now locked out. %s%s",
				out.Reason, lo.Server, operatorMust(lo.Server), stored))
			locked.Unknown = true
			return locked
		})
	}
}
