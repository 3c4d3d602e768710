package governor

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
)

// args1KB is a realistic 1 KB argument object: a motion with waypoints.
func args1KB() json.RawMessage {
	var wp []string
	for i := 0; len(strings.Join(wp, ",")) < 920; i++ {
		wp = append(wp, fmt.Sprintf(`{"x":%d.25,"y":%d.5,"z":0.75}`, i, i+1))
	}
	return json.RawMessage(`{"target":"table","speed":1.2,"mode":"careful","label":"stow-red-cup","waypoints":[` + strings.Join(wp, ",") + `]}`)
}

var moveSchema = map[string]any{
	"type":                 "object",
	"additionalProperties": false,
	"required":             []any{"target", "speed"},
	"properties": map[string]any{
		"target": map[string]any{"type": "string", "minLength": 1},
		"speed":  map[string]any{"type": "number", "minimum": 0, "maximum": 1.5},
		"mode":   map[string]any{"enum": []any{"careful", "fast"}},
		"label":  map[string]any{"type": "string", "pattern": "^[a-z-]+$"},
		"waypoints": map[string]any{"type": "array", "maxItems": 100, "items": map[string]any{
			"type": "object", "required": []any{"x", "y"}, "additionalProperties": false,
			"properties": map[string]any{"x": map[string]any{"type": "number"}, "y": map[string]any{"type": "number"}, "z": map[string]any{"type": "number"}},
		}},
	},
}

// BenchmarkChain is the whole in-process chain for one call with 1 KB of arguments, without an
// upstream: metrics, audit (real state file, group commit), log, resolve, lockout check,
// validation, result check and lockout handling, with a dispatcher that answers at once.
// BenchmarkChainPhysical is the same on a physical server, whose calls are also journaled in
// the state file (two fsyncs) so that a gateway killed mid-call still locks out.
//
//	go test ./governor -run '^$' -bench Chain -benchtime 20000x
func BenchmarkChain(b *testing.B) { benchmarkChain(b, false) }

func BenchmarkChainPhysical(b *testing.B) { benchmarkChain(b, true) }

func benchmarkChain(b *testing.B, physical bool) {
	st := openStore(b)
	schema, err := argschema.Compile("arm__move", moveSchema, argschema.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	result := &mcp.CallToolResult{StructuredContent: map[string]any{"success": true, "observation": "moved to the table", "run_id": "run-7"}}
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return result, nil }}
	tools := catalog{"arm__move": {Public: "arm__move", Server: "arm", Upstream: "move", Evaluated: true, Schema: schema,
		ServerConfig: &config.Server{Name: "arm", Physical: physical, CallTimeoutSec: 300, TimeoutArgumentMarginSec: 60}, Dispatcher: srv}}
	h := Chain(Dispatch(),
		NewMetrics(prometheus.NewRegistry()).Observe(),
		Audit(st, NewRedactor(config.DefaultRedactKeys), quiet),
		Log(quiet),
		Resolve(tools),
		CheckLockout(NewLockouts(st, config.LockoutGlobal)),
		Validate(NewRedactor(config.DefaultRedactKeys)),
		CheckResult(),
		LockOnUnknown(st, st.Audit(), quiet),
	)
	args := args1KB()
	if len(args) < 1000 || len(args) > 1100 {
		b.Fatalf("arguments are %d bytes", len(args))
	}
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		out := h.Handle(ctx, &Call{ID: "c", Name: "arm__move", Args: args, Principal: "bench", Start: start})
		lat[i] = time.Since(start)
		if out.Kind != "" {
			b.Fatalf("outcome: %+v", out)
		}
	}
	b.StopTimer()
	if err := st.Audit().Flush(ctx); err != nil {
		b.Fatal(err)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1000, "p99-µs")
}
