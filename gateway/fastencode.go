package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// appendPlainResult writes res as encoding/json writes it through the SDK's MarshalJSON
// methods, for the result most tools return: text content only, with at most its _meta,
// isError and resultType (which a server of MCP 2025-11-25 or later sets) besides. It reports
// false, having written nothing, for any other result, which the caller encodes with
// encoding/json. The SDK's MarshalJSON of the result and of each text block call json.Marshal,
// so their strings are HTML-escaped even inside an encoder that does not escape;
// appendMarshaledString writes them so, and _meta is encoded by json.Marshal itself.
// TestPlainResultEncodesAsTheSDK holds the bytes to encoding/json's.
func appendPlainResult(b *bytes.Buffer, res *mcp.CallToolResult) bool {
	rt := resultTypeOf(res)
	if res.StructuredContent != nil || res.InputRequests != nil || res.RequestState != "" || rt == "?" {
		return false
	}
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok || t == nil || len(t.Meta) != 0 || t.Annotations != nil {
			return false
		}
	}
	var meta []byte
	if len(res.Meta) != 0 {
		var err error
		if meta, err = json.Marshal(res.Meta); err != nil {
			return false
		}
	}
	b.WriteByte('{')
	if meta != nil {
		b.WriteString(`"_meta":`)
		b.Write(meta)
		b.WriteByte(',')
	}
	b.WriteString(`"content":[`)
	for i, c := range res.Content {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":`)
		appendMarshaledString(b, c.(*mcp.TextContent).Text)
		b.WriteByte('}')
	}
	b.WriteByte(']')
	if res.IsError {
		b.WriteString(`,"isError":true`)
	}
	if rt != "" {
		b.WriteString(`,"resultType":`)
		appendMarshaledString(b, rt)
	}
	b.WriteByte('}')
	return true
}

// resultTypeField is the index of CallToolResult's unexported resultType, which its
// MarshalJSON writes as "resultType" when set (a result read from a server of MCP 2026-07-28
// or later, or one asking for input); -1 if this SDK has no such field, and then no result is
// taken as plain.
var resultTypeField = func() int {
	f, ok := reflect.TypeFor[mcp.CallToolResult]().FieldByName("resultType")
	if !ok || f.Type.Kind() != reflect.String || len(f.Index) != 1 {
		return -1
	}
	return f.Index[0]
}()

// resultTypeOf is res's resultType, read (never written) through reflection; "?" when it
// cannot be read.
func resultTypeOf(res *mcp.CallToolResult) string {
	if resultTypeField < 0 {
		return "?"
	}
	return reflect.ValueOf(res).Elem().Field(resultTypeField).String()
}

// appendMarshaledString writes s as json.Marshal does: quoted, with <, > and & escaped. A
// string of printable ASCII needing no escape is copied; any other is left to json.Marshal.
func appendMarshaledString(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			b.Write(q)
			return
		}
	}
	b.WriteByte('"')
	b.WriteString(s)
	b.WriteByte('"')
}
