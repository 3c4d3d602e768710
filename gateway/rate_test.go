package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/governor"
)

const rateYAML = `servers:
{{servers}}policies:
  default: allow
  rules:
    - id: eleventh-move
      effect: require_approval
      when: 'tool_meta.physical && rate.server.physical_1m >= 10'
      reason: more than ten arm movements in a minute need a person
    - id: busy-reader
      effect: deny
      when: 'upstream_tool == "scan" && rate.principal.calls_1m >= 15 && rate.session.calls_1m == 0'
      reason: too many calls this minute
`

// TestRatePolicyHoldsTheEleventhMove: a require_approval rule on rate.server.physical_1m lets ten
// moves through and holds the eleventh; reads do not count as physical, and the counts survive a
// reload.
func TestRatePolicyHoldsTheEleventhMove(t *testing.T) {
	f := startFixture(t, withServers(rateYAML, server("robot", "    physical: true\n"), server("camera", "")))
	call := func(name, principal string) *governor.Outcome {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return f.g.Call(ctx, &governor.Call{Name: name, Args: json.RawMessage(`{}`), Principal: principal})
	}
	// held runs the call, waits for its approval request and denies it.
	held := func(name, principal string) (*governor.Outcome, string) {
		t.Helper()
		done := make(chan *governor.Outcome, 1)
		go func() { done <- call(name, principal) }()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			select {
			case out := <-done:
				return out, ""
			default:
			}
			pending, err := f.g.approvals.Pending()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pending {
				if p.Principal == principal {
					if _, err := f.g.approvals.Decide(context.Background(), p.ID, false, "operator", "not now"); err != nil {
						t.Fatal(err)
					}
					return <-done, p.Rule
				}
			}
		}
		t.Fatalf("%s by %s neither returned nor waited for approval", name, principal)
		return nil, ""
	}
	for i := 0; i < 5; i++ {
		if out := call("camera__scan", "alice"); !out.Success {
			t.Fatalf("scan %d: %+v", i+1, out)
		}
	}
	for i := 0; i < 10; i++ {
		if out := call("robot__move", []string{"alice", "bob"}[i%2]); !out.Success {
			t.Fatalf("move %d: %+v", i+1, out)
		}
	}
	out, rule := held("robot__move", "carol")
	if rule != "eleventh-move" || out.Kind != governor.KindApprovalDenied {
		t.Fatalf("the eleventh move: %+v (approval asked by rule %q), want it held for approval by rule eleventh-move", out, rule)
	}
	// Reads of the physical server's neighbour go on; the held move counted as well.
	if out := call("camera__scan", "carol"); !out.Success {
		t.Fatalf("a scan after the held move: %+v", out)
	}

	if _, err := f.reload(t, withServers(rateYAML, server("robot", "    physical: true\n"), server("camera", ""))); err != nil {
		t.Fatal(err)
	}
	if out, rule := held("robot__move", "dave"); rule != "eleventh-move" || out.Kind != governor.KindApprovalDenied {
		t.Fatalf("a move after a reload: %+v (rule %q), want the counts kept and the move held", out, rule)
	}
	// alice: 5 scans and 5 moves, a principal count; her calls have no session.
	for i := 0; i < 5; i++ {
		if out := call("camera__scan", "alice"); !out.Success {
			t.Fatalf("alice's scan %d: %+v", 11+i, out)
		}
	}
	if out := call("camera__scan", "alice"); out.Kind != governor.KindPolicyDenied || !strings.Contains(out.Reason, "busy-reader") {
		t.Fatalf("alice's 16th call in a minute: %+v, want denied by busy-reader", out)
	}
	if out := call("camera__scan", "bob"); !out.Success {
		t.Fatalf("bob, who made 5 calls: %+v", out)
	}
}
