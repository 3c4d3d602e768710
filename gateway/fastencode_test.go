package gateway

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// plainAsTheSDK checks appendPlainResult against encoding/json for res: the same bytes when it
// takes res, nothing written when it does not, and taken exactly when plain says.
func plainAsTheSDK(t *testing.T, res *mcp.CallToolResult, plain bool) {
	t.Helper()
	var want bytes.Buffer
	if err := wirejson.Append(&want, res); err != nil {
		t.Fatal(err)
	}
	got := bytes.NewBufferString("x")
	took := appendPlainResult(got, res)
	switch {
	case took != plain:
		t.Fatalf("appendPlainResult took %s: %v, want %v", want.String(), took, plain)
	case !took && got.String() != "x":
		t.Fatalf("appendPlainResult declined %s but wrote %q", want.String(), got.String())
	case took && got.String()[1:] != want.String():
		t.Fatalf("appendPlainResult wrote\n %s\nencoding/json writes\n %s", got.String()[1:], want.String())
	}
}

var plainStrings = []string{"", "plain", "ünïcødé ✓ 日本", `quote " and \ backslash`, "tab\tnew\nline\r\b\f", "<html>&amp;</html>",
	"\u2028\u2029", "emoji 🤖", "\x01ctl\x1f\x7f", "bad \xff utf-8 \xc3", "\u00e9\u0000"}

// TestPlainResultEncodesAsTheSDK: the fast path's encoding of a text-only result is
// encoding/json's, byte for byte, and any other result is left to encoding/json.
func TestPlainResultEncodesAsTheSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	text := func() string {
		var s string
		for range r.IntN(4) {
			s += plainStrings[r.IntN(len(plainStrings))]
		}
		return s
	}
	for range 5000 {
		res := &mcp.CallToolResult{Content: []mcp.Content{}, IsError: r.IntN(3) == 0}
		for range r.IntN(4) {
			res.Content = append(res.Content, &mcp.TextContent{Text: text()})
		}
		plainAsTheSDK(t, res, true)
	}
	var withType mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[{"type":"text","text":"done"}],"resultType":"complete"}`), &withType); err != nil {
		t.Fatal(err)
	}
	txt := func() []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: "a"}} }
	for name, res := range map[string]*mcp.CallToolResult{
		"meta":               {Meta: mcp.Meta{"k": "<v>"}, Content: txt()},
		"structured content": {Content: txt(), StructuredContent: map[string]any{"a": "<b>"}},
		"request state":      {Content: txt(), RequestState: "st"},
		"text meta":          {Content: []mcp.Content{&mcp.TextContent{Text: "a", Meta: mcp.Meta{"m": 1}}}},
		"annotations":        {Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: &mcp.Annotations{Priority: 1}}}},
		"image":              {Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}}},
		"result type":        &withType,
	} {
		t.Run(name, func(t *testing.T) { plainAsTheSDK(t, res, false) })
	}
	if resultTypeOf(&withType) != "complete" {
		t.Errorf("resultTypeOf a result read with resultType complete = %q", resultTypeOf(&withType))
	}
}

// FuzzPlainResultEncodesAsTheSDK: any text, in one block or two, encodes as encoding/json
// encodes it.
func FuzzPlainResultEncodesAsTheSDK(f *testing.F) {
	for _, s := range plainStrings {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, isError bool) {
		plainAsTheSDK(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: isError}, true)
		plainAsTheSDK(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}, &mcp.TextContent{Text: s + "<"}}}, true)
	})
}

// BenchmarkResultEncoding: the echo tool's result, by appendPlainResult and by encoding/json.
func BenchmarkResultEncoding(b *testing.B) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: 0123456789abcdef"}}}
	for _, bc := range []struct {
		name string
		enc  func(*bytes.Buffer)
	}{
		{"plain", func(buf *bytes.Buffer) { appendPlainResult(buf, res) }},
		{"encoding-json", func(buf *bytes.Buffer) { _ = wirejson.Append(buf, res) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				bc.enc(&buf)
			}
		})
	}
}
