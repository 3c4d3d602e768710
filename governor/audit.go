package governor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/store"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// AuditStore is what the audit step needs of the state file: its log, whether it takes writes,
// and the lockouts, for a physical call whose outcome could not be recorded.
type AuditStore interface {
	Audit() store.AuditLog
	// Available is nil while the state file takes writes, otherwise what failed.
	Available() error
	// DigestArgs is the keyed digest a record keeps of the original arguments.
	DigestArgs(args []byte) string
	store.LockoutStore
}

// Audit is step 10: every call, refused or not, leaves one record in the audit log, with the
// arguments after redaction and a digest of the original, and no answer leaves before its
// record is on disk (SPEC.md §15). The caller waits for the group commit holding its record, so
// concurrent calls share fsyncs; a physical call's journal entry is removed in that same
// transaction.
//
// When the record cannot be written (the state file is unavailable, or the commit does not
// come back within the store's commit timeout) the caller is told at once, never held: a call
// refused before dispatch gets audit_unavailable; a call that ran has its result withheld
// (audit_unavailable, saying it ran), and on a physical server its unrecorded outcome locks out;
// a lockout keeps its own failure, saying it is not on record yet.
func Audit(st AuditStore, redact *Redactor, logger *slog.Logger) Step {
	log := st.Audit()
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			original := c.Args
			c.Redact = redact
			// While this call is in flight, a caller leading a commit may wait a moment for its
			// record to share the sync (store.AuditLog.Coming).
			log.Coming(1)
			defer log.Coming(-1)
			out := next.Handle(ctx, c)
			rec := store.Record{
				Type:       store.RecordCall,
				Principal:  c.Principal,
				Session:    c.Session,
				Tool:       c.Name,
				CallID:     c.ID,
				Model:      c.Model,
				Args:       redact.Redact(redact.kept(ctx, c, original)),
				ArgsDigest: st.DigestArgs(original),
				Decision:   decision(c),
				Detail:     c.Detail,
				Kind:       string(out.Kind),
				Outcome:    out.Label(),
				Reason:     out.Reason,
				RunID:      out.RunID,
				DurationMS: float64(time.Since(c.Start).Microseconds()) / 1000,
			}
			// The call's span (Trace), when it is traced: the record and the trace find each
			// other.
			rec.TraceID, rec.SpanID = telemetry.IDs(ctx)
			if c.Tool != nil {
				rec.Server = c.Tool.Server
			}
			if out.Kind == "" && out.Reason != "" {
				// The tool's own reason passed the tool_result guards on its way to the caller;
				// one that echoes an argument a tool_call guard flags (in log_only mode, the tool
				// got it) is not written down as it is.
				rec.Reason = redact.ScrubText(ctx, c, out.Reason)
			}
			if c.Journaled {
				rec.EndsCall = c.ID
			}
			if len(c.Labels) > 0 {
				if rec.Detail == nil {
					rec.Detail = map[string]any{}
				}
				rec.Detail["labels"] = c.Labels
			}
			// Arguments that are not valid JSON (which the guards could not read either) are
			// left out of the record by the store, which checks and compacts them once.
			_, span := telemetry.Child(ctx, spanAudit)
			if err := st.Available(); err != nil {
				// The disk is what is failing: answer now, and queue the record of that answer
				// to be written when the disk allows.
				final := unrecorded(ctx, st, c, out, err, true, logger)
				if final != out {
					rec.Kind, rec.Outcome, rec.Reason = string(final.Kind), final.Label(), final.Reason
					if c.Dispatched {
						if rec.Detail == nil {
							rec.Detail = map[string]any{}
						}
						rec.Detail["withheld_outcome"] = out.Label()
					}
				}
				if !log.Append(rec) {
					logger.ErrorContext(ctx, "audit record of a call not queued: the records waiting for the disk hold their memory bound", "tool", c.Name, "call", c.ID)
				}
				telemetry.Fail(span, string(KindAuditUnavailable))
				span.End()
				return final
			}
			if _, err := log.AppendSync(context.WithoutCancel(ctx), rec); err != nil {
				telemetry.Fail(span, string(KindAuditUnavailable))
				span.End()
				return unrecorded(ctx, st, c, out, err, true, logger)
			}
			span.End()
			return out
		})
	}
}

