package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPooledLinesAreIntact: concurrent fast-path calls of every size (a few bytes to past
// the pool's 64 KiB bound), cancelled at random moments, beside stop calls: every line the server
// read is whole JSON, and each tools/call carries the arguments of one call, unmixed with
// another's (a line's buffer given back to the pool while in use would show up here).
func TestPooledLinesAreIntact(t *testing.T) {
	u, c, rec := recordedFastServer(t)
	const workers, each = 12, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range each {
				k := w*1000 + i
				size := []int{0, 1, 10, 200, 5000, 70000, 140000}[r.IntN(7)]
				pad := strings.Repeat(string(rune('a'+k%26)), size)
				args := json.RawMessage(fmt.Sprintf(`{"seed":%d,"k":%d,"pad":%q}`, k%50, k, pad))
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(6) == 0 {
					ctx = WithStop(ctx)
				}
				tool := "gen"
				if r.IntN(3) == 0 {
					tool = "block"
					time.AfterFunc(time.Duration(r.IntN(3000))*time.Microsecond, cancel)
				} else if r.IntN(4) == 0 {
					time.AfterFunc(time.Duration(r.IntN(500))*time.Microsecond, cancel)
				}
				_, _ = u.Call(ctx, tool, args, nil)
				cancel()
			}
		}()
	}
	wg.Wait()
	eventually(t, 10*time.Second, "every cancellation owed to be written", func() bool {
		c.fast.mu.Lock()
		defer c.fast.mu.Unlock()
		return len(c.fast.waiting)+len(c.fast.owed)+len(c.fast.told) == 0
	})
	if _, err := u.Call(context.Background(), "gen", json.RawMessage(`{"seed":1,"k":-1,"pad":"end"}`), nil); err != nil {
		t.Fatal(err)
	}
	(&record{path: rec}).waitFor(t, `"pad":"end"`)
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for n, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if !json.Valid([]byte(l)) {
			t.Fatalf("line %d is not JSON: %.200q", n, l)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					K   int    `json:"k"`
					Pad string `json:"pad"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if m.Method != "tools/call" || m.Params.Arguments.K < 0 {
			continue
		}
		calls++
		k, pad := m.Params.Arguments.K, m.Params.Arguments.Pad
		if strings.Trim(pad, string(rune('a'+k%26))) != "" {
			t.Errorf("line %d (id %s): call %d carries another call's arguments: %.80q", n, m.ID, k, pad)
		}
	}
	t.Logf("%d tools/call lines checked", calls)
}
