package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-gateway/mcp-gateway/governor"
)

// rateLimitConfig serves the echo server, which records what it reads, under a limit of two
// calls per hour per principal; limits is what follows `limits:`.
func rateLimitConfig(record, limits string) string {
	return `servers:
  - name: echo
    command: "{{exe}}"
    env: {` + echoServerEnv + `: "1", ` + echoRecordEnv + `: "` + record + `"}
    startup_timeout_sec: 10
    contract: passthrough
policies:
  default: allow
limits:
` + limits
}

const twoPerHour = `  - id: echo-calls
    per: principal
    rate: 2/h
`

// TestRateLimitedCallNeverReachesTheUpstream: the third call of a principal within the hour is
// refused with rate_limited, the limit, the window and retry_after_sec, and the upstream never
// reads it; another principal is unaffected; a reload that keeps the limit keeps its counts, one
// that changes its rate starts afresh.
func TestRateLimitedCallNeverReachesTheUpstream(t *testing.T) {
	record := filepath.Join(t.TempDir(), "record")
	f := startFixture(t, rateLimitConfig(record, twoPerHour))
	call := func(principal string, n int) *governor.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return f.g.Call(ctx, &governor.Call{Name: "echo__say", Args: json.RawMessage(fmt.Sprintf(`{"n":"call-%d"}`, n)), Principal: principal})
	}
	for n := 1; n <= 2; n++ {
		if o := call("planner", n); o.Kind != "" {
			t.Fatalf("call %d: %s %s", n, o.Kind, o.Reason)
		}
	}
	o := call("planner", 3)
	if o.Kind != governor.KindRateLimited {
		t.Fatalf("third call: kind %q (%s), want rate_limited", o.Kind, o.Reason)
	}
	var env map[string]any
	if err := json.Unmarshal([]byte(o.Result.Content[0].(*mcp.TextContent).Text), &env); err != nil {
		t.Fatal(err)
	}
	if env["kind"] != "rate_limited" || env["limit"] != "echo-calls" || env["window"] != "1h" || env["retry_after_sec"] != float64(1800) ||
		!strings.Contains(env["reason"].(string), "Wait 1800 s before calling again") {
		t.Errorf("envelope %v", env)
	}
	if o := call("viewer", 4); o.Kind != "" {
		t.Errorf("another principal: %s %s", o.Kind, o.Reason)
	}
	want := "# HELP mcp_gateway_rate_limited_total Calls refused by a limit (mode enforce), or that a log_only limit would have refused.\n" +
		"# TYPE mcp_gateway_rate_limited_total counter\n" +
		`mcp_gateway_rate_limited_total{limit="echo-calls",mode="enforce"} 1` + "\n"
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "mcp_gateway_rate_limited_total"); err != nil {
		t.Error(err)
	}
	// A reload that changes only the match keeps the counts.
	if _, err := f.reload(t, rateLimitConfig(record, twoPerHour+"    match: {servers: [echo]}\n")); err != nil {
		t.Fatal(err)
	}
	if o := call("planner", 5); o.Kind != governor.KindRateLimited {
		t.Errorf("after a reload keeping the limit: %q, want rate_limited", o.Kind)
	}
	// One that changes the rate starts afresh.
	if _, err := f.reload(t, rateLimitConfig(record, strings.Replace(twoPerHour, "2/h", "3/h", 1))); err != nil {
		t.Fatal(err)
	}
	if o := call("planner", 6); o.Kind != "" {
		t.Errorf("after a reload changing the rate: %s %s", o.Kind, o.Reason)
	}
	sent, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]bool{1: true, 2: true, 3: false, 4: true, 5: false, 6: true} {
		if got := strings.Contains(string(sent), fmt.Sprintf(`"call-%d"`, n)); got != want {
			t.Errorf("the upstream read call %d: %v, want %v", n, got, want)
		}
	}
}
