package governor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// recordingNotifier remembers notified requests and can fail.
type recordingNotifier struct {
	mu   sync.Mutex
	ids  []string
	fail bool
	sent chan string
}

func (n *recordingNotifier) Notify(_ context.Context, a store.Approval) error {
	n.mu.Lock()
	n.ids = append(n.ids, a.ID)
	n.mu.Unlock()
	if n.sent != nil {
		n.sent <- a.ID
	}
	if n.fail {
		return errors.New("webhook down")
	}
	return nil
}

func approvalCall() *Call {
	return &Call{ID: "c1", Name: "arm__pick", Args: json.RawMessage(`{"object":"red_cup"}`), Principal: "planner",
		Tool: &Tool{Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: &config.Server{Name: "arm"}}}
}

func TestApprovalApprovedRunsOnce(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1), fail: true} // a failing channel drops nothing
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	done := make(chan Kind)
	go func() {
		k, _ := a.Request(context.Background(), approvalCall(), "destructive", "needs a person")
		done <- k
	}()
	id := <-n.sent
	pending, _ := a.Pending()
	if len(pending) != 1 || pending[0].ID != id || pending[0].Digest != CallDigest("arm", "pick", json.RawMessage(`{ "object" : "red_cup" }`)) {
		t.Fatalf("pending = %+v", pending)
	}
	if _, err := a.Decide(context.Background(), id, true, "alice", "looks safe"); err != nil {
		t.Fatal(err)
	}
	if k := <-done; k != "" {
		t.Fatalf("approved call got %q", k)
	}
	if _, err := a.Decide(context.Background(), id, true, "bob", "again"); !errors.Is(err, store.ErrAlreadyDecided) {
		t.Fatalf("second approve: %v", err)
	}
	if got, _, _ := st.GetApproval(id); got.State != store.ApprovalUsed || got.DecidedBy != "alice" {
		t.Fatalf("after the call: %+v", got)
	}
}

func TestApprovalDeniedAndExpired(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	done := make(chan string)
	go func() {
		k, r := a.Request(context.Background(), approvalCall(), "destructive", "")
		done <- string(k) + "|" + r
	}()
	id := <-n.sent
	if _, err := a.Decide(context.Background(), id, false, "alice", "gripper is being serviced"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if !strings.HasPrefix(got, string(KindApprovalDenied)) || !strings.Contains(got, "gripper is being serviced") || !strings.Contains(got, "alice") {
		t.Fatalf("denied: %s", got)
	}

	short := NewApprovals(st, st.Audit(), &recordingNotifier{}, 50*time.Millisecond, quiet)
	k, reason := short.Request(context.Background(), approvalCall(), "destructive", "")
	if k != KindApprovalExpired || !strings.Contains(reason, "not run") {
		t.Fatalf("expired: %s %s", k, reason)
	}
}

func TestApprovalCancelledCallCannotBeApprovedLater(t *testing.T) {
	st := openStore(t)
	n := &recordingNotifier{sent: make(chan string, 1)}
	a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Kind)
	go func() { k, _ := a.Request(ctx, approvalCall(), "r", ""); done <- k }()
	id := <-n.sent
	cancel()
	if k := <-done; k != KindCancelled {
		t.Fatalf("cancelled: %s", k)
	}
	if _, err := a.Decide(context.Background(), id, true, "alice", "late"); err == nil {
		t.Fatal("a request whose caller went away must not be approvable")
	}
}

// TestConcurrentAnswersOneWins races many answers on one request, many times.
func TestConcurrentAnswersOneWins(t *testing.T) {
	st := openStore(t)
	for round := 0; round < 20; round++ {
		n := &recordingNotifier{sent: make(chan string, 1)}
		a := NewApprovals(st, st.Audit(), n, 10*time.Second, quiet)
		done := make(chan Kind)
		go func() { k, _ := a.Request(context.Background(), approvalCall(), "r", ""); done <- k }()
		id := <-n.sent
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if _, err := a.Decide(context.Background(), id, i%2 == 0, "op", "race"); err == nil {
					wins.Add(1)
				}
			}(i)
		}
		wg.Wait()
		<-done
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d answers won", round, wins.Load())
		}
	}
}
