package governor

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// A refusal says what put the lockout in force: a call of unknown outcome, an operator's lock or
// a halt, each with its own who and why.
func TestLockoutReasonNamesItsKind(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		l       store.Lockout
		want    []string
		notWant string
	}{
		{store.Lockout{Server: "arm", Tool: "arm__move", CallID: "c1", Reason: "deadline passed.", At: at},
			[]string{"the call to arm__move (call c1) at 2026-12-01T12:00:00Z left the robot in an unknown state (deadline passed)"}, "the operator"},
		{store.Lockout{Server: "arm", Kind: store.LockoutOperator, By: "alice", Reason: "a person is in the cell", At: at},
			[]string{"the operator alice locked it out at 2026-12-01T12:00:00Z (a person is in the cell)"}, "unknown state"},
		{store.Lockout{Server: "arm", Kind: store.LockoutHalt, By: "bob", Reason: "smoke", At: at},
			[]string{"the operator bob halted the robot at 2026-12-01T12:00:00Z (emergency stop: smoke)"}, "unknown state"},
	} {
		got := lockoutReason("arm", c.l)
		for _, w := range append(c.want, "mcp-gateway unlock arm") {
			if !strings.Contains(got, w) {
				t.Errorf("kind %q: %q lacks %q", c.l.Kind, got, w)
			}
		}
		if strings.Contains(got, c.notWant) {
			t.Errorf("kind %q: %q has %q", c.l.Kind, got, c.notWant)
		}
	}
}
