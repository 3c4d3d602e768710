package governor

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
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
	h := Chain(Dispatch(), Audit(st, NewRedactor([]string{"token"}), quiet), Resolve(tools), CheckResult())
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

// TestAuditRecordKeepsArgumentsCompactAndDropsInvalidOnes: the record holds the arguments in
// compact form, and none of arguments that are not valid JSON (which the guards cannot read
// either), whatever their size.
func TestAuditRecordKeepsArgumentsCompactAndDropsInvalidOnes(t *testing.T) {
	st := openStore(t)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: &config.Server{Name: "arm", CallTimeoutSec: 1}, Dispatcher: srv}}
	h := Chain(Dispatch(), Audit(st, NewRedactor(config.DefaultRedactKeys), quiet), Resolve(tools), CheckResult())
	for id, args := range map[string]string{"pretty": "{ \"x\" : [1, 2],\n \"h\": \"<&>\" }", "cut": `{"x": `, "garbage": `{} {}`} {
		h.Handle(context.Background(), &Call{ID: id, Name: "arm__pick", Args: json.RawMessage(args), Start: time.Now()})
	}
	want := map[string]string{"pretty": `{"x":[1,2],"h":"\u003c\u0026\u003e"}`, "cut": "", "garbage": ""}
	n := 0
	st.AuditScan(store.AuditFilter{}, func(r store.Record) bool {
		n++
		if string(r.Args) != want[r.CallID] || len(r.ArgsDigest) != 64 {
			t.Errorf("record of %s: args %s, digest %q; want args %s", r.CallID, r.Args, r.ArgsDigest, want[r.CallID])
		}
		return true
	})
	if n != 3 {
		t.Fatalf("%d records, want 3", n)
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
	h := Chain(Dispatch(), Audit(st, redact, quiet), Resolve(tools), Validate(redact), CheckResult())
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

// TestAnswerWaitsForItsRecord: when a call returns, its record is already committed, and a
// physical call's journal entry went with it; nothing needs flushing.
func TestAnswerWaitsForItsRecord(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{AuditBatch: time.Hour}) // a lazy writer would hold records back
	if err != nil {
		t.Fatal(err)
	}
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	cfg := &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 1}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: cfg, Dispatcher: srv}}
	h := Chain(Dispatch(), Audit(st, NewRedactor(nil), quiet), Resolve(tools), CheckStore(st.Available), CheckResult(), LockOnUnknown(st, st.Audit(), quiet))
	out := h.Handle(context.Background(), &Call{ID: "p1", Name: "arm__pick", Args: json.RawMessage(`{}`), Start: time.Now()})
	if out.Kind != "" {
		t.Fatalf("outcome: %+v", out)
	}
	// Reopen the file read-only beside the running store's last commit: the record is there and
	// no journal entry is left, so a kill now would neither lose the call nor lock out.
	var n int
	st.AuditScan(store.AuditFilter{}, func(r store.Record) bool { n++; return r.CallID != "p1" })
	if n != 1 {
		t.Fatalf("the answered call's record is not committed (%d records)", n)
	}
	st.Close()
	ro, err := store.Open(dir, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if lo := ro.Lockouts(); len(lo) != 0 {
		t.Fatalf("a finished physical call left its journal entry behind: %+v", lo)
	}
}

// failingStore is a real store whose Available reports failure from a moment on, to put a disk
// failure between dispatch and the record.
type failingStore struct {
	*store.Store
	fail func() bool
}

func (f failingStore) Available() error {
	if f.fail() {
		return &store.UnavailableError{Cause: "the disk is full (test)", Since: time.Now()}
	}
	return nil
}