// unrecorded is the answer to a call whose record is not on disk: queued says whether it will
// still be written when the disk allows.
func unrecorded(ctx context.Context, st AuditStore, c *Call, out *Outcome, err error, queued bool, logger *slog.Logger) *Outcome {
	later := "it is kept in memory and written when the disk allows"
	if !queued {
		later = "it is lost, since the records waiting for the disk hold their memory bound"
	}
	logger.ErrorContext(ctx, "audit record of a call not written", "tool", c.Name, "call", c.ID, "outcome", out.Label(), "dispatched", c.Dispatched, "record", later, "error", err)
	fix := "Tell the operator: the state file's disk must be fixed (free space, check the device) before the gateway serves calls again."
	switch {
	case out.Kind == KindAuditUnavailable && !c.Dispatched:
		return out // refused for this very reason before anything was sent
	case out.Unknown:
		// A lockout: its failure is what the caller must read; the lockout itself is in force.
		locked := Refuse(out.Kind, fmt.Sprintf("%s The gateway could not write this call's audit record (%v); %s. %s", out.Reason, err, later, fix))
		locked.Unknown = true
		return locked
	case !c.Dispatched:
		what := "refused it"
		if out.Reason != "" {
			what = "would have refused it: " + strings.TrimSuffix(out.Reason, ".")
		}
		return Refuse(KindAuditUnavailable, fmt.Sprintf(
			"the call to %s was not sent to any server, and the gateway could not record it: %v. (The gateway %s.) %s",
			c.Name, err, what, fix))
	}
	reported := "it reported success"
	if !out.Success {
		reported = "it did not report success"
	}
	reason := fmt.Sprintf(
		"the call to %s was sent to server %s and finished (%s), but the gateway could not write its audit record: %v. "+
			"Its result is withheld, because the gateway answers nothing it has not recorded. Do not repeat the call: it ran. %s",
		c.Name, c.Tool.Server, reported, err, fix)
	if c.Tool.Physical() {
		lo := store.Lockout{
			Server: c.Tool.Server, Tool: c.Name, CallID: c.ID, Principal: c.Principal, Session: c.Session,
			Reason: "the outcome of the call is not on record: the gateway could not write its audit record",
		}
		if perr := st.PutLockout(lo); perr != nil {
			logger.ErrorContext(ctx, "lockout of a physical call without a record is held in memory only", "server", lo.Server, "call", c.ID, "error", perr)
		}
		st.Audit().Append(withTrace(ctx, store.Record{
			Type: store.RecordLockout, Principal: c.Principal, Session: c.Session, Server: lo.Server, Tool: c.Name,
			CallID: c.ID, Kind: string(KindAuditUnavailable), Reason: lo.Reason,
		}))
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.AddEvent(eventLockout, trace.WithAttributes(telemetry.AttrServer.String(lo.Server),
				telemetry.AttrLockout.String(store.LockoutUnknown), telemetry.AttrErrorType.String(string(KindAuditUnavailable))))
		}
		reason += " " + fmt.Sprintf("Physical actions on server %s are now locked out. %s", lo.Server, operatorMust(lo.Server))
	}
	withheld := Refuse(KindAuditUnavailable, reason)
	withheld.Unknown = c.Tool.Physical()
	return withheld
}

// CheckStore refuses every call while the state file is not taking writes, before anything is
// sent: a call the gateway could not record is a call it does not make (SPEC.md §15).
func CheckStore(available func() error) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			if err := available(); err != nil {
				return Refuse(KindAuditUnavailable, fmt.Sprintf(
					"the call to %s was refused and nothing was sent to any server: the gateway records every call before it answers, and %v. "+
						"Tell the operator: the state file's disk must be fixed (free space, check the device); calls work again without a restart once it takes writes.",
					c.Name, err))
			}
			return next.Handle(ctx, c)
		})
	}
}

// decision is the policy decision ("allow:rule", "deny:rule", "approved:rule"); for a chain
// without a policy step "dispatched"; for calls refused before the policy step, "refused".
func decision(c *Call) string {
	switch {
	case c.Decision != "":
		return c.Decision
	case c.Dispatched:
		return "dispatched"
	default:
		return "refused"
	}
}
