package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// writeTelemetryConfig writes a config of one server with telemetry section tel (YAML, "" for
// none) into a fresh directory and returns its path.
func writeTelemetryConfig(t *testing.T, tel string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	yaml := "gateway: {name: cell, state_dir: state, listen: \"\"}\n" +
		"servers:\n  - {name: robot, command: /bin/true, startup_timeout_sec: 1}\n"
	if tel != "" {
		yaml += "telemetry: " + tel + "\n"
	}
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// clearOTel unsets the OTEL_ variables telemetry reads, for the test.
func clearOTel(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
}

// check says where traces go, from the file or the environment, and warns of what would stop
// serve from starting its telemetry in this environment.
func TestCheckSaysWhereTracesGo(t *testing.T) {
	clearOTel(t)
	checked := func(tel string) checkReport {
		t.Helper()
		stdout, stderr, code := runCLI(t, "check", "-o", "json", "-c", writeTelemetryConfig(t, tel))
		var rep checkReport
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || !rep.OK {
			t.Fatalf("check: exit %d, %v\n%s%s", code, err, stdout, stderr)
		}
		return rep
	}
	if rep := checked(""); rep.Telemetry != "off" || len(rep.Warnings) != 0 {
		t.Errorf("without telemetry: %q, warnings %v", rep.Telemetry, rep.Warnings)
	}
	if rep := checked(`{endpoint: "http://collector:4317", protocol: grpc}`); rep.Telemetry != "traces to http://collector:4317 over OTLP grpc (telemetry.endpoint)" {
		t.Errorf("from the file: %q", rep.Telemetry)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://user:secret@collector:4318")
	rep := checked("")
	if rep.Telemetry != "traces to the endpoint in $OTEL_EXPORTER_OTLP_ENDPOINT over OTLP http/protobuf" {
		t.Errorf("from the environment: %q", rep.Telemetry)
	}
	if b, _ := json.Marshal(rep); strings.Contains(string(b), "secret") {
		t.Errorf("check printed the variable's value: %s", b)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")

	t.Setenv("OTLP_TEST_KEY", "")
	rep = checked(`{endpoint: "http://127.0.0.1:4318", headers_env: {X-Key: OTLP_TEST_KEY}}`)
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "telemetry.headers_env.X-Key: warning: names the environment variable OTLP_TEST_KEY, which is not set here") {
		t.Errorf("an unset headers_env variable: %v", rep.Warnings)
	}
	t.Setenv("OTLP_TEST_KEY", "k")
	if rep := checked(`{endpoint: "http://127.0.0.1:4318", headers_env: {X-Key: OTLP_TEST_KEY}}`); len(rep.Warnings) != 0 {
		t.Errorf("a set headers_env variable: %v", rep.Warnings)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	rep = checked("")
	if !strings.HasPrefix(rep.Telemetry, "not started: OTEL_EXPORTER_OTLP_PROTOCOL") || len(rep.Warnings) != 1 ||
		!strings.Contains(rep.Warnings[0], "mcp-gateway serve would not start in this environment") {
		t.Errorf("an unusable protocol: %q, warnings %v", rep.Telemetry, rep.Warnings)
	}

	// The table says it too.
	clearOTel(t)
	stdout, _, code := runCLI(t, "check", "-c", writeTelemetryConfig(t, ""))
	if code != 0 || !strings.Contains(stdout, "\ntelemetry: off\n") {
		t.Errorf("table: exit %d\n%s", code, stdout)
	}
}

// A telemetry set-up that cannot start stops serve before anything else starts, naming the
// setting; one that starts is flushed at exit.
func TestServeStartsTelemetry(t *testing.T) {
	clearOTel(t)
	t.Setenv("OTLP_TEST_KEY", "")
	path := writeTelemetryConfig(t, `{endpoint: "http://127.0.0.1:1", headers_env: {X-Key: OTLP_TEST_KEY}}`)
	_, stderr, code := runCLI(t, "serve", "-c", path, "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "mcp-gateway serve: cannot start telemetry: telemetry.headers_env.X-Key names the environment variable OTLP_TEST_KEY, which is not set") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "state")); !os.IsNotExist(err) {
		t.Errorf("the state directory was made before telemetry failed: %v", err)
	}

	t.Setenv("OTLP_TEST_KEY", "k")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", path, "--listen", "127.0.0.1:0"}, &out, &errOut) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errOut.String(), "serving MCP over streamable HTTP") {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(errOut.String(), "telemetry on: exporting traces over OTLP http/protobuf to http://127.0.0.1:1") {
		t.Errorf("serve did not say where traces go:\n%s", errOut.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("serve exited %d:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop:\n%s", errOut.String())
	}
}

// With telemetry off startTelemetry hands the logger back as it is; with it on, the lines of a
// traced call carry its ids, and stop flushes.
func TestStartTelemetry(t *testing.T) {
	clearOTel(t)
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	p, log, stop, err := startTelemetry(t.Context(), &config.Config{}, logger)
	if err != nil || p != nil || log != logger {
		t.Fatalf("off: %v %v %v", p, log, err)
	}
	stop()

	p, log, stop, err = startTelemetry(t.Context(), &config.Config{Telemetry: config.Telemetry{Endpoint: "http://127.0.0.1:1"}}, logger)
	if err != nil || p == nil {
		t.Fatalf("on: %v %v", p, err)
	}
	ctx, span := p.Tracer().Start(t.Context(), "call")
	log.InfoContext(ctx, "a traced line")
	span.End()
	sc := trace.SpanContextFromContext(ctx)
	if !strings.Contains(buf.String(), `"trace_id":"`+sc.TraceID().String()+`"`) {
		t.Errorf("the line of a traced call has no trace id:\n%s", buf.String())
	}
	start := time.Now()
	stop() // nothing listens: the flush fails and is logged, within its timeout
	if took := time.Since(start); took > telemetryFlushTimeout+time.Second {
		t.Errorf("stop took %v", took)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// check warns of an oauth.client_secret_env variable that is not set where it runs, naming the
// variable and never a value.
func TestCheckWarnsOfAnUnsetOAuthSecret(t *testing.T) {
	cfg := &config.Config{Path: "robot.yaml", Servers: []config.Server{
		{Name: "cloud", Line: 7, URL: "https://cloud.example.com/mcp", OAuth: &config.UpstreamOAuth{ClientSecretEnv: "CLOUD_SECRET"}},
		{Name: "vision", Line: 12, URL: "https://vision.example.com/mcp", OAuth: &config.UpstreamOAuth{ClientSecretEnv: "VISION_SECRET"}},
		{Name: "arm", Line: 15, Command: "arm"},
	}}
	env := map[string]string{"VISION_SECRET": "s3cret-value"}
	got := oauthSecretWarnings(cfg, func(k string) string { return env[k] })
	if len(got) != 1 || !strings.Contains(got[0], "robot.yaml:7:") || !strings.Contains(got[0], "CLOUD_SECRET") {
		t.Errorf("warnings = %q, want one for cloud's CLOUD_SECRET at line 7", got)
	}
	for _, w := range got {
		if strings.Contains(w, "s3cret-value") {
			t.Errorf("a warning shows a secret: %s", w)
		}
	}
}
