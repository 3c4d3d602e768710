package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// sealedByMarshal is the stored form of r on the chain after tail as the store first wrote
// it: r with its bounds, its arguments compacted by encoding/json (left out when they are not
// valid JSON), encoded by json.Marshal and sealed.
func sealedByMarshal(t *testing.T, r Record, tail chainTail) []byte {
	t.Helper()
	boundRecord(&r)
	if len(r.Args) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.Args); err == nil {
			r.Args = buf.Bytes()
		} else {
			r.Args = nil
		}
	}
	r.Seq, r.Prev, r.Hash = tail.seq+1, tail.hash, ""
	canon, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return sealJSON(canon, &r)
}

// TestSealWritesWhatMarshalWrites: the record the caller encodes and the leader seals is, byte
// for byte, the record json.Marshal writes, with the texts that could confuse the splicing of
// the arguments (a field or a Detail key spelling `"args":0`, HTML, U+2028) in every field.
func TestSealWritesWhatMarshalWrites(t *testing.T) {
	a := &auditLog{s: &Store{log: slog.New(slog.DiscardHandler)}}
	awkward := []string{"", `"args":0`, `,"args":0,`, `<b>&amp;</b>`, "\u2028", `\"`, "é日本", "\xff", strings.Repeat("x", MaxTextBytes+5)}
	argss := []string{"", `{}`, `0`, `{"a": 1}`, `{"args":0}`, `{"h":"<&>\u2028"}`, `[1, 2]`, `{"unterminated": `, `"s"`}
	r := rand.New(rand.NewPCG(21, 1))
	pick := func() string { return awkward[r.IntN(len(awkward))] }
	for i := range 3000 {
		rec := Record{
			Time: time.Date(2026, 12, 1, 19, 0, r.IntN(60), r.IntN(1e9), time.UTC), Type: RecordCall,
			Principal: pick(), Session: pick(), Server: pick(), Tool: pick(), CallID: pick(), TraceID: pick(), SpanID: pick(),
			Args: json.RawMessage(argss[r.IntN(len(argss))]), ArgsDigest: pick(), Decision: pick(), Kind: pick(),
			Outcome: pick(), Reason: pick(), RunID: pick(), DurationMS: float64(r.IntN(3)) * 1.25, Action: pick(),
		}
		if r.IntN(2) == 0 {
			rec.Detail = map[string]any{"args": 0, pick(): pick(), "n": []any{1, pick()}}
		}
		tail := chainTail{}
		if i%5 != 0 {
			tail = chainTail{seq: uint64(r.IntN(1 << 40)), hash: fmt.Sprintf("%064x", r.Uint64())}
		}
		want := sealedByMarshal(t, rec, tail)
		enc, err := a.encode(&rec)
		if err != nil {
			t.Fatal(err)
		}
		it := auditItem{rec: rec, enc: enc}
		got := seal(&it, tail)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d:\n sealed  %s\n marshal %s", i, got, want)
		}
		claimed, actual, ok := storedHash(got)
		if !ok || claimed != actual || claimed != it.rec.Hash || it.rec.Seq != tail.seq+1 || it.rec.Prev != tail.hash {
			t.Fatalf("record %d: hash %q, stored %q (%v), seq %d, prev %q", i, it.rec.Hash, claimed, ok, it.rec.Seq, it.rec.Prev)
		}
	}
}

// TestMixedAppendsKeepEachCallersOrder: callers that wait (and so commit the queue themselves
// when nobody does) and callers that do not, at once: every record is on the chain once, the
// chain verifies, and each goroutine's records are in the order it queued them, whichever
// committer wrote them.
func TestMixedAppendsKeepEachCallersOrder(t *testing.T) {
	for _, wait := range []time.Duration{-1, 2 * time.Millisecond} {
		t.Run(fmt.Sprint(wait), func(t *testing.T) {
			s := openStore(t, t.TempDir(), Options{AuditBatch: wait, walSize: 256 << 10})
			const goroutines, each = 8, 150
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						r := callRecord("arm", "move", i)
						r.Principal = fmt.Sprint("g", g)
						if (g+i)%3 == 0 {
							if !s.Audit().Append(r) {
								t.Error("Append refused")
							}
							continue
						}
						if _, err := s.Audit().AppendSync(context.Background(), r); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := s.Audit().Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			next := map[string]int{}
			n := 0
			if err := s.AuditScan(AuditFilter{}, func(r Record) bool {
				n++
				if want := fmt.Sprintf("call-%d", next[r.Principal]); r.CallID != want {
					t.Errorf("record %d of %s is %s, want %s", r.Seq, r.Principal, r.CallID, want)
					return false
				}
				next[r.Principal]++
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if got, bad := s.AuditVerify(); bad != nil || got != goroutines*each || n != goroutines*each {
				t.Errorf("AuditVerify = %d, %v; scanned %d; want %d", got, bad, n, goroutines*each)
			}
		})
	}
}
