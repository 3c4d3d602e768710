package store

import (
	"fmt"
	"slices"
)

// ModelEvidence identifies the model request that asked for a call (the built-in agent's
// calls), so that an audit record leads to the provider's own log of the request: its request
// id there, the model that answered (after any fallback) and the agent's invocation id of the
// request, which is also in the run's transcript; and what the provider or the agent's
// translator warned of about the request (a setting the model ignored, a fallback that
// answered), which may change how its answer is read.
type ModelEvidence struct {
	RequestID    string   `json:"request_id,omitempty"`
	Model        string   `json:"model,omitempty"`
	InvocationID string   `json:"invocation_id,omitempty"`
	Warnings     []string `json:"warnings,omitempty"`
}

// MaxEvidenceWarnings bounds the warnings a record's model evidence keeps; past it, the last
// one kept says how many more there were.
const MaxEvidenceWarnings = 16

// bounded returns m with each id and warning cut to MaxTextBytes and at most
// MaxEvidenceWarnings warnings: m itself when nothing is too long, else a copy, so that the
// caller's value is never changed.
func (m *ModelEvidence) bounded() *ModelEvidence {
	if m == nil {
		return nil
	}
	b := ModelEvidence{
		RequestID:    TruncateString(m.RequestID, MaxTextBytes),
		Model:        TruncateString(m.Model, MaxTextBytes),
		InvocationID: TruncateString(m.InvocationID, MaxTextBytes),
		Warnings:     boundedWarnings(m.Warnings),
	}
	if b.RequestID == m.RequestID && b.Model == m.Model && b.InvocationID == m.InvocationID && slices.Equal(b.Warnings, m.Warnings) {
		return m
	}
	return &b
}

// boundedWarnings returns ws with each warning cut to MaxTextBytes and, past
// MaxEvidenceWarnings, the first ones and a last one counting those left out: ws itself when it
// is within the bounds, else a new slice.
func boundedWarnings(ws []string) []string {
	within := len(ws) <= MaxEvidenceWarnings
	for _, w := range ws {
		within = within && len(w) <= MaxTextBytes
	}
	if within {
		return ws
	}
	kept := ws
	if len(ws) > MaxEvidenceWarnings {
		kept = ws[:MaxEvidenceWarnings-1]
	}
	out := make([]string, 0, MaxEvidenceWarnings)
	for _, w := range kept {
		out = append(out, TruncateString(w, MaxTextBytes))
	}
	if len(ws) > MaxEvidenceWarnings {
		out = append(out, fmt.Sprintf("[truncated: %d more warnings]", len(ws)-len(kept)))
	}
	return out
}
