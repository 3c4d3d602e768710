package gateway

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// appendPlainResult writes res as encoding/json writes it through the SDK's MarshalJSON
// methods, for the result most tools return: text content only, with at most its _meta, its
// structured content, isError and resultType (which a server of MCP 2025-11-25 or later sets)
// besides, where _meta and structured content hold only what a JSON decoder makes (maps of
// string keys, slices, strings, float64 numbers, booleans, nil). It reports false, having
// written nothing, for any other result, which the caller encodes with encoding/json. The SDK's
// MarshalJSON of the result and of each text block call json.Marshal, so their strings are
// HTML-escaped even inside an encoder that does not escape, and so they are written here.
// TestPlainResultEncodesAsTheSDK and FuzzPlainValueEncodesAsTheSDK hold the bytes to
// encoding/json's.
func appendPlainResult(b *bytes.Buffer, res *mcp.CallToolResult) bool {
	rt := resultTypeOf(res)
	if res.InputRequests != nil || res.RequestState != "" || rt == "?" {
		return false
	}
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok || t == nil || len(t.Meta) != 0 || t.Annotations != nil {
			return false
		}
	}
	out := b.AvailableBuffer()
	out = append(out, '{')
	if len(res.Meta) != 0 {
		var ok bool
		out = append(out, `"_meta":`...)
		if out, ok = appendPlainMap(out, res.Meta, 0); !ok {
			return false
		}
		out = append(out, ',')
	}
	out = append(out, `"content":`...)
	if res.Content == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, '[')
	}
	for i, c := range res.Content {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"text","text":`...)
		out = wirejson.AppendString(out, c.(*mcp.TextContent).Text, true)
		out = append(out, '}')
	}
	if res.Content != nil {
		out = append(out, ']')
	}
	if res.StructuredContent != nil {
		var ok bool
		out = append(out, `,"structuredContent":`...)
		if out, ok = appendPlainValue(out, res.StructuredContent, 0); !ok {
			return false
		}
	}
	if res.IsError {
		out = append(out, `,"isError":true`...)
	}
	if rt != "" {
		out = append(out, `,"resultType":`...)
		out = wirejson.AppendString(out, rt, true)
	}
	out = append(out, '}')
	b.Write(out)
	return true
}

// plainDepth bounds how deep appendPlainValue goes into maps and slices; a deeper value is
// left to encoding/json.
const plainDepth = 256

// appendPlainValue appends v as json.Marshal encodes it, if v is made only of what a JSON
// decoder makes into an any (map[string]any, []any, string, float64, bool, nil; also mcp.Meta)
// and at most plainDepth deep; ok is false for anything else, and then b holds part of it.
func appendPlainValue(b []byte, v any, depth int) (_ []byte, ok bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return wirejson.AppendString(b, v, true), true
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return b, false // encoding/json refuses it, with its error
		}
		return wirejson.AppendFloat(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case map[string]any:
		return appendPlainMap(b, v, depth)
	case mcp.Meta:
		return appendPlainMap(b, v, depth)
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= plainDepth {
			return b, false
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendPlainValue(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// appendPlainMap is appendPlainValue of a map: its keys sorted, as encoding/json sorts them.
func appendPlainMap(b []byte, m map[string]any, depth int) (_ []byte, ok bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	if depth >= plainDepth {
		return b, false
	}
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = wirejson.AppendString(b, k, true)
		b = append(b, ':')
		if b, ok = appendPlainValue(b, m[k], depth+1); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
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

// appendID writes a JSON-RPC id as wirejson.Append writes id.Raw(), which is an int64, a string
// or, for the zero ID (a notification's), nil: a number, a string without HTML escapes, or null.
func appendID(b *bytes.Buffer, id jsonrpc.ID) {
	switch v := id.Raw().(type) {
	case int64:
		b.Write(strconv.AppendInt(b.AvailableBuffer(), v, 10))
	case string:
		b.Write(wirejson.AppendString(b.AvailableBuffer(), v, false))
	default:
		b.WriteString("null")
	}
}
