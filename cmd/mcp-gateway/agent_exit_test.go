package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// robotUpstream is an MCP server over streamable HTTP with one tool, navigate_to.
func robotUpstream(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "robot", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "navigate_to", Description: "Drive to a named place."}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Target string `json:"target"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "at " + in.Target}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// chatProvider is a Chat Completions endpoint answering with bodies in order (the last
// repeated), each with the header x-request-id: req-<n>.
func chatProvider(t *testing.T, bodies ...string) string {
	t.Helper()
	var mu sync.Mutex
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		w.Header().Set("x-request-id", fmt.Sprintf("req-%d", i))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, bodies[min(i, len(bodies))-1])
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

const (
	navigateAnswer = `{"id":"chatcmpl-1","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"robot__navigate_to","arguments":"{\"target\":\"table\"}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"cost":0.004}}`
	doneAnswer = `{"id":"chatcmpl-2","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"At the table."},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":5,"cost":0.004}}`
	refusedAnswer = `{"id":"chatcmpl-3","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"refusal":"I can't help with that."},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":7}}`
	litellmAnswer = `{"id":"chatcmpl-4","model":"claude-sonnet-4-5","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"provider_specific_fields":{"refusal":"I won't drive there."}},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":7}}`
	filteredAnswer = `{"id":"chatcmpl-5","model":"claude-sonnet-4-5","choices":[{"index":0,"message":{"role":"assistant","content":"Driving to"},` +
		`"finish_reason":"content_filter"}],"usage":{"prompt_tokens":100,"completion_tokens":2}}`
)

// agentRun is one `mcp-gateway agent` run in-process: its exit code, output and transcript.
type agentRun struct {
	code           int
	stdout, stderr string
	events         []map[string]any
	stateDir       string
}

// runAgentCommand runs the agent command on a config fronting robotUpstream, with llm as the
// llm section.
func runAgentCommand(t *testing.T, llm string) agentRun {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	stateDir := filepath.Join(dir, "state")
	yaml := fmt.Sprintf("gateway: {listen: \"\", state_dir: %q}\nservers:\n  - name: robot\n    url: %q\nllm:\n%s\n", stateDir, robotUpstream(t), llm)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	transcript := filepath.Join(dir, "transcript.jsonl")
	// stderr is written by the command and by its logger's goroutines at once.
	var stdout bytes.Buffer
	var stderr syncBuffer
	code := run(context.Background(), []string{"agent", "-c", cfg, "--task", "go to the table", "--transcript", transcript}, &stdout, &stderr)
	r := agentRun{code: code, stdout: stdout.String(), stderr: stderr.String(), stateDir: stateDir}
	f, err := os.Open(transcript)
	if err != nil {
		t.Fatalf("exit %d, no transcript: %v\n%s%s", code, err, r.stdout, r.stderr)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		r.events = append(r.events, ev)
	}
	return r
}

// TestAgentExitCodes checks the exit code of each way a run ends that the model decides: 0
// answered, 2 for every kind of refusal (the refusal field, LiteLLM's provider_specific_fields,
// a content filter), 3 when the cost reported by the provider or the script passes
// max_cost_usd, a final answer's included.
func TestAgentExitCodes(t *testing.T) {
	t.Setenv("TEST_AGENT_KEY", "sk-test")
	openai := func(url string) string {
		return fmt.Sprintf("  provider: openai\n  base_url: %q\n  api_key_env: TEST_AGENT_KEY\n", url)
	}
	cases := []struct {
		name   string
		llm    string
		code   int
		reason string // the end event's reason starts with it
	}{
		{"answered", openai(chatProvider(t, navigateAnswer, doneAnswer)), 0, ""},
		{"refusal field", openai(chatProvider(t, refusedAnswer)), 2, "model_refusal: I can't help with that."},
		{"LiteLLM provider_specific_fields", openai(chatProvider(t, litellmAnswer)), 2, "model_refusal: I won't drive there."},
		{"content_filter", openai(chatProvider(t, filteredAnswer)), 2, "model_refusal: finish_reason content_filter"},
		{"refusal after a tool call", openai(chatProvider(t, navigateAnswer, refusedAnswer)), 2, "model_refusal"},
		{"provider cost passes max_cost_usd on the final answer", openai(chatProvider(t, navigateAnswer, doneAnswer)) + "  max_cost_usd: 0.006\n", 3, "cost budget max_cost_usd 0.006 passed"},
		{"scripted cost passes max_cost_usd", "  provider: scripted\n  max_cost_usd: 0.015\n  replies:\n    - {text: \"done\", cost_usd: 0.02}\n", 3, "cost budget max_cost_usd 0.015"},
		{"scripted refusal", "  provider: scripted\n  replies:\n    - {text: \"No.\", finish_reason: refusal}\n", 2, "model_refusal: No."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runAgentCommand(t, tc.llm)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			end := r.events[len(r.events)-1]
			if reason, _ := end["reason"].(string); end["type"] != "end" || !strings.HasPrefix(reason, tc.reason) || end["exit"] != float64(tc.code) {
				t.Errorf("end event %v, want exit %d and a reason starting %q", end, tc.code, tc.reason)
			}
			answered := strings.Contains(r.stdout, "answer: At the table.")
			if answered != (tc.code == 0) {
				t.Errorf("exit %d, answer printed %v:\n%s", r.code, answered, r.stdout)
			}
			if strings.Contains(r.stdout, "Driving to") {
				t.Errorf("the filtered answer's text was printed:\n%s", r.stdout)
			}
		})
	}
}

// TestAgentAuditRecordsCarryModelEvidence runs a tool loop through the gateway and reads the
// state file: the agent's call record holds the evidence of the model request that asked for
// it (the provider's request id, the model that answered, the run's invocation id), as the
// step event of the transcript does.
func TestAgentAuditRecordsCarryModelEvidence(t *testing.T) {
	t.Setenv("TEST_AGENT_KEY", "sk-test")
	r := runAgentCommand(t, fmt.Sprintf("  provider: openai\n  base_url: %q\n  api_key_env: TEST_AGENT_KEY\n", chatProvider(t, navigateAnswer, doneAnswer)))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	runID, _ := r.events[0]["run"].(string)
	var stepEvidence map[string]any
	for _, ev := range r.events {
		if ev["type"] == "step" && ev["step"] == 1.0 {
			stepEvidence, _ = ev["evidence"].(map[string]any)
		}
	}
	want := store.ModelEvidence{RequestID: "req-1", Model: "gpt-4o-mini-2024-07-18", InvocationID: runID + "-step1-req1"}
	if stepEvidence["request_id"] != want.RequestID || stepEvidence["model"] != want.Model || stepEvidence["invocation_id"] != want.InvocationID {
		t.Errorf("step 1 evidence %v, want %+v", stepEvidence, want)
	}
	st, err := store.Open(r.stateDir, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var calls []store.Record
	if err := st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(rec store.Record) bool { calls = append(calls, rec); return true }); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Principal != "agent" || calls[0].Tool != "robot__navigate_to" || calls[0].Session != runID {
		t.Fatalf("call records %+v", calls)
	}
	if calls[0].Model == nil || !reflect.DeepEqual(*calls[0].Model, want) {
		t.Errorf("the call record's model evidence %+v, want %+v", calls[0].Model, want)
	}
	if _, bad := st.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify: %v", bad)
	}
}
