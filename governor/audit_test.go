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

func TestRedactorCutsLongValues(t *testing.T) {
	r := NewAuditRedactor(config.Audit{RedactKeys: []string{"password"}, MaxValueBytes: 256})
	big := strings.Repeat("x", 1<<20)
	digest := func(s string) string { return store.TruncateString(s, 256)[256:] }
	tests := []struct {
		name, in string
		check    func(t *testing.T, out map[string]any, raw string)
	}{
		{"short arguments pass as they are", `{"target":"table","speed":0.4}`, func(t *testing.T, _ map[string]any, raw string) {
			if raw != `{"target":"table","speed":0.4}` {
				t.Errorf("got %s", raw)
			}
		}},
		{"a long string is cut with its digest", `{"blob":"` + big + `","target":"table"}`, func(t *testing.T, out map[string]any, _ string) {
			blob, _ := out["blob"].(string)
			if blob != strings.Repeat("x", 256)+digest(big) || out["target"] != "table" {
				t.Errorf("blob %.300q, target %v", blob, out["target"])
			}
			if !strings.Contains(blob, "[truncated: 1048576 bytes, sha256:") {
				t.Errorf("no marker in %.300q", blob)
			}
		}},
		{"a long secret is redacted, not cut", `{"password":"` + big + `"}`, func(t *testing.T, out map[string]any, _ string) {
			if out["password"] != Redacted {
				t.Errorf("password: %.100v", out["password"])
			}
		}},
		{"a long key is cut", `{"` + big + `":1}`, func(t *testing.T, out map[string]any, _ string) {
			for k := range out {
				if len(k) > 512 || !strings.HasPrefix(k, "xxx") {
					t.Errorf("key of %d bytes", len(k))
				}
			}
		}},
		{"many short values are bounded as a whole", `[` + strings.TrimSuffix(strings.Repeat(`"abcdefgh",`, 10000), ",") + `]`, func(t *testing.T, _ map[string]any, raw string) {
			if len(raw) > 1024 || !strings.Contains(raw, "[truncated: ") {
				t.Errorf("%d bytes: %.200s", len(raw), raw)
			}
		}},
		{"invalid JSON is kept as a cut string", big, func(t *testing.T, _ map[string]any, raw string) {
			var s string
			if err := json.Unmarshal([]byte(raw), &s); err != nil || !strings.HasSuffix(s, digest(big)) {
				t.Errorf("%v: %.200s", err, raw)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := r.Redact(json.RawMessage(tt.in))
			if !json.Valid(raw) {
				t.Fatalf("not valid JSON: %.200s", raw)
			}
			if len(raw) > 16*256+200 {
				t.Errorf("redacted arguments are %d bytes", len(raw))
			}
			var out map[string]any
			_ = json.Unmarshal(raw, &out)
			tt.check(t, out, string(raw))
		})
	}
	if NewRedactor(nil).Redact(json.RawMessage(`{"a":"`+big+`"}`)) == nil || len(NewRedactor(nil).Redact(json.RawMessage(`{"a":"`+big+`"}`))) > 2*config.DefaultAuditMaxValueBytes {
		t.Error("NewRedactor must cut at the default max_value_bytes")
	}
}
