package governor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

func TestParseEnvelope(t *testing.T) {
	tests := []struct {
		name      string
		res       *mcp.CallToolResult
		evaluated bool
		kind      Kind   // "" for a valid envelope
		success   bool   // for valid envelopes
		reasonHas string // substring of the reason
	}{
		{name: "structured success", res: &mcp.CallToolResult{StructuredContent: map[string]any{"success": true, "observation": "drawer open"}}, success: true},
		{name: "structured result field", res: &mcp.CallToolResult{StructuredContent: map[string]any{"result": map[string]any{"success": true, "run_id": "r1"}}}, success: true},
		{name: "text success", res: &mcp.CallToolResult{Content: text(`{"success":true,"observation":"ok"}`)}, success: true},
		{name: "text failure", res: &mcp.CallToolResult{Content: text(`{"success":false,"reason":"  target not visible "}`)}, reasonHas: "target not visible"},
		{name: "empty structured falls back to text", res: &mcp.CallToolResult{StructuredContent: map[string]any{}, Content: text(`{"success":true,"observation":"x"}`)}, success: true},
		{name: "no content", res: &mcp.CallToolResult{}, kind: KindProtocolViolation, reasonHas: "no content"},
		{name: "non-text block", res: &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}}}, kind: KindProtocolViolation, reasonHas: "image"},
		{name: "not json", res: &mcp.CallToolResult{Content: text("ok, done")}, kind: KindProtocolViolation, reasonHas: "not JSON"},
		{name: "json array", res: &mcp.CallToolResult{Content: text("[1,2]")}, kind: KindProtocolViolation, reasonHas: "array"},
		{name: "success not boolean", res: &mcp.CallToolResult{Content: text(`{"success":"yes","observation":"x"}`)}, kind: KindProtocolViolation, reasonHas: "not a boolean"},
		{name: "success missing", res: &mcp.CallToolResult{Content: text(`{"observation":"x"}`)}, kind: KindProtocolViolation, reasonHas: "missing"},
		{name: "success without value", res: &mcp.CallToolResult{Content: text(`{"success":true,"error":"x"}`)}, kind: KindProtocolViolation, reasonHas: "without any value"},
		{name: "failure without reason", res: &mcp.CallToolResult{Content: text(`{"success":false}`)}, kind: KindProtocolViolation, reasonHas: "without a reason"},
		{name: "failure blank reason", res: &mcp.CallToolResult{Content: text(`{"success":false,"reason":"   "}`)}, kind: KindProtocolViolation},
		{name: "isError forces failure", res: &mcp.CallToolResult{IsError: true, Content: text(`{"success":true,"observation":"x","reason":"gripper jammed"}`)}, reasonHas: "gripper jammed"},
		{name: "isError supplies reason", res: &mcp.CallToolResult{IsError: true, Content: text(`{"success":true,"observation":"x"}`)}, reasonHas: "without a reason"},
		{name: "isError plain text", res: &mcp.CallToolResult{IsError: true, Content: text("Error: motor stalled")}, reasonHas: "motor stalled"},
		{name: "isError no content", res: &mcp.CallToolResult{IsError: true}, reasonHas: "without a reason"},
		{name: "evaluated success with run id", res: &mcp.CallToolResult{Content: text(`{"success":true,"run_id":"run-1"}`)}, evaluated: true, success: true},
		{name: "evaluated success without run id", res: &mcp.CallToolResult{Content: text(`{"success":true,"observation":"moved"}`)}, evaluated: true, kind: KindMissingRunID, reasonHas: "arm__pick"},
		{name: "evaluated failure keeps own reason", res: &mcp.CallToolResult{Content: text(`{"success":false,"reason":"object slipped"}`)}, evaluated: true, kind: KindMissingRunID, reasonHas: "object slipped"},
		{name: "evaluated blank run id", res: &mcp.CallToolResult{Content: text(`{"success":true,"run_id":"  "}`)}, evaluated: true, kind: KindMissingRunID},
		{name: "evaluated numeric run id", res: &mcp.CallToolResult{Content: text(`{"success":true,"run_id":7}`)}, evaluated: true, kind: KindMissingRunID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := ParseEnvelope(tt.res, "arm__pick", tt.evaluated)
			kind, _ := env["kind"].(string)
			if Kind(kind) != tt.kind {
				t.Fatalf("kind = %q, want %q (envelope %v)", kind, tt.kind, env)
			}
			if tt.kind != "" {
				if env.Success() {
					t.Fatalf("a gateway failure must have success false: %v", env)
				}
			} else if env.Success() != tt.success {
				t.Fatalf("success = %v, want %v: %v", env.Success(), tt.success, env)
			}
			if !env.Success() && strings.TrimSpace(env.Reason()) == "" {
				t.Fatalf("a failure must carry a reason: %v", env)
			}
			if tt.reasonHas != "" && !strings.Contains(env.Reason(), tt.reasonHas) {
				t.Fatalf("reason %q does not mention %q", env.Reason(), tt.reasonHas)
			}
			if _, ok := env["error"]; ok {
				t.Fatalf("error field must be dropped: %v", env)
			}
		})
	}
}

func TestEnvelopeResult(t *testing.T) {
	env := Failure(KindUnknownTool, "Unknown tool: x")
	res := env.Result()
	if !res.IsError {
		t.Fatal("failure result must set isError")
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got); err != nil {
		t.Fatal(err)
	}
	if got["kind"] != "unknown_tool" || got["success"] != false || got["reason"] != "Unknown tool: x" {
		t.Fatalf("text content = %v", got)
	}
	if sc := res.StructuredContent.(map[string]any); sc["kind"] != "unknown_tool" {
		t.Fatalf("structuredContent = %v", sc)
	}
	ok := Envelope{"success": true, "observation": "x"}.Result()
	if ok.IsError {
		t.Fatal("success result must not set isError")
	}
}

func TestParseEnvelopeDoesNotMutateUpstreamResult(t *testing.T) {
	sc := map[string]any{"success": true, "observation": "x", "error": "e"}
	ParseEnvelope(&mcp.CallToolResult{StructuredContent: sc, IsError: true}, "t", false)
	if sc["success"] != true || sc["error"] != "e" {
		t.Fatalf("upstream result changed: %v", sc)
	}
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add(`{"success":true,"observation":"x"}`, false, false)
	f.Add(`{"success":false,"reason":""}`, true, true)
	f.Add(`{"result":{"success":true}}`, false, true)
	f.Add(`[]`, false, false)
	f.Fuzz(func(t *testing.T, body string, isError, evaluated bool) {
		res := &mcp.CallToolResult{Content: text(body), IsError: isError}
		var v any
		if json.Unmarshal([]byte(body), &v) == nil {
			res.StructuredContent = v
		}
		env := ParseEnvelope(res, "t", evaluated)
		if _, ok := env["success"].(bool); !ok {
			t.Fatalf("envelope without boolean success: %v", env)
		}
		if !env.Success() && strings.TrimSpace(env.Reason()) == "" {
			t.Fatalf("failure without reason: %v", env)
		}
		if env.Success() && evaluated && strings.TrimSpace(env.RunID()) == "" {
			t.Fatalf("evaluated success without run_id: %v", env)
		}
		env.Result()
	})
}
