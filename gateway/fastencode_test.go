package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

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
		"request state":      {Content: txt(), RequestState: "st"},
		"input requests":     {Content: txt(), InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "m"}}},
		"text meta":          {Content: []mcp.Content{&mcp.TextContent{Text: "a", Meta: mcp.Meta{"m": 1}}}},
		"annotations":        {Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: &mcp.Annotations{Priority: 1}}}},
		"image":              {Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}}},
		"meta not encodable": {Meta: mcp.Meta{"f": func() {}}, Content: txt()},
		"structured NaN":     {Content: txt(), StructuredContent: map[string]any{"a": math.NaN()}},
		"structured +Inf":    {Content: txt(), StructuredContent: []any{math.Inf(1)}},
	} {
		t.Run(name, func(t *testing.T) {
			if strings.HasPrefix(name, "meta not encodable") || strings.HasPrefix(name, "structured ") {
				if got := bytes.NewBufferString("x"); appendPlainResult(got, res) || got.String() != "x" {
					t.Fatalf("a result whose _meta cannot be encoded: taken, %q written", got.String())
				}
				return
			}
			plainAsTheSDK(t, res, false)
		})
	}
}

// TestPlainValueEncodesAsTheSDK: structured content and _meta made of what a JSON decoder makes
// are encoded as encoding/json encodes them, floats of every magnitude, keys of every kind and
// nesting included; a value of any other Go type leaves the result to encoding/json.
func TestPlainValueEncodesAsTheSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var value func(depth int) any
	value = func(depth int) any {
		switch n := r.IntN(9); {
		case n == 0:
			return nil
		case n == 1:
			return r.IntN(2) == 0
		case n == 2:
			return plainStrings[r.IntN(len(plainStrings))]
		case n == 3:
			return math.Float64frombits(r.Uint64()) // any float, NaN and infinities aside below
		case n == 4:
			return []float64{0, math.Copysign(0, -1), 1e-6, 9.99999e-7, 1e21, 1e20, 123456789, 0.1, -2.5e-300, 5e-324, math.MaxFloat64}[r.IntN(11)]
		case n <= 6 && depth < 4:
			m := map[string]any{}
			for range r.IntN(12) {
				m[plainStrings[r.IntN(len(plainStrings))]+strconv.Itoa(r.IntN(30))] = value(depth + 1)
			}
			return m
		case depth < 4:
			var l []any
			if r.IntN(5) > 0 {
				l = []any{}
			}
			for range r.IntN(5) {
				l = append(l, value(depth+1))
			}
			return l
		}
		return "leaf"
	}
	for range 3000 {
		sc, meta := value(0), value(1)
		m, _ := meta.(map[string]any)
		res := &mcp.CallToolResult{Meta: m, Content: []mcp.Content{&mcp.TextContent{Text: "t"}}, StructuredContent: sc}
		if _, err := json.Marshal(res); err != nil {
			continue // a NaN or an infinity somewhere: encoding/json refuses it, and so is it left
		}
		plainAsTheSDK(t, res, true)
	}
	for _, sc := range []any{map[string]any(nil), []any(nil), mcp.Meta{"k": 1.5}, map[string]any{"x": map[string]any{}}} {
		plainAsTheSDK(t, &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: sc}, true)
	}
	plainAsTheSDK(t, &mcp.CallToolResult{StructuredContent: "no content"}, true)
	deep := any("bottom")
	for range plainDepth + 1 {
		deep = []any{deep}
	}
	for _, sc := range []any{1, int64(2), float32(1.5), []string{"a"}, map[string]string{"a": "b"}, json.RawMessage(`{"a":1}`), json.Number("1"),
		map[string]any{"a": []int{1}}, []any{struct{}{}}, deep} {
		plainAsTheSDK(t, &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: sc}, false)
	}
}

