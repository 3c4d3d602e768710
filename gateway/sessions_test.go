package gateway

import (
	"fmt"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/governor"
)

// TestSessionlessLabelsSurvivePruning: calls without a session (MCP 2026-07-28) share one entry;
// the untrusted label a guard set on it stays however many sessions come and go.
func TestSessionlessLabelsSurvivePruning(t *testing.T) {
	s := newSessions(func() map[string]bool { return map[string]bool{} }) // nothing is connected
	s.label("", "untrusted")
	for i := range 300 {
		s.get(fmt.Sprintf("gone-%d", i))
	}
	c := &governor.Call{}
	s.begin(c)
	if !c.Labels["untrusted"] {
		t.Fatalf("the sessionless calls' untrusted label was dropped: %v", c.Labels)
	}
	if len(s.m) > 200 {
		t.Errorf("%d entries after pruning; sessions that are gone must be dropped", len(s.m))
	}
}
