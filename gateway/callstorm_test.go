package gateway

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// TestCancelStormThenDrain: many sessions' calls, each ended at a random moment by
// notifications/cancelled, DELETE, closing its stream, or not at all, then a drain in the middle
// of more: every call gets one audit record, those after the drain are refused, and nothing is
// left registered.
func TestCancelStormThenDrain(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprint("fast=", fast), func(t *testing.T) {
			g, st, hc, url := servedFastGateway(t, fast)
			var sent atomic.Int64
			var wg sync.WaitGroup
			worker := func(w int, rounds int) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), 77))
				for i := range rounds {
					s := openRaw(t, hc, url)
					id := []int{1, -5, 123456789, 9007199254740991}[r.IntN(4)]
					tool := "hold"
					if r.IntN(3) == 0 {
						tool = "say"
					}
					body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo__%s","arguments":{"w":%d,"i":%d},"_meta":{"progressToken":"p"}}}`, id, tool, w, i)
					ctx, stop := context.WithCancel(context.Background())
					resp := s.post(t, ctx, body)
					sent.Add(1)
					how := r.IntN(4)
					if tool == "hold" && how == 3 {
						how = r.IntN(3) // a hold must be ended, unless a drain does it
					}
					time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
					switch how {
					case 0:
						n := s.post(t, context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id))
						_, _ = io.Copy(io.Discard, n.Body)
						n.Body.Close()
					case 1:
						del, _ := http.NewRequest(http.MethodDelete, url, nil)
						del.Header.Set("Mcp-Session-Id", s.id)
						del.Header.Set("Mcp-Protocol-Version", fastVersion)
						if dr, err := hc.Do(del); err == nil {
							dr.Body.Close()
						}
					case 2:
						stop()
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					stop()
				}
			}
			for w := range 8 {
				wg.Add(1)
				go worker(w, 15)
			}
			wg.Wait()
			registriesEmpty(t, g)
			// More, with a drain among them.
			for w := range 6 {
				wg.Add(1)
				go worker(100+w, 6)
			}
			time.Sleep(30 * time.Millisecond)
			rep := g.Drain(context.Background(), 20*time.Millisecond)
			wg.Wait()
			t.Logf("drain: %+v; %d calls sent", rep, sent.Load())
			registriesEmpty(t, g)
			deadline := time.Now().Add(15 * time.Second)
			for {
				if err := st.Audit().Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				seen := map[string]int{}
				_ = st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool {
					seen[string(r.Args)]++
					return true
				})
				total := 0
				for a, n := range seen {
					total += n
					if n != 1 {
						t.Errorf("call %s has %d records", a, n)
					}
				}
				if int64(total) >= sent.Load() || time.Now().After(deadline) {
					// A POST cancelled by its client before the gateway read it has no record;
					// every call has at most one.
					if int64(total) > sent.Load() {
						t.Errorf("%d records for %d calls", total, sent.Load())
					}
					t.Logf("%d records for %d calls", total, sent.Load())
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}
