package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/store"
)

type placeInput struct {
	Target string  `json:"target" jsonschema:"required,enum=table,enum=shelf"`
	Speed  float64 `json:"speed,omitempty"`
}

// builtinGateway starts a gateway on yaml ({{servers}} is one test server), with its state file, and one built-in tool
// "place"; calls counts the runs of the tool's function.
func builtinGateway(t *testing.T, yaml string) (*Gateway, *store.Store, *atomic.Int64) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	yaml = strings.ReplaceAll(withServers(yaml, server("arm", "")), "{{exe}}", exe)
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "gateway.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g, err := New(cfg, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	calls := new(atomic.Int64)
	err = g.RegisterTool(Tool("place", "Put the held object down.", func(ctx context.Context, in placeInput) (governor.Envelope, error) {
		calls.Add(1)
		if in.Target == "shelf" {
			return nil, errors.New("the shelf is out of reach")
		}
		return governor.Envelope{"success": true, "observation": "placed on the " + in.Target}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return g, st, calls
}

func TestBuiltinToolIsListedWithItsReflectedSchema(t *testing.T) {
	g, _, _ := builtinGateway(t, "servers:\n{{servers}}")
	tool, ok := g.Resolve("builtin__place")
	if !ok || tool.Definition == nil {
		t.Fatalf("builtin__place is not listed: %v", ok)
	}
	if tool.Server != BuiltinServer || tool.Physical() {
		t.Errorf("server %q physical %v, want builtin, not physical", tool.Server, tool.Physical())
	}
	b, err := json.Marshal(tool.Definition.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["type"] != "object" || schema["additionalProperties"] != false {
		t.Errorf("schema %s: want type object and additionalProperties false", b)
	}
	if req, _ := schema["required"].([]any); !slices.Equal(req, []any{"target"}) {
		t.Errorf("required %v, want [target]", schema["required"])
	}
	if _, ok := schema["$schema"]; ok {
		t.Errorf("schema %s has $schema", b)
	}
	if _, ok := schema["$id"]; ok {
		t.Errorf("schema %s has $id", b)
	}
	listed := false
	for _, d := range g.Catalog().Tools() {
		listed = listed || d.Public == "builtin__place"
	}
	if !listed {
		t.Error("builtin__place is not in the listed catalog")
	}
	g.syncMu.Lock()
	_, served := g.served["builtin__place"]
	g.syncMu.Unlock()
	if !served {
		t.Error("builtin__place is not served to MCP clients")
	}
}

func TestBuiltinToolIsGoverned(t *testing.T) {
	g, st, calls := builtinGateway(t, allowAll)
	dispatched := false
	call := func(args string) *governor.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := &governor.Call{Name: "builtin__place", Args: json.RawMessage(args), Principal: "tester"}
		out := g.Call(ctx, c)
		dispatched = c.Dispatched
		return out
	}

	out := call(`{"target":"table","speed":0.5}`)
	env := governor.ParseEnvelope(out.Result, "builtin__place", false)
	if !out.Success || out.Kind != "" || env["observation"] != "placed on the table" {
		t.Fatalf("call: kind %q success %v envelope %v", out.Kind, out.Success, env)
	}
	if calls.Load() != 1 {
		t.Fatalf("fn ran %d times, want 1", calls.Load())
	}

	for _, args := range []string{`{"target":"table","extra":1}`, `{"target":"floor"}`, `{}`} {
		if out := call(args); out.Kind != governor.KindInvalidArguments || dispatched {
			t.Errorf("args %s: kind %q dispatched %v, want %s refused by validation", args, out.Kind, dispatched, governor.KindInvalidArguments)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("fn ran %d times after refused calls, want 1", calls.Load())
	}

	out = call(`{"target":"shelf"}`)
	env = governor.ParseEnvelope(out.Result, "builtin__place", false)
	if out.Success || !strings.Contains(env.Reason(), "out of reach") {
		t.Errorf("failing fn: success %v envelope %v", out.Success, env)
	}

	if err := st.Audit().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var recs []store.Record
	err := st.AuditScan(store.AuditFilter{Server: BuiltinServer}, func(r store.Record) bool {
		recs = append(recs, r)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d audit records of server builtin, want 5: %+v", len(recs), recs)
	}
	if recs[0].Tool != "place" && recs[0].Tool != "builtin__place" {
		t.Errorf("audit record tool %q", recs[0].Tool)
	}
	if recs[1].Kind != string(governor.KindInvalidArguments) {
		t.Errorf("audit record of an unknown field: kind %q", recs[1].Kind)
	}
}

func TestBuiltinToolDecodeRefusesUnknownFields(t *testing.T) {
	ran := false
	tool := Tool("place", "", func(ctx context.Context, in placeInput) (governor.Envelope, error) {
		ran = true
		return governor.Envelope{"success": true, "observation": in.Target}, nil
	})
	env := tool.Handle(context.Background(), json.RawMessage(`{"target":"table","extra":true}`))
	if env.Success() || env["kind"] != string(governor.KindInvalidArguments) || ran {
		t.Errorf("envelope %v ran %v: want an invalid_tool_arguments failure before fn", env, ran)
	}
}

func TestRegisterToolRefusesAClash(t *testing.T) {
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "gateway.yaml"), []byte("servers:\n  - name: builtin\n    command: arm\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(ctx context.Context, in placeInput) (governor.Envelope, error) { return nil, nil }
	err = g.RegisterTool(Tool("place", "", noop))
	if err == nil || !strings.Contains(err.Error(), `server named "builtin"`) {
		t.Errorf("RegisterTool with a configured server builtin: %v", err)
	}
	if err := g.RegisterTool(Tool("bad", "", func(ctx context.Context, in string) (governor.Envelope, error) { return nil, nil })); err == nil {
		t.Error("RegisterTool accepted a tool whose input is not a struct")
	}
}