func TestUnavailableStateFileFailsClosed(t *testing.T) {
	st := openStore(t)
	failing := false
	fs := failingStore{Store: st, fail: func() bool { return failing }}
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("moved") }}
	arm := &config.Server{Name: "arm", Physical: true, CallTimeoutSec: 1}
	cam := &config.Server{Name: "cam", CallTimeoutSec: 1}
	tools := catalog{
		"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: arm, Dispatcher: srv},
		"cam__snap": {Public: "cam__snap", Server: "cam", Upstream: "snap", ServerConfig: cam, Dispatcher: srv},
	}
	h := Chain(Dispatch(), Audit(fs, NewRedactor(nil), quiet), Resolve(tools), CheckStore(fs.Available), CheckResult(), LockOnUnknown(st, st.Audit(), quiet))
	call := func(name string) *Outcome {
		return h.Handle(context.Background(), &Call{ID: "c-" + name, Name: name, Args: json.RawMessage(`{}`), Start: time.Now()})
	}

	failing = true
	for _, name := range []string{"arm__pick", "cam__snap", "arm__nope"} {
		out := call(name)
		if out.Kind != KindAuditUnavailable || !strings.Contains(out.Reason, "nothing was sent to any server") && !strings.Contains(out.Reason, "was not sent to any server") {
			t.Fatalf("%s on an unavailable store: %+v", name, out)
		}
		if !strings.Contains(out.Reason, "the disk is full") {
			t.Errorf("%s: the reason does not say what failed: %s", name, out.Reason)
		}
	}
	if srv.calls != 0 {
		t.Fatalf("%d calls reached a server while the state file was unavailable", srv.calls)
	}

	// The disk fails while a physical call runs: the result is withheld, the call said to have
	// run, and the server locked out because its outcome is not on record.
	failing = false
	srv.do = func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) {
		failing = true
		return ok("moved")
	}
	out := call("arm__pick")
	if out.Kind != KindAuditUnavailable || !strings.Contains(out.Reason, "Do not repeat the call: it ran") || !strings.Contains(out.Reason, "locked out") {
		t.Fatalf("a physical call whose record failed: %+v", out)
	}
	if strings.Contains(textOf(out.Result), "moved") {
		t.Fatalf("the unrecorded result was passed on: %s", textOf(out.Result))
	}
	if _, locked := st.Lockout("arm"); !locked {
		t.Fatal("a physical call without a record did not lock out")
	}
	// Once the disk takes the queued records, they tell what the caller was told: the result
	// withheld, and the lockout.
	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rec, lockout *store.Record
	st.AuditScan(store.AuditFilter{}, func(r store.Record) bool {
		if r.CallID == "c-arm__pick" {
			switch r.Type {
			case store.RecordCall:
				rec = &r
			case store.RecordLockout:
				lockout = &r
			}
		}
		return true
	})
	if rec == nil || rec.Kind != string(KindAuditUnavailable) || rec.Detail["withheld_outcome"] != OutcomeOK {
		t.Fatalf("record of the withheld call: %+v", rec)
	}
	if lockout == nil || lockout.Server != "arm" {
		t.Fatalf("no lockout record for the unrecorded physical call: %+v", lockout)
	}
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestArgumentsNotAnObjectAreAudited: arguments of the wrong shape are refused inside the chain,
// so the refusal has its record like every other.
func TestArgumentsNotAnObjectAreAudited(t *testing.T) {
	st := openStore(t)
	srv := &fakeServer{do: func(context.Context, string, json.RawMessage) (*mcp.CallToolResult, error) { return ok("done") }}
	cfg := &config.Server{Name: "arm", CallTimeoutSec: 1}
	tools := catalog{"arm__pick": {Public: "arm__pick", Server: "arm", Upstream: "pick", ServerConfig: cfg, Dispatcher: srv}}
	redact := NewRedactor(nil)
	h := Chain(Dispatch(), Audit(st, redact, quiet), Resolve(tools), Validate(redact), CheckResult())
	for _, args := range []string{`[1,2]`, `"x"`, ` 7`} {
		out := h.Handle(context.Background(), &Call{ID: "c" + args, Name: "arm__pick", Args: json.RawMessage(args), Start: time.Now()})
		if out.Kind != KindInvalidArguments || !strings.Contains(out.Reason, "must be a JSON object") {
			t.Fatalf("args %s: %+v", args, out)
		}
	}
	var n int
	st.AuditScan(store.AuditFilter{Kind: string(KindInvalidArguments)}, func(store.Record) bool { n++; return true })
	if n != 3 || srv.calls != 0 {
		t.Fatalf("%d records of 3 refusals, %d calls sent", n, srv.calls)
	}
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
				if len(k) > 512 || !strings.HasPrefix(k, big[:16]) { // the cut key keeps the long key's start
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

// countingLog counts what the audit step tells the log of the calls coming to it.
type countingLog struct {
	store.AuditLog
	coming   atomic.Int64
	atCommit int64 // coming when the call's record was appended
}

func (l *countingLog) Coming(delta int) {
	l.coming.Add(int64(delta))
	l.AuditLog.Coming(delta)
}

func (l *countingLog) AppendSync(ctx context.Context, r store.Record) (store.Record, error) {
	l.atCommit = l.coming.Load()
	return l.AuditLog.AppendSync(ctx, r)
}

type countingStore struct {
	*store.Store
	log *countingLog
}

func (s countingStore) Audit() store.AuditLog { return s.log }

// The audit step says a call is coming to the log for as long as the call is in flight, its
// record's commit included, and no longer, also when the rest of the chain panics (net/http
// recovers a handler's panic, and a count left behind would make every later leader yield).
func TestAuditStepCountsTheCallsComing(t *testing.T) {
	st := openStore(t)
	cs := countingStore{Store: st, log: &countingLog{AuditLog: st.Audit()}}
	var during int64
	h := Audit(cs, NewRedactor(nil), quiet)(HandlerFunc(func(_ context.Context, c *Call) *Outcome {
		during = cs.log.coming.Load()
		if c.Name == "panics" {
			panic("the chain failed")
		}
		return &Outcome{Result: &mcp.CallToolResult{}}
	}))
	h.Handle(t.Context(), &Call{ID: "1", Name: "move", Start: time.Now()})
	// Counted still while its own record is committed: a leader counts itself.
	if during != 1 || cs.log.atCommit != 1 || cs.log.coming.Load() != 0 {
		t.Errorf("coming during the call %d, at its record %d, after it %d; want 1, 1 and 0", during, cs.log.atCommit, cs.log.coming.Load())
	}
	func() {
		defer func() { _ = recover() }()
		h.Handle(t.Context(), &Call{ID: "2", Name: "panics", Start: time.Now()})
	}()
	if n := cs.log.coming.Load(); n != 0 {
		t.Errorf("coming after a call whose chain panicked: %d, want 0", n)
	}
}
