package governor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
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

// A physical call that waited for its turn and was refused it because the server was locked
// out (the upstream's Admit): behind a halt it was cancelled by the halt, which is what the
// halt's own cancellation of it says, whichever of the two reached it first (a halt cancels
// the call in flight and the waiting ones one after another); behind any other lockout the
// robot's state is not known.
func TestWaiterRefusedItsTurnByAHaltIsCancelledByIt(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		l        store.Lockout
		kind     Kind
		want     string
		sentWord string
	}{
		{store.Lockout{Server: "arm", Kind: store.LockoutHalt, By: "bob", Reason: "smoke", At: at}, KindCancelled,
			`the call to arm__move was cancelled because the operator bob halted the robot ("smoke") before it was sent to server arm; nothing was done.`, ""},
		{store.Lockout{Server: "arm", Tool: "arm__move", CallID: "c1", Reason: "deadline passed.", At: at}, KindExecutionStatusUnknown,
			"left the robot in an unknown state", "mcp-gateway unlock arm"},
	} {
		srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, &LockoutError{Lockout: c.l, Server: "arm"}
		}}
		tools := catalog{"arm__move": {Public: "arm__move", Server: "arm", Upstream: "move",
			ServerConfig: &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 1}, Dispatcher: srv}}
		out := Chain(Dispatch(), Resolve(tools)).Handle(context.Background(), &Call{Name: "arm__move", Args: json.RawMessage(`{}`)})
		if out.Kind != c.kind || !strings.Contains(out.Reason, c.want) || !strings.Contains(out.Reason, c.sentWord) || out.Unknown {
			t.Errorf("behind a lockout of kind %q: %+v, want kind %s with %q", c.l.Kind, out, c.kind, c.want)
		}
	}
}
