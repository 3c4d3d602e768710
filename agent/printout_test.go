package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
)

// TestPrintoutNeutralisesTerminalEscapes runs a model whose reasoning, text, tool arguments,
// streamed chunks and answer carry terminal escapes (colour, clear screen, a window title, a
// carriage return, a C1 control, a bidirectional override), and a tool whose result does too.
// The printout for a person shows each as an escape and keeps only newlines and tabs as they
// are; the JSONL transcript keeps the text exactly.
func TestPrintoutNeutralisesTerminalEscapes(t *testing.T) {
	const (
		reasoning = "plan\x1b[2J\tthen act"
		text      = "going\x1b]0;owned\x07 now\rOK"
		raw       = "{\"target\":\"\x1b[31mtable\"" // not JSON: printed as given
		result    = "arrived\x1b[1A\x1b[2Kunlocked by root\u009b\u202e"
	)
	chunks := []string{"\x1b[31mred ", "answer\x1b[0m"}
	final, err := model.NewScripted(model.ScriptedSettings{Replies: []model.Reply{{Text: strings.Join(chunks, ""), Chunks: chunks}}})
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	m := modelFunc(func(ctx context.Context, c *model.Call) (*model.Result, error) {
		if steps++; steps > 1 {
			return final.Generate(ctx, c)
		}
		return &model.Result{FinishReason: model.FinishToolCalls, Blocks: []model.Block{
			{Kind: model.BlockReasoning, Text: reasoning},
			{Kind: model.BlockText, Text: text},
			{Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "c1", Name: "robot__navigate_to", Raw: raw}},
			{Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "c2", Name: "robot__navigate_to", Arguments: json.RawMessage(`{}`)}},
		}}, nil
	})
	caller := &fakeCaller{outcome: func(string) *governor.Outcome {
		return &governor.Outcome{Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: result}}, IsError: true}}
	}}
	r, jsonl := newRunner(m, caller, Options{})
	rep, err := r.Run(context.Background(), "go\x1b[8m hidden")
	if err != nil || rep.Exit != ExitAnswered {
		t.Fatalf("report %+v, %v", rep, err)
	}
	out := r.Out.(*bytes.Buffer).String()
	for _, c := range out {
		if (unicode.IsControl(c) && c != '\n' && c != '\t') || unicode.Is(unicode.Cf, c) {
			t.Fatalf("the printout holds the control character %U:\n%q", c, out)
		}
	}
	for _, want := range []string{
		`task: go\x1b[8m hidden`,
		"  thinking: plan\\x1b[2J\tthen act\n",
		`  model: going\x1b]0;owned\x07 now\rOK`,
		`→ robot__navigate_to {"target":"\x1b[31mtable"`,
		`tool failure`, `arrived\x1b[1A\x1b[2Kunlocked by root\u009b\u202e`,
		`  model: \x1b[31mred answer\x1b[0m` + "\n",
		`answer: \x1b[31mred answer\x1b[0m`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("printout lacks %q:\n%s", want, out)
		}
	}
	var texts []string
	for _, ev := range events(t, jsonl) {
		texts = append(texts, ev.Text, ev.Reasoning, ev.Raw, ev.Result)
	}
	all := strings.Join(texts, "|")
	for _, exact := range []string{reasoning, text, raw, result, chunks[0], chunks[1], "go\x1b[8m hidden"} {
		if !strings.Contains(all, exact) {
			t.Errorf("the transcript does not keep %q exactly", exact)
		}
	}
}
