package governor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor/argschema"
	"github.com/mcp-gateway/mcp-gateway/store"
)

func TestRedactor(t *testing.T) {
	r := NewRedactor(config.DefaultRedactKeys)
	tests := []struct {
		in, want string
	}{
		{`{"target":"table"}`, `{"target":"table"}`},
		{`{"Password":"x","target":"t"}`, `{"Password":"[REDACTED]","target":"t"}`},
		{`{"auth":{"api_key":"k","user":"u"}}`, `{"auth":{"api_key":"[REDACTED]","user":"u"}}`},
		{`{"list":[{"x-Auth-Token":"t"}]}`, `{"list":[{"x-Auth-Token":"[REDACTED]"}]}`},
		{`{"pass\u0077ord":"escaped"}`, `{"password":"[REDACTED]"}`},
		{`{"secret":{"nested":"deep"}}`, `{"secret":"[REDACTED]"}`},
		{`{"note":"my password is in the value, not a key","speed":1.50}`, `{"note":"my password is in the value, not a key","speed":1.50}`},
		{`not json token`, `"not json token"`},
	}
	for _, tt := range tests {
		got := string(r.Redact(json.RawMessage(tt.in)))
		if got != tt.want {
			t.Errorf("Redact(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestAuditRecordsEveryCall(t *testing.T) {
	st := openStore(t)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	cfg := &config.Server{Name: "arm", CallTimeoutSec: 1}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: cfg, Dispatcher: srv}}
	h := Chain(Dispatch(), Audit(st.Audit(), NewRedactor([]string{"token"})), Resolve(tools), CheckResult())
	h.Handle(context.Background(), &Call{ID: "a", Name: "arm__pick", Args: json.RawMessage(`{"token":"s3cr3t-value","x":1}`), Principal: "planner", Session: "s1", Start: time.Now()})
	h.Handle(context.Background(), &Call{ID: "b", Name: "arm__fly", Args: json.RawMessage(`{}`), Start: time.Now()})
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	st.AuditScan(store.AuditFilter{}, func(r store.Record) bool { recs = append(recs, r); return true })
	if len(recs) != 2 {
		t.Fatalf("records: %d", len(recs))
	}
	a, b := recs[0], recs[1]
	if a.CallID != "a" || a.Server != "arm" || a.Principal != "planner" || a.Session != "s1" || a.Outcome != OutcomeOK || a.Decision != "dispatched" || a.RunID != "run-1" {
		t.Fatalf("allowed call record: %+v", a)
	}
	if strings.Contains(string(a.Args), "s3cr3t") || !strings.Contains(string(a.Args), Redacted) || len(a.ArgsDigest) != 64 {
		t.Fatalf("arguments not redacted or digest missing: %s %s", a.Args, a.ArgsDigest)
	}
	if b.Kind != string(KindUnknownTool) || b.Decision != "refused" || b.Server != "" {
		t.Fatalf("refused call record: %+v", b)
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	schema, err := argschema.Compile("arm__move", map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"target", "speed"},
		"properties": map[string]any{
			"target": map[string]any{"type": "string"},
			"speed":  map[string]any{"type": "number", "maximum": 1.5},
		},
	}, argschema.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("moved") }}
	tools := catalog{"arm__move": {Public: "arm__move", Server: "arm", Upstream: "move", Schema: schema,
		ServerConfig: &config.Server{Name: "arm", CallTimeoutSec: 1}, Dispatcher: srv}}
	h := Chain(Dispatch(), Resolve(tools), Validate(NewRedactor(config.DefaultRedactKeys)), CheckResult())
	out := h.Handle(context.Background(), &Call{Name: "arm__move", Args: json.RawMessage(`{"speed":2,"colour":"red"}`)})
	if out.Kind != KindInvalidArguments || srv.calls != 0 {
		t.Fatalf("invalid call: %+v (upstream calls %d)", out, srv.calls)
	}
	for _, want := range []string{"/speed", "target", "colour"} {
		if !strings.Contains(out.Reason, want) {
			t.Errorf("reason lacks %q: %s", want, out.Reason)
		}
	}
	if out := h.Handle(context.Background(), &Call{Name: "arm__move", Args: json.RawMessage(`{"target":"table","speed":1}`)}); out.Kind != "" || srv.calls != 1 {
		t.Fatalf("valid call: %+v", out)
	}
}

func TestValidationReasonNeverQuotesRedactedValues(t *testing.T) {
	schema, err := argschema.Compile("door__open", map[string]any{
		"type":       "object",
		"properties": map[string]any{"password": map[string]any{"enum": []any{"letmein"}}, "code": map[string]any{"type": "string"}},
	}, argschema.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	redact := NewRedactor(config.DefaultRedactKeys)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("open") }}
	tools := catalog{"door__open": {Public: "door__open", Server: "door", Upstream: "open", Schema: schema,
		ServerConfig: &config.Server{Name: "door", CallTimeoutSec: 1}, Dispatcher: srv}}
	h := Chain(Dispatch(), Audit(st.Audit(), redact), Resolve(tools), Validate(redact), CheckResult())
	out := h.Handle(context.Background(), &Call{Name: "door__open", Args: json.RawMessage(`{"password":"hunter2-SECRET","code":7}`), Start: time.Now()})
	if out.Kind != KindInvalidArguments || strings.Contains(out.Reason, "hunter2") || !strings.Contains(out.Reason, Redacted) {
		t.Fatalf("reason: %s", out.Reason)
	}
	st.Audit().Flush(context.Background())
	st.AuditScan(store.AuditFilter{}, func(r store.Record) bool {
		if b, _ := json.Marshal(r); strings.Contains(string(b), "hunter2") {
			t.Fatalf("audit record holds the secret: %s", b)
		}
		return true
	})
}
