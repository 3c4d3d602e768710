package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
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
	metas := []string{``, `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo-server","version":"0.1.0"}},`,
		`"_meta":{"b":[1,2.5,-3e30,true,null],"a":"<&>\u2028","z":{"":{}}},`}
	types := []string{``, `,"resultType":"complete"`, `,"resultType":"odd <type>"`}
	for i := range 5000 {
		// Half are read as a server sends them, so that what the SDK keeps unexported
		// (resultType) is set as it is for a real result.
		var res *mcp.CallToolResult
		if i%2 == 0 {
			res = &mcp.CallToolResult{Content: []mcp.Content{}, IsError: r.IntN(3) == 0}
			for range r.IntN(4) {
				res.Content = append(res.Content, &mcp.TextContent{Text: text()})
			}
		} else {
			var blocks []string
			for range r.IntN(4) {
				t, _ := json.Marshal(text())
				blocks = append(blocks, `{"type":"text","text":`+string(t)+`}`)
			}
			wire := fmt.Sprintf(`{%s"content":[%s],"isError":%v%s}`, metas[r.IntN(len(metas))], strings.Join(blocks, ","), r.IntN(3) == 0, types[r.IntN(len(types))])
			res = new(mcp.CallToolResult)
			if err := json.Unmarshal([]byte(wire), res); err != nil {
				t.Fatalf("%s: %v", wire, err)
			}
		}
		plainAsTheSDK(t, res, true)
	}
	var withType mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[{"type":"text","text":"done"}],"resultType":"complete"}`), &withType); err != nil {
		t.Fatal(err)
	}
	if resultTypeOf(&withType) != "complete" {
		t.Errorf("resultTypeOf a result read with resultType complete = %q", resultTypeOf(&withType))
	}
	plainAsTheSDK(t, &mcp.CallToolResult{Meta: mcp.Meta{"k": "<v>", "n": map[string]any{"x": []any{1.5, "&"}}}, Content: []mcp.Content{&mcp.TextContent{Text: "a"}}}, true)
	txt := func() []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: "a"}} }
	for name, res := range map[string]*mcp.CallToolResult{
		"structured content": {Content: txt(), StructuredContent: map[string]any{"a": "<b>"}},
		"request state":      {Content: txt(), RequestState: "st"},
		"input requests":     {Content: txt(), InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "m"}}},
		"text meta":          {Content: []mcp.Content{&mcp.TextContent{Text: "a", Meta: mcp.Meta{"m": 1}}}},
		"annotations":        {Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: &mcp.Annotations{Priority: 1}}}},
		"image":              {Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}}},
		"meta not encodable": {Meta: mcp.Meta{"f": func() {}}, Content: txt()},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "meta not encodable" {
				if got := bytes.NewBufferString("x"); appendPlainResult(got, res) || got.String() != "x" {
					t.Fatalf("a result whose _meta cannot be encoded: taken, %q written", got.String())
				}
				return
			}
			plainAsTheSDK(t, res, false)
		})
	}
}

// FuzzPlainResultEncodesAsTheSDK: any text, in one block or two, encodes as encoding/json
// encodes it; and so does any result a server may send with such text, a _meta (any JSON
// object) and a resultType, read by the SDK's own decoder.
func FuzzPlainResultEncodesAsTheSDK(f *testing.F) {
	for i, s := range plainStrings {
		f.Add(s, i%2 == 0, `{"io.modelcontextprotocol/serverInfo":{"name":"echo-server","version":"0.1.0"}}`, "complete")
	}
	f.Add("x", false, `{"n":1e21,"z":-0,"big":12345678901234567890,"h":"<&>","a":[null,true,{"":[]}]}`, "")
	f.Fuzz(func(t *testing.T, s string, isError bool, meta, resultType string) {
		plainAsTheSDK(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}, IsError: isError}, true)
		plainAsTheSDK(t, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}, &mcp.TextContent{Text: s + "<"}}}, true)
		text, _ := json.Marshal(s)
		rt, _ := json.Marshal(resultType)
		var read mcp.CallToolResult
		if json.Unmarshal([]byte(`{"_meta":`+meta+`,"content":[{"type":"text","text":`+string(text)+`}],"isError":`+fmt.Sprint(isError)+`,"resultType":`+string(rt)+`}`), &read) != nil {
			return // not a result the SDK reads
		}
		if read.StructuredContent != nil || read.InputRequests != nil || read.RequestState != "" {
			return
		}
		if _, err := json.Marshal(&read); err != nil {
			return // nor one it can write
		}
		plainAsTheSDK(t, &read, true)
	})
}

// BenchmarkResultEncoding: the echo tool's result, by appendPlainResult and by encoding/json.
func BenchmarkResultEncoding(b *testing.B) {
	res := new(mcp.CallToolResult)
	// The echo server's answer, as the gateway reads it.
	if err := json.Unmarshal([]byte(`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo-server","version":"0.1.0"}},"content":[{"type":"text","text":"Echo: 0123456789abcdef"}],"resultType":"complete"}`), res); err != nil {
		b.Fatal(err)
	}
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
