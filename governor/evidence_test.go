package governor

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// The model evidence of a call (the built-in agent's) is kept in its audit record under
// "model"; a call without it leaves no such key, as before the field existed.
func TestAuditRecordKeepsTheModelEvidence(t *testing.T) {
	g := newTracedGateway(t)
	const args = `{"target":"` + targetArg + `"}`
	if out := g.untraced().Handle(context.Background(), moveCall("c1", args)); out.Kind != "" {
		t.Fatalf("outcome %+v", out)
	}
	plain := g.lastRecord(t, store.RecordCall)
	if plain.Model != nil {
		t.Fatalf("a client's call has model evidence %+v", plain.Model)
	}
	var raw []byte
	_ = g.st.AuditExport(store.AuditFilter{AfterSeq: plain.Seq - 1}, func(b []byte) error { raw = b; return io.EOF })
	if strings.Contains(string(raw), `"model"`) {
		t.Errorf("a record without evidence stored as %s", raw)
	}

	ev := &ModelEvidence{RequestID: "req_abc", Model: "gpt-4o-mini-2024-07-18", InvocationID: "agent-1-step2-req2"}
	c := moveCall("c2", args)
	c.Principal, c.Model = "agent", ev
	if out := g.untraced().Handle(context.Background(), c); out.Kind != "" {
		t.Fatalf("outcome %+v", out)
	}
	rec := g.lastRecord(t, store.RecordCall)
	if rec.Model == nil || !reflect.DeepEqual(*rec.Model, *ev) {
		t.Fatalf("record's model evidence %+v, want %+v", rec.Model, ev)
	}
	_ = g.st.AuditExport(store.AuditFilter{AfterSeq: rec.Seq - 1}, func(b []byte) error { raw = b; return io.EOF })
	want := `"model":{"request_id":"req_abc","model":"gpt-4o-mini-2024-07-18","invocation_id":"agent-1-step2-req2"}`
	if !strings.Contains(string(raw), want) {
		t.Errorf("record stored as %s; want it to hold %s", raw, want)
	}
	if _, bad := g.st.AuditVerify(); bad != nil {
		t.Errorf("AuditVerify: %v", bad)
	}
}
