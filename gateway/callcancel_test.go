package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// readToProgress reads resp's stream up to the end of its first event (the hold tool's progress).
func readToProgress(t *testing.T, resp *http.Response) *bufio.Reader {
	t.Helper()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no progress before the end of the stream: %v", err)
		}
		if line == "\n" {
			return br
		}
	}
}

// registriesEmpty fails unless nothing of any call is left registered in g.
func registriesEmpty(t *testing.T, g *Gateway) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var problems []string
		g.callers.mu.Lock()
		if n := len(g.callers.sessions); n != 0 {
			problems = append(problems, fmt.Sprintf("callerWatch holds calls of %d sessions", n))
		}
		if n := len(g.callers.posts); n != 0 {
			problems = append(problems, fmt.Sprintf("callerWatch holds %d posts", n))
		}
		g.callers.mu.Unlock()
		g.shutdown.mu.Lock()
		if g.shutdown.calls.head != nil || g.shutdown.running != 0 {
			problems = append(problems, fmt.Sprintf("shutdown holds calls (running %d)", g.shutdown.running))
		}
		g.shutdown.mu.Unlock()
		{
			g.fast.mu.RLock()
			for id, s := range g.fast.open {
				s.mu.Lock()
				if len(s.calls) != 0 {
					problems = append(problems, fmt.Sprintf("fast session %s holds %d calls", id, len(s.calls)))
				}
				s.mu.Unlock()
			}
			g.fast.mu.RUnlock()
			g.fast.handover.mu.Lock()
			if n := len(g.fast.handover.results); n != 0 {
				problems = append(problems, fmt.Sprintf("%d handover results", n))
			}
			g.fast.handover.mu.Unlock()
		}
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(strings.Join(problems, "; "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servedFastGateway is fastGateway behind an HTTP server: the gateway, its state file, a client
// that keeps connections for many sessions, and the URL of /mcp.
func servedFastGateway(t *testing.T, fast bool) (*Gateway, *store.Store, *http.Client, string) {
	t.Helper()
	g, st, _ := fastGateway(t, fast)
	srv := httptest.NewServer(g.Handler(nil))
	t.Cleanup(srv.Close)
	return g, st, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, srv.URL + "/mcp"
}

// holdCall is a tools/call of the echo server's hold tool, with arguments {"who":arg} and a
// progress token, so that its stream shows when the tool has started.
func holdCall(id int, arg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo__hold","arguments":{"who":%q},"_meta":{"progressToken":"p%d"}}}`, id, arg, id)
}

// TestCancelRoutesRecordTheirCause: each way a call in flight ends early (the client's
// notifications/cancelled, DELETE of the session, the POST's stream closing, the gateway's
// drain) ends the call with its own cause, on the fast path and on the SDK's, and leaves
// nothing registered.
func TestCancelRoutesRecordTheirCause(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprint("fast=", fast), func(t *testing.T) {
			g, st, hc, url := servedFastGateway(t, fast)

			// notifications/cancelled
			s := openRaw(t, hc, url)
			resp := s.post(t, context.Background(), holdCall(7, "cancelled"))
			br := readToProgress(t, resp)
			n := s.post(t, context.Background(), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"no"}}`)
			_, _ = io.Copy(io.Discard, n.Body)
			n.Body.Close()
			_, _ = io.ReadAll(br)
			resp.Body.Close()

			// DELETE
			s2 := openRaw(t, hc, url)
			resp = s2.post(t, context.Background(), holdCall(8, "deleted"))
			br = readToProgress(t, resp)
			del, _ := http.NewRequest(http.MethodDelete, url, nil)
			del.Header.Set("Mcp-Session-Id", s2.id)
			del.Header.Set("Mcp-Protocol-Version", fastVersion)
			dr, err := hc.Do(del)
			if err != nil {
				t.Fatal(err)
			}
			dr.Body.Close()
			_, _ = io.ReadAll(br)
			resp.Body.Close()

			// stream closed
			s3 := openRaw(t, hc, url)
			ctx, stop := context.WithCancel(context.Background())
			resp = s3.post(t, ctx, holdCall(9, "closed"))
			readToProgress(t, resp)
			stop()
			resp.Body.Close()

			registriesEmpty(t, g)

			// drain
			s4 := openRaw(t, hc, url)
			resp = s4.post(t, context.Background(), holdCall(10, "drained"))
			br = readToProgress(t, resp)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.Drain(context.Background(), 50*time.Millisecond)
			}()
			body, _ := io.ReadAll(br)
			resp.Body.Close()
			wg.Wait()
			t.Logf("drained answer: %s", body)
			// refused after the drain
			resp = s4.post(t, context.Background(), holdCall(11, "refused"))
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Logf("after drain: %s", body)
			registriesEmpty(t, g)

			want := map[string]string{
				`{"who":"cancelled"}`: "by the caller",
				`{"who":"deleted"}`:   errSessionDeleted.Error(),
				`{"who":"closed"}`:    errStreamClosed.Error(),
				`{"who":"drained"}`:   ErrShuttingDown.Error(),
				`{"who":"refused"}`:   "shutting down",
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				got := map[string]string{}
				if err := st.Audit().Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				_ = st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool {
					got[string(r.Args)] = r.Kind + ": " + r.Reason
					return true
				})
				missing := 0
				for k := range want {
					if _, ok := got[k]; !ok {
						missing++
					}
				}
				if missing == 0 || time.Now().After(deadline) {
					for k, v := range want {
						t.Logf("%s -> %s", k, got[k])
						if !strings.Contains(got[k], v) {
							t.Errorf("call %s: audit %q, want it to say %q", k, got[k], v)
						}
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
