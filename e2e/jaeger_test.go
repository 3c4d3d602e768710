package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
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
// is skipped, saying why, only when the module cannot be downloaded; any other failure fails it.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	jaegerBuild.once.Do(func() { jaegerBuild.path, jaegerBuild.skip, jaegerBuild.err = buildJaeger() })
	switch {
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
// query service to serve (the Go build serves only a placeholder page).
func startJaeger(t *testing.T, uiAssets string) *jaegerProc {
	t.Helper()
	bin := jaegerBinary(t)
	query, queryGRPC, otlpGRPC, otlpHTTP := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
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
		t.Fatalf("Jaeger exited before it was ready: %v\n%s", j.err, tail(j.out.String(), 40))
	default:
	}
	if !ready {
		t.Fatalf("Jaeger not ready within 60s\n%s", tail(j.out.String(), 40))
	}
	return j
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

// jTrace is a trace as Jaeger's HTTP API returns it.
type jTrace struct {
	TraceID   string `json:"traceID"`
	Spans     []*jSpan
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// jSpan is one span of a jTrace; Service is filled in from the trace's processes.
type jSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64  `json:"startTime"` // µs since the epoch
	Duration  int64  `json:"duration"`  // µs
	Tags      []jTag `json:"tags"`
	Logs      []struct {
		Fields []jTag `json:"fields"`
	} `json:"logs"`
	ProcessID string `json:"processID"`
	Service   string `json:"-"`
}

type jTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// parent is the span id the span is a child of, "" for a root.
func (s *jSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// tag is the value of the span's tag key as text, and whether it has it.
func (s *jSpan) tag(key string) (string, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value), true
		}
	}
	return "", false
}

// is reports whether the span's tag key has the value want.
func (s *jSpan) is(key, want string) bool {
	v, ok := s.tag(key)
	return ok && v == want
}

// failed reports whether the span's status is Error (Jaeger shows OpenTelemetry's status as the
// error and otel.status_code tags).
func (s *jSpan) failed() bool {
	e, _ := s.tag("error")
	c, _ := s.tag("otel.status_code")
	return e == "true" || c == "ERROR"
}

// event reports whether the span has an event (a Jaeger log) named name.
func (s *jSpan) event(name string) bool {
	for _, l := range s.Logs {
		for _, f := range l.Fields {
			if f.Key == "event" && f.Value == name {
				return true
			}
		}
	}
	return false
}

func (s *jSpan) String() string {
	return fmt.Sprintf("%s %q (span %s, parent %s, tags %v)", s.Service, s.OperationName, s.SpanID, s.parent(), s.Tags)
}

// find is the first span of service named name, or nil.
func (tr *jTrace) find(service, name string) *jSpan {
	for _, s := range tr.Spans {
		if s.Service == service && s.OperationName == name {
			return s
		}
	}
	return nil
}

// byID is the span with id, or nil.
func (tr *jTrace) byID(id string) *jSpan {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s
		}
	}
	return nil
}

// children are the spans whose parent is id.
func (tr *jTrace) children(id string) []*jSpan {
	var out []*jSpan
	for _, s := range tr.Spans {
		if s.parent() == id {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].StartTime < out[b].StartTime })
	return out
}

// child is the child of id named name, or nil.
func (tr *jTrace) child(id, name string) *jSpan {
	for _, s := range tr.children(id) {
		if s.OperationName == name {
			return s
		}
	}
	return nil
}

// tree is the trace as indented lines, for failure messages.
func (tr *jTrace) tree() string {
	var b strings.Builder
	var walk func(id string, depth int)
	seen := map[string]bool{}
	walk = func(id string, depth int) {
		for _, s := range tr.children(id) {
			if seen[s.SpanID] {
				continue
			}
			seen[s.SpanID] = true
			fmt.Fprintf(&b, "%s%s [%s] %s\n", strings.Repeat("  ", depth), s.OperationName, s.Service, s.SpanID)
			walk(s.SpanID, depth+1)
		}
	}
	for _, s := range tr.Spans {
		if p := s.parent(); p == "" || tr.byID(p) == nil {
			if !seen[s.SpanID] {
				seen[s.SpanID] = true
				fmt.Fprintf(&b, "%s [%s] %s (parent %q)\n", s.OperationName, s.Service, s.SpanID, p)
				walk(s.SpanID, 1)
			}
		}
	}
	return b.String()
}

// apiGet decodes the "data" of a Jaeger API answer into v; it returns the HTTP status.
func (j *jaegerProc) apiGet(t *testing.T, path string, v any) int {
	t.Helper()
	resp, err := http.Get(j.query + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return resp.StatusCode
}

func (tr *jTrace) fill() {
	for _, s := range tr.Spans {
		s.Service = tr.Processes[s.ProcessID].ServiceName
	}
}

// trace is the trace with id as Jaeger has it now; ok is false when it has none of its spans.
func (j *jaegerProc) trace(t *testing.T, id string) (tr *jTrace, ok bool) {
	t.Helper()
	var traces []*jTrace
	if code := j.apiGet(t, "/api/traces/"+id, &traces); code == http.StatusNotFound {
		return nil, false
	} else if code != http.StatusOK {
		t.Fatalf("GET /api/traces/%s: %d", id, code)
	}
	if len(traces) != 1 {
		t.Fatalf("GET /api/traces/%s: %d traces", id, len(traces))
	}
	traces[0].fill()
	return traces[0], true
}

// waitTrace waits until Jaeger's trace id satisfies cond (spans arrive in batches, from several
// processes) and returns it; it fails the test with the trace's tree otherwise.
func (j *jaegerProc) waitTrace(t *testing.T, id, what string, cond func(*jTrace) bool) *jTrace {
	t.Helper()
	var last *jTrace
	if pollFor(20*time.Second, func() bool {
		tr, ok := j.trace(t, id)
		if ok {
			last = tr
		}
		return ok && cond(tr)
	}) {
		return last
	}
	if last == nil {
		t.Fatalf("Jaeger has no trace %s (waited 20s for %s)", id, what)
	}
	t.Fatalf("trace %s never had %s (waited 20s); it has:\n%s", id, what, last.tree())
	return nil
}

// services lists the services Jaeger has spans of.
func (j *jaegerProc) services(t *testing.T) []string {
	t.Helper()
	var names []string
	if code := j.apiGet(t, "/api/services", &names); code != http.StatusOK {
		t.Fatalf("GET /api/services: %d", code)
	}
	return names
}

// traces are the traces of service in the last hour (at most 100), newest first.
func (j *jaegerProc) traces(t *testing.T, service string) []*jTrace {
	t.Helper()
	var traces []*jTrace
	q := url.Values{"service": {service}, "lookback": {"1h"}, "limit": {"100"}}
	if code := j.apiGet(t, "/api/traces?"+q.Encode(), &traces); code != http.StatusOK {
		t.Fatalf("GET /api/traces?%s: %d", q.Encode(), code)
	}
	for _, tr := range traces {
		tr.fill()
	}
	return traces
}