// FuzzPlainValueEncodesAsTheSDK: whatever JSON an upstream puts in structuredContent and _meta,
// read as the gateway reads a result (the SDK's decoder) or as encoding/json reads it, is
// encoded as encoding/json encodes it.
func FuzzPlainValueEncodesAsTheSDK(f *testing.F) {
	for _, s := range []string{`{"target":"shelf","speed":0.5}`, `[1,-0,1e21,1e-7,123456789012345678901234567890,0.000001]`,
		`{"b":{"z":[],"a":{}},"a":"<&>\u2028\ud800"}`, `"x"`, `null`, `true`, `{"":"","\u0000":1}`, `{"a":1,"a":2}`} {
		f.Add(s, `{"k":"v"}`)
	}
	f.Fuzz(func(t *testing.T, sc, meta string) {
		for _, decode := range []func([]byte, any) error{
			func(b []byte, v any) error {
				_, err := segjson.Parse(b, v, segjson.DontMatchCaseInsensitiveStructFields)
				return err
			},
			json.Unmarshal,
		} {
			var v any
			var m map[string]any
			if decode([]byte(sc), &v) != nil || decode([]byte(meta), &m) != nil {
				continue
			}
			res := &mcp.CallToolResult{Meta: m, Content: []mcp.Content{&mcp.TextContent{Text: sc}}, StructuredContent: v}
			plainAsTheSDK(t, res, true)
		}
	})
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
		if read.InputRequests != nil || read.RequestState != "" {
			return
		}
		if _, err := json.Marshal(&read); err != nil {
			return // nor one it can write
		}
		plainAsTheSDK(t, &read, true)
	})
}

// BenchmarkResultEncoding: results by appendPlainResult and by encoding/json: the shared bench
// echo server's (text, and the server's _meta), and this package's echo tool's (text that
// needs escapes, and structured content).
func BenchmarkResultEncoding(b *testing.B) {
	for _, wire := range []struct{ name, json string }{
		{"text", `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echo-server","version":"0.1.0"}},"content":[{"type":"text","text":"Echo: 0123456789abcdef"}],"resultType":"complete"}`},
		{"structured", `{"content":[{"type":"text","text":"{\"target\":\"shelf\",\"speed\":0.5}"}],"structuredContent":{"target":"shelf","speed":0.5}}`},
	} {
		res := new(mcp.CallToolResult)
		if err := json.Unmarshal([]byte(wire.json), res); err != nil {
			b.Fatal(err)
		}
		for _, bc := range []struct {
			name string
			enc  func(*bytes.Buffer)
		}{
			{"plain", func(buf *bytes.Buffer) { appendPlainResult(buf, res) }},
			{"encoding-json", func(buf *bytes.Buffer) { _ = wirejson.Append(buf, res) }},
		} {
			b.Run(wire.name+"/"+bc.name, func(b *testing.B) {
				b.ReportAllocs()
				var buf bytes.Buffer
				for b.Loop() {
					buf.Reset()
					bc.enc(&buf)
				}
			})
		}
	}
}

// FuzzAppendIDEncodesAsTheSDK: an answer's id is written as wirejson.Append writes id.Raw(),
// for any id a client can send: a whole number, or any string; the zero ID as null.
func FuzzAppendIDEncodesAsTheSDK(f *testing.F) {
	for _, s := range append([]string{"7", "-1", "9007199254740993", "1125899906842625"}, plainStrings...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		zero := bytes.NewBufferString("x")
		if appendID(zero, jsonrpc.ID{}); zero.String() != "xnull" {
			t.Fatalf("appendID of the zero ID wrote %s, want null", zero.String()[1:])
		}
		ids := []any{s}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			ids = append(ids, float64(n)) // as a JSON number is read
		}
		for _, raw := range ids {
			id, err := jsonrpc.MakeID(raw)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := wirejson.Append(&want, id.Raw()); err != nil {
				t.Fatal(err)
			}
			got := bytes.NewBufferString("x")
			appendID(got, id)
			if got.String()[1:] != want.String() {
				t.Fatalf("appendID(%#v) wrote %s, wirejson.Append %s", raw, got.String()[1:], want.String())
			}
		}
	})
}
