package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkHop measures what the gateway adds to a tool call: the same call made by a client
// directly to an upstream and through the gateway, over stdio (the simulated robot's get_scene,
// envelope contract; at c=1 also with the robot marked physical, so each call is journaled) and
// over streamable HTTP (the Go SDK conformance server's test_simple_text, passthrough), at
// concurrency 1 and 32 on one session. It reports p50 and p99 latency per call.
//
// HOP_BASELINE names another mcp-gateway binary (an earlier commit's build) measured in the same
// run beside this one, as "baseline", for before/after comparisons.
//
//	go test ./e2e -run '^$' -bench Hop -benchtime 2000x
func BenchmarkHop(b *testing.B) {
	gateways := [][2]string{{"gateway", gatewayBin}}
	if base := os.Getenv("HOP_BASELINE"); base != "" {
		gateways = append(gateways, [2]string{"baseline", base})
	}
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("stdio/direct/c=%d", conc), func(b *testing.B) {
			cs := benchStdioSession(b, exec.Command(simRobotBin, "-name", "bench-direct"))
			runCalls(b, cs, "get_scene", conc)
		})
		for _, gw := range gateways {
			for _, physical := range []bool{false, true} {
				if physical && conc > 1 {
					continue // one call at a time on a physical server
				}
				name := gw[0]
				if physical {
					name += "-physical"
				}
				b.Run(fmt.Sprintf("stdio/%s/c=%d", name, conc), func(b *testing.B) {
					cfg := benchConfig(b, fmt.Sprintf(`
gateway: {listen: ""}
servers:
  - name: robot
    command: %q
    args: ["-name", "bench-gateway"]
    physical: %t
`, simRobotBin, physical))
					cs := benchStdioSession(b, exec.Command(gw[1], "serve", "-c", cfg, "--stdio"))
					runCalls(b, cs, "robot__get_scene", conc)
				})
			}
		}
		b.Run(fmt.Sprintf("http/direct/c=%d", conc), func(b *testing.B) {
			addr := startEverythingHTTP(b)
			cs := benchHTTPSession(b, addr)
			runCalls(b, cs, "test_simple_text", conc)
		})
		for _, gw := range gateways {
			b.Run(fmt.Sprintf("http/%s/c=%d", gw[0], conc), func(b *testing.B) {
				up := startEverythingHTTP(b)
				addr := freeAddr(b)
				cfg := benchConfig(b, fmt.Sprintf(`
gateway: {listen: %q}
servers:
  - name: conf
    url: "http://%s/mcp"
    contract: passthrough
`, addr, up))
				startBenchGateway(b, gw[1], cfg, addr)
				cs := benchHTTPSession(b, addr)
				runCalls(b, cs, "conf__test_simple_text", conc)
			})
		}
	}
}

// runCalls makes b.N calls spread over conc workers and reports latency percentiles.
func runCalls(b *testing.B, cs *mcp.ClientSession, tool string, conc int) {
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}
	// Warm up connections and caches.
	for range 20 {
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			b.Fatalf("warm-up call %s: %v %v", tool, err, res)
		}
	}
	lat := make([]time.Duration, b.N)
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	b.ResetTimer()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= b.N {
					return
				}
				start := time.Now()
				res, err := cs.CallTool(ctx, params)
				lat[i] = time.Since(start)
				if err != nil || res.IsError {
					errs <- fmt.Errorf("call %s: %v %v", tool, err, res)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func benchConfig(b *testing.B, yaml string) string {
	b.Helper()
	path := b.TempDir() + "/gateway.yaml"
	if err := writeFile(path, yaml); err != nil {
		b.Fatal(err)
	}
	return path
}

func benchStdioSession(b *testing.B, cmd *exec.Cmd) *mcp.ClientSession {
	b.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	waitBenchTool(b, cs)
	return cs
}

func benchHTTPSession(b *testing.B, addr string) *mcp.ClientSession {
	b.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// waitBenchTool waits until the session lists at least one tool (the gateway over stdio
// answers before its upstreams are discovered only if they failed).
func waitBenchTool(b *testing.B, cs *mcp.ClientSession) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		res, err := cs.ListTools(context.Background(), nil)
		if err == nil && len(res.Tools) > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("no tools listed")
}

// startEverythingHTTP runs the Go SDK conformance server over streamable HTTP.
func startEverythingHTTP(b *testing.B) string {
	b.Helper()
	addr := freeAddr(b)
	cmd := exec.Command(everythingGoBin, "-http", addr)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(b, "http://"+addr+"/mcp")
	return addr
}

func startBenchGateway(b *testing.B, bin, cfg, addr string) {
	b.Helper()
	cmd := exec.Command(bin, "serve", "-c", cfg)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(sigterm); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if code, err := httpGet("http://" + addr + "/readyz"); err == nil && code == 200 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("gateway not ready")
}

// waitHTTP waits until something answers at url.
func waitHTTP(b *testing.B, url string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := httpGet(url); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("nothing answers at %s", url)
}
