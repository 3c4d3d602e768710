package store

// ModelEvidence identifies the model request that asked for a call (the built-in agent's
// calls), so that an audit record leads to the provider's own log of the request: its request
// id there, the model that answered (after any fallback) and the agent's invocation id of the
// request, which is also in the run's transcript.
type ModelEvidence struct {
	RequestID    string `json:"request_id,omitempty"`
	Model        string `json:"model,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
}

// bounded returns m with each id cut to MaxTextBytes: m itself when nothing is too long, else a
// copy, so that the caller's value is never changed.
func (m *ModelEvidence) bounded() *ModelEvidence {
	if m == nil {
		return nil
	}
	b := ModelEvidence{
		RequestID:    TruncateString(m.RequestID, MaxTextBytes),
		Model:        TruncateString(m.Model, MaxTextBytes),
		InvocationID: TruncateString(m.InvocationID, MaxTextBytes),
	}
	if b == *m {
		return m
	}
	return &b
}
