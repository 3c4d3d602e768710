package governor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// lockoutChain is the chain's lockout part over two physical servers and one that is not.
func lockoutChain(st *store.Store, scope string, srv *fakeServer) Handler {
	arm := &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 0.05}
	base := &config.Server{Name: "base", Physical: true, CallTimeoutSec: 0.05}
	cam := &config.Server{Name: "cam", CallTimeoutSec: 0.05}
	tools := catalog{
		"arm__pick":  {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: arm, Dispatcher: srv},
		"base__move": {Public: "base__move", Server: "base", Upstream: "move", ServerConfig: base, Dispatcher: srv},
		"cam__snap":  {Public: "cam__snap", Server: "cam", Upstream: "snap", ServerConfig: cam, Dispatcher: srv},
	}
	return Chain(Dispatch(),
		Audit(st, NewRedactor(nil), quiet),
		Resolve(tools),
		CheckStore(st.Available),
		CheckLockout(NewLockouts(st, scope)),
		CheckResult(),
		LockOnUnknown(st, st.Audit(), quiet),
	)
}

func TestTimeoutLocksOutPhysicalServers(t *testing.T) {
	for _, tt := range []struct {
		scope      string
		baseLocked bool
	}{{config.LockoutGlobal, true}, {config.LockoutServer, false}} {
		t.Run(tt.scope, func(t *testing.T) {
			st := openStore(t)
			hang := true
			srv := &fakeServer{do: func(ctx context.Context, name string, _ json.RawMessage) (*mcp.CallToolResult, error) {
				if hang && name == "pick" {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return ok(name)
			}}
			h := lockoutChain(st, tt.scope, srv)
			call := func(tool string) *Outcome {
				return h.Handle(context.Background(), &Call{ID: "call-" + tool, Name: tool, Args: json.RawMessage(`{}`), Principal: "p", Start: time.Now()})
			}
			out := call("arm__pick")
			if out.Kind != KindExecutionStatusUnknown || !strings.Contains(out.Reason, "now locked out") || !strings.Contains(out.Reason, "mcp-gateway unlock arm") {
				t.Fatalf("timeout outcome: %+v", out)
			}
			// The lockout was committed before the failure returned.
			lo, locked := st.Lockout("arm")
			if !locked || lo.Tool != "arm__pick" || lo.CallID != "call-arm__pick" || lo.Principal != "p" {
				t.Fatalf("lockout = %+v, %v", lo, locked)
			}
			hang = false
			calls := srv.calls
			if out := call("arm__pick"); out.Kind != KindExecutionStatusUnknown || !strings.Contains(out.Reason, "call-arm__pick") {
				t.Fatalf("call while locked: %+v", out)
			}
			out = call("base__move")
			if tt.baseLocked != (out.Kind == KindExecutionStatusUnknown) {
				t.Fatalf("base__move with scope %s: %+v", tt.scope, out)
			}
			if tt.baseLocked && !strings.Contains(out.Reason, "because of server arm") {
				t.Fatalf("global lockout reason must name the locked server: %s", out.Reason)
			}
			if out := call("cam__snap"); out.Kind != "" {
				t.Fatalf("a non-physical server must keep working: %+v", out)
			}
			wantCalls := calls + 1 // cam__snap
			if !tt.baseLocked {
				wantCalls++
			}
			if srv.calls != wantCalls {
				t.Fatalf("refused calls reached the upstream: %d calls, want %d", srv.calls, wantCalls)
			}
			// The lockout has its audit record, on disk before the failure returned.
			var kinds []string
			st.AuditScan(store.AuditFilter{Type: store.RecordLockout}, func(r store.Record) bool {
				kinds = append(kinds, r.Server+":"+r.Kind)
				return true
			})
			if len(kinds) != 1 || kinds[0] != "arm:mcp_execution_status_unknown" {
				t.Fatalf("lockout audit records: %v", kinds)
			}
		})
	}
}

func TestCrashAndCancelOnPhysicalServerLockOut(t *testing.T) {
	st := openStore(t)
	srv := &fakeServer{do: func(ctx context.Context, _ string, _ json.RawMessage) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	h := lockoutChain(st, config.LockoutServer, srv)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	out := h.Handle(ctx, &Call{ID: "c1", Name: "base__move", Args: json.RawMessage(`{}`), Start: time.Now()})
	if out.Kind != KindExecutionStatusUnknown {
		t.Fatalf("cancelled physical call: %+v", out)
	}
	if _, locked := st.Lockout("base"); !locked {
		t.Fatal("a physical call cancelled in flight must lock out")
	}
	// A cancelled call on a non-physical server does not.
	ctx, cancel = context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if out := h.Handle(ctx, &Call{ID: "c2", Name: "cam__snap", Args: json.RawMessage(`{}`), Start: time.Now()}); out.Kind != KindCancelled {
		t.Fatalf("cancelled non-physical call: %+v", out)
	}
	if _, locked := st.Lockout("cam"); locked {
		t.Fatal("a non-physical server must not lock out")
	}
}

func TestAdmitRefusesQueuedCallsAfterALockout(t *testing.T) {
	st := openStore(t)
	l := NewLockouts(st, config.LockoutGlobal)
	admit := l.Admit(func(s string) bool { return s != "cam" })
	if err := admit("arm"); err != nil {
		t.Fatalf("no lockout yet: %v", err)
	}
	if err := st.PutLockout(store.Lockout{Server: "arm", Tool: "arm__pick", CallID: "c9", At: time.Now(), Reason: "timed out"}); err != nil {
		t.Fatal(err)
	}
	err := admit("base")
	if err == nil || !strings.Contains(err.Error(), "c9") {
		t.Fatalf("admit after lockout: %v", err)
	}
	if err := admit("cam"); err != nil {
		t.Fatalf("non-physical server refused: %v", err)
	}
	// dispatch turns the refusal into the lockout envelope, without locking again.
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
		return nil, err
	}}
	out := Chain(Dispatch(), CheckResult(), LockOnUnknown(st, st.Audit(), quiet)).Handle(context.Background(),
		&Call{ID: "c-queued", Name: "base__move", Args: json.RawMessage(`{}`), Tool: &Tool{Public: "base__move", Server: "base", Upstream: "move",
			ServerConfig: &config.Server{Name: "base", Physical: true, CallTimeoutSec: 1}, Dispatcher: srv}})
	if out.Kind != KindExecutionStatusUnknown || out.Unknown {
		t.Fatalf("queued call refused by a lockout: %+v", out)
	}
	if _, locked := st.Lockout("base"); locked {
		t.Fatal("a call that was never sent must not add a lockout")
	}
}
