package governor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// Audit is step 10: every call, refused or not, leaves one record in the audit log, with the
// arguments after redaction and a digest of the original. Records are handed to the store's
// group-committing writer without waiting for the disk; lockouts are recorded synchronously by
// LockOnUnknown.
func Audit(log store.AuditLog, redact *Redactor) Step {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
			original := c.Args
			out := next.Handle(ctx, c)
			sum := sha256.Sum256(original)
			rec := store.Record{
				Type:       store.RecordCall,
				Principal:  c.Principal,
				Session:    c.Session,
				Tool:       c.Name,
				CallID:     c.ID,
				Args:       redact.Redact(original),
				ArgsDigest: hex.EncodeToString(sum[:]),
				Decision:   decision(c),
				Detail:     c.Detail,
				Kind:       string(out.Kind),
				Outcome:    out.Label(),
				Reason:     out.Reason,
				RunID:      out.RunID,
				DurationMS: float64(time.Since(c.Start).Microseconds()) / 1000,
			}
			if c.Tool != nil {
				rec.Server = c.Tool.Server
			}
			if len(c.Labels) > 0 {
				if rec.Detail == nil {
					rec.Detail = map[string]any{}
				}
				rec.Detail["labels"] = c.Labels
			}
			if !json.Valid(rec.Args) {
				rec.Args = nil
			}
			log.Append(rec)
			return out
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
