package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The trace backend of the tracing tests is Jaeger v2 (an OpenTelemetry Collector distribution
// with Jaeger's storage and query service), built from the nested module in e2e/jaeger, which
// pins its version and keeps its dependencies out of the gateway's go.mod. It accepts OTLP over
// HTTP and gRPC, keeps traces in memory and answers queries over its HTTP API; its logs pipeline
// prints every OTLP log record it receives (the debug exporter) on its stderr, which the test
// reads: that is a real collector receiving the gateway's audit records.

// jaegerBuild is the Jaeger binary, built once per test run.
var jaegerBuild struct {
	once sync.Once
	path string
	skip string // why the tests that need it are skipped, when the module cannot be had
	err  error
}

// jaegerBinary returns the path of the Jaeger binary, building it the first time. The binary is
// kept in the user's cache, keyed by the nested module's go.mod and go.sum and the Go version, so
// only the first run on a machine pays for the build (a few minutes, mostly downloads). The test
// is skipped, saying why, only when the module cannot be downloaded, and never in CI; any other
// failure fails it.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	jaegerBuild.once.Do(func() { jaegerBuild.path, jaegerBuild.skip, jaegerBuild.err = buildJaeger() })
	switch {
	case jaegerBuild.skip != "" && os.Getenv("CI") != "":
		// CI downloads the module first (.ci/run): there a missing module is a failure, not a
		// reason to pass without the tracing tests.
		t.Fatal(jaegerBuild.skip)
	case jaegerBuild.skip != "":
		t.Skip(jaegerBuild.skip)
	case jaegerBuild.err != nil:
		t.Fatal(jaegerBuild.err)
	}
	return jaegerBuild.path
}

func buildJaeger() (path, skip string, err error) {
	mod, err := filepath.Abs("jaeger")
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			return "", "", fmt.Errorf("the Jaeger module: %w", err)
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	key := hex.EncodeToString(h.Sum(nil))[:16]
	dir := binDir
	if cache, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(cache, "mcp-gateway-e2e")
	}
	path = filepath.Join(dir, "jaeger-"+key)
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return path, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer os.Remove(tmp)
	start := time.Now()
	fmt.Fprintln(os.Stderr, "building Jaeger for the tracing tests (the first time on this machine takes a few minutes)")
	cmd := exec.Command("go", "build", "-o", tmp, "github.com/jaegertracing/jaeger/cmd/jaeger")
	cmd.Dir = mod
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if unreachable(msg) {
			return "", fmt.Sprintf("the Jaeger module is neither in the module cache nor downloadable, so the tracing tests cannot run (cd e2e/jaeger && go mod download):\n%s", tail(msg, 5)), nil
		}
		return "", "", fmt.Errorf("building Jaeger (e2e/jaeger): %v\n%s", err, msg)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", "", err
	}
	fmt.Fprintf(os.Stderr, "built Jaeger in %s\n", time.Since(start).Round(time.Second))
	return path, "", nil
}

// unreachable reports whether go build's output says a module could not be downloaded.
func unreachable(out string) bool {
	for _, s := range []string{"GOPROXY=off", "dial tcp", "no such host", "i/o timeout",
		"connection refused", "network is unreachable", "proxyconnect", "TLS handshake timeout"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// jaegerProc is a running Jaeger.
type jaegerProc struct {
	cmd      *exec.Cmd
	query    string      // base URL of the query service's HTTP API (and UI)
	otlpHTTP string      // base URL of the OTLP/HTTP receiver
	otlpGRPC string      // base URL of the OTLP/gRPC receiver
	out      *syncBuffer // stdout and stderr: its log and the debug exporter's output
	done     chan struct{}
	err      error
}

// jaegerConfig is Jaeger's config: OTLP receivers, memory storage, the query service, and a logs
// pipeline printing every log record in full.
const jaegerConfig = `
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
    logs:
      receivers: [otlp]
      exporters: [debug]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memory_store:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memory_store
    http:
      endpoint: "{{query}}"
    grpc:
      endpoint: "{{query_grpc}}"
{{ui}}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "{{otlp_grpc}}"
      http:
        endpoint: "{{otlp_http}}"
exporters:
  jaeger_storage_exporter:
    trace_storage: memory_store
  debug:
    verbosity: detailed
`

// startJaeger starts Jaeger on free loopback ports and waits until it is ready; it is stopped
// when the test ends. uiAssets, when not "", is a folder of Jaeger UI's built assets for its
// query service to serve (the Go build serves only a placeholder page). A port taken by another
// process between its choice and Jaeger's start makes it try again, once, on new ones.
func startJaeger(t *testing.T, uiAssets string) *jaegerProc {
	t.Helper()
	bin := jaegerBinary(t)
	for attempt := 1; ; attempt++ {
		j, err := launchJaeger(t, bin, uiAssets)
		if err == nil {
			return j
		}
		if attempt == 2 || !strings.Contains(j.out.String(), "address already in use") {
			t.Fatalf("%v\n%s", err, tail(j.out.String(), 40))
		}
		t.Logf("Jaeger could not bind its ports, trying others: %v", err)
	}
}

// launchJaeger starts one Jaeger process and waits until it is ready or has exited.
func launchJaeger(t *testing.T, bin, uiAssets string) (*jaegerProc, error) {
	t.Helper()
	addrs := freeAddrs(t, 4)
	query, queryGRPC, otlpGRPC, otlpHTTP := addrs[0], addrs[1], addrs[2], addrs[3]
	ui := ""
	if uiAssets != "" {
		ui = "    ui:\n      assets_path: " + mustJSON(uiAssets)
	}
	cfg := strings.NewReplacer("{{query}}", query, "{{query_grpc}}", queryGRPC, "{{otlp_grpc}}", otlpGRPC,
		"{{otlp_http}}", otlpHTTP, "{{ui}}", ui).Replace(jaegerConfig)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &jaegerProc{
		cmd:      exec.Command(bin, "--config", path),
		query:    "http://" + query,
		otlpHTTP: "http://" + otlpHTTP,
		otlpGRPC: "http://" + otlpGRPC,
		out:      &syncBuffer{},
		done:     make(chan struct{}),
	}
	j.cmd.Stdout, j.cmd.Stderr = j.out, j.out
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.err = j.cmd.Wait(); close(j.done) }()
	t.Cleanup(func() {
		j.stop()
		if t.Failed() {
			t.Logf("Jaeger's output (last lines):\n%s", tail(j.out.String(), 60))
		}
	})
	ready := pollFor(60*time.Second, func() bool {
		select {
		case <-j.done:
			return true
		default:
		}
		if !strings.Contains(j.out.String(), "Everything is ready") {
			return false
		}
		code, err := httpGet(j.query + "/api/services")
		return err == nil && code == http.StatusOK
	})
	select {
	case <-j.done:
		return j, fmt.Errorf("jaeger exited before it was ready: %v", j.err)
	default:
	}
	if !ready {
		return j, errors.New("jaeger not ready within 60s")
	}
	return j, nil
}

// freeAddrs returns n distinct free loopback addresses: all are held open until every one is
// chosen, so that none is handed out twice.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

func (j *jaegerProc) stop() {
	select {
	case <-j.done:
		return
	default:
	}
	_ = j.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.done:
	case <-time.After(10 * time.Second):
		_ = j.cmd.Process.Kill()
		<-j.done
	}
}
