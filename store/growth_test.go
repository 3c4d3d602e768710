package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// BenchmarkAuditGrowth measures what one governed call adds to the state file: the stored
// bytes of its record (key and value) and the growth of state.db, per call, without retention.
// Run it with a fixed count so the file is the same size every time (docs/benchmarks.md); the
// 1 MB cases spend most of their time decoding and hashing the megabyte, so use fewer calls:
//
//	go test ./store -run '^$' -bench AuditGrowth/typical -benchtime 20000x -count 5
//	go test ./store -run '^$' -bench 'AuditGrowth/(reason|argument)' -benchtime 2000x -count 3
func BenchmarkAuditGrowth(b *testing.B) {
	redact := governor.NewAuditRedactor(config.Audit{RedactKeys: config.DefaultRedactKeys, MaxValueBytes: config.DefaultAuditMaxValueBytes})
	typical := json.RawMessage(`{"target":"red_cup","speed":0.4,"pose":{"x":0.31,"y":-0.12,"z":0.05}}`)
	longReason := "upstream error: " + strings.Repeat("motor controller returned E_STALL on joint 3; ", 20000) // ~1 MB
	bigArg, _ := json.Marshal(map[string]string{"program": strings.Repeat("G1 X10 Y10 F300\n", 1<<16)})        // ~1 MB
	for _, tc := range []struct {
		name   string
		args   json.RawMessage
		reason string
	}{
		{"typical", typical, ""},
		{"reason_1MB", typical, longReason},
		{"argument_1MB", bigArg, ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			s, err := store.Open(dir, store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				s.Audit().Append(store.Record{
					Type: store.RecordCall, Principal: "planner", Session: "3f6c2a8e-5b1d-4c7a-9e0f-1a2b3c4d5e6f",
					Server: "arm", Tool: "arm__pick_object", CallID: fmt.Sprintf("%d", i),
					Args: redact.Redact(tc.args), ArgsDigest: strings.Repeat("9f", 32),
					Decision: "allow:default", Kind: "", Outcome: "ok", Reason: tc.reason,
					RunID: fmt.Sprintf("run-%06d", i), DurationMS: 12.345,
				})
			}
			if err := s.Audit().Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			var stored int64
			if err := s.AuditExport(store.AuditFilter{}, func(raw []byte) error { stored += int64(len(raw)) + 8; return nil }); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			info, err := os.Stat(filepath.Join(dir, store.FileName))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(stored)/float64(b.N), "stored-B/call")
			b.ReportMetric(float64(info.Size())/float64(b.N), "file-B/call")
		})
	}
}
