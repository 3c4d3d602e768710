package upstream

//lint:file-ignore SA1019 a tool result may hold sampling's tool_use and tool_result content, deprecated from MCP 2026-07-28 on; the SDK decodes them in results, and so must this file.

import (
	"errors"
	"io"
	"sync"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/call result is decoded once, into the same *mcp.CallToolResult the SDK's client
// session returns. It is decoded by the JSON library the SDK decodes with, with the one option
// the SDK sets (struct fields matched by their exact name), into types whose fields, names and
// types are those of the SDK's wire form of a result; so every value is read as the SDK reads
// it, numbers and strings and _meta alike. What is the gateway's own is only turning the wire
// form into content blocks, for the content types the SDK knows. What the SDK reads through a
// decoder of its own, or reports as an error, is left to the SDK (decodeBySDK): a result that is
// not an object, one with input requests, a content block that is not one of those types, any
// error; there the SDK's answer, error included, is the one given.

// sdkParseFlags are the SDK's decoding options.
const sdkParseFlags = segjson.DontMatchCaseInsensitiveStructFields

// wireResult is a CallToolResult as it is on the wire.
type wireResult struct {
	Meta              wireMeta            `json:"_meta"`
	Content           []*wireBlock        `json:"content"`
	StructuredContent any                 `json:"structuredContent"`
	IsError           bool                `json:"isError"`
	InputRequests     mcp.InputRequestMap `json:"inputRequests"`
	RequestState      string              `json:"requestState"`
	ResultType        string              `json:"resultType"`
}

// wireBlock is one content block on the wire: the members of every content type, told apart
// by Type.
type wireBlock struct {
	Type              string                `json:"type"`
	Text              string                `json:"text"`
	MIMEType          string                `json:"mimeType"`
	Data              []byte                `json:"data"`
	Resource          *mcp.ResourceContents `json:"resource"`
	URI               string                `json:"uri"`
	Name              string                `json:"name"`
	Title             string                `json:"title"`
	Description       string                `json:"description"`
	Size              *int64                `json:"size"`
	Meta              mcp.Meta              `json:"_meta"`
	Annotations       *mcp.Annotations      `json:"annotations"`
	Icons             []mcp.Icon            `json:"icons"`
	ID                string                `json:"id"`
	Input             map[string]any        `json:"input"`
	ToolUseID         string                `json:"toolUseId"`
	NestedContent     []*wireBlock          `json:"content"`
	StructuredContent any                   `json:"structuredContent"`
	IsError           bool                  `json:"isError"`
}

// decodeCallToolResult decodes a tools/call result as the SDK's client session does.
func decodeCallToolResult(data []byte) (*mcp.CallToolResult, error) {
	if first := firstByte(data); first != '{' {
		return decodeBySDK(data)
	}
	var w wireResult
	if _, err := segjson.Parse(data, &w, sdkParseFlags); err != nil || w.InputRequests != nil {
		return decodeBySDK(data)
	}
	res, ok := w.result()
	if !ok {
		return decodeBySDK(data)
	}
	return res, nil
}

// decodeBySDK decodes data as the SDK reads a result: through its decoder, which for a
// CallToolResult is the result's own UnmarshalJSON.
func decodeBySDK(data []byte) (*mcp.CallToolResult, error) {
	if firstByte(data) == 0 {
		return nil, io.EOF // what the SDK's stream decoder says of no result at all
	}
	res := new(mcp.CallToolResult)
	if _, err := segjson.Parse(data, res, sdkParseFlags); err != nil {
		return nil, err
	}
	return res, nil
}

func firstByte(data []byte) byte {
	if data = skipSpace(data); len(data) == 0 {
		return 0
	}
	return data[0]
}

// result turns the wire form into the SDK's; ok is false for what is left to the SDK.
func (w *wireResult) result() (*mcp.CallToolResult, bool) {
	res := new(mcp.CallToolResult)
	switch w.ResultType {
	case "":
	case "complete", "input_required":
		// The result type is kept in a field of the SDK's own: the one way to set it is to have
		// the SDK decode it, done once per value.
		*res = resultTypes(w.ResultType)
	default:
		return nil, false
	}
	content, ok := blocks(w.Content, false)
	if !ok {
		return nil, false
	}
	res.Meta = mcp.Meta(w.Meta)
	res.Content = content
	res.StructuredContent = w.StructuredContent
	res.IsError = w.IsError
	res.RequestState = w.RequestState
	return res, true
}

var resultTypeTemplates = sync.OnceValue(func() map[string]mcp.CallToolResult {
	m := map[string]mcp.CallToolResult{}
	for _, rt := range []string{"complete", "input_required"} {
		var r mcp.CallToolResult
		if err := r.UnmarshalJSON([]byte(`{"resultType":"` + rt + `"}`)); err != nil {
			panic(err) // the SDK no longer reads its own result types
		}
		m[rt] = r
	}
	return m
})

// wireMeta is a result's _meta. The SDK's decoder makes every map[string]any it decodes with
// room for 64 members (about 5 KB, zeroed), and the _meta of every result of a server of MCP
// 2025-11-25 or later holds two (the server's name and version); a _meta of only objects and
// strings of printable ASCII without escapes, at most plainMetaDepth deep, is decoded here,
// into maps of its size, to the same values. Any other _meta (one of other values, a deeper
// one, a second _meta in the same result) makes the whole result the SDK decoder's
// (decodeCallToolResult), limits and errors included.
type wireMeta map[string]any

// errNotPlainMeta sends a result to the SDK's decoder.
var errNotPlainMeta = errors.New("a _meta the SDK's decoder reads")

func (m *wireMeta) UnmarshalJSON(data []byte) error {
	if *m != nil {
		return errNotPlainMeta
	}
	if string(data) == "null" {
		return nil
	}
	v, rest, ok := plainObject(data, 0)
	if !ok || len(skipSpace(rest)) != 0 {
		return errNotPlainMeta
	}
	*m = v
	return nil
}

// plainMetaDepth bounds the objects plainObject takes inside one another; a deeper _meta is
// the SDK's decoder's, with its own limit and error.
const plainMetaDepth = 16

// plainObject decodes the JSON object at the start of b, of members whose values are plain
// strings or such objects, at most plainMetaDepth deep counting from depth; ok is false for
// anything else.
func plainObject(b []byte, depth int) (obj map[string]any, rest []byte, ok bool) {
	b = skipSpace(b)
	if len(b) == 0 || b[0] != '{' || depth >= plainMetaDepth {
		return nil, nil, false
	}
	obj = make(map[string]any, 2)
	b = skipSpace(b[1:])
	if len(b) > 0 && b[0] == '}' {
		return obj, b[1:], true
	}
	for {
		var key string
		if key, b, ok = plainString(b); !ok {
			return nil, nil, false
		}
		if b = skipSpace(b); len(b) == 0 || b[0] != ':' {
			return nil, nil, false
		}
		b = skipSpace(b[1:])
		if len(b) == 0 {
			return nil, nil, false
		}
		switch b[0] {
		case '"':
			var v string
			if v, b, ok = plainString(b); !ok {
				return nil, nil, false
			}
			obj[key] = v
		case '{':
			var v map[string]any
			if v, b, ok = plainObject(b, depth+1); !ok {
				return nil, nil, false
			}
			obj[key] = v
		default:
			return nil, nil, false
		}
		if b = skipSpace(b); len(b) == 0 {
			return nil, nil, false
		}
		switch b[0] {
		case ',':
			b = skipSpace(b[1:])
		case '}':
			return obj, b[1:], true
		default:
			return nil, nil, false
		}
	}
}

// plainString decodes the string at the start of b if it is printable ASCII without escapes.
func plainString(b []byte) (s string, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return string(b[1:i]), b[i+1:], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", nil, false
		}
	}
	return "", nil, false
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

// resultTypes is an empty result of result type rt, as the SDK decodes it.
func resultTypes(rt string) mcp.CallToolResult { return resultTypeTemplates()[rt] }

// blocks turns wire content blocks into the SDK's: never nil, as the SDK's. A nested list (of
// a tool_result block) takes only the types a tool result holds.
func blocks(wires []*wireBlock, nested bool) ([]mcp.Content, bool) {
	out := make([]mcp.Content, 0, len(wires))
	for _, w := range wires {
		if w == nil {
			return nil, false
		}
		var c mcp.Content
		switch w.Type {
		case "text":
			c = &mcp.TextContent{Text: w.Text, Meta: w.Meta, Annotations: w.Annotations}
		case "image":
			c = &mcp.ImageContent{MIMEType: w.MIMEType, Data: w.Data, Meta: w.Meta, Annotations: w.Annotations}
		case "audio":
			c = &mcp.AudioContent{MIMEType: w.MIMEType, Data: w.Data, Meta: w.Meta, Annotations: w.Annotations}
		case "resource_link":
			c = &mcp.ResourceLink{URI: w.URI, Name: w.Name, Title: w.Title, Description: w.Description, MIMEType: w.MIMEType,
				Size: w.Size, Meta: w.Meta, Annotations: w.Annotations, Icons: w.Icons}
		case "resource":
			c = &mcp.EmbeddedResource{Resource: w.Resource, Meta: w.Meta, Annotations: w.Annotations}
		case "tool_use", "tool_result":
			if nested {
				return nil, false // not in a tool result: the SDK's error
			}
			if w.Type == "tool_use" {
				c = &mcp.ToolUseContent{ID: w.ID, Name: w.Name, Input: w.Input, Meta: w.Meta}
				break
			}
			tr := &mcp.ToolResultContent{ToolUseID: w.ToolUseID, StructuredContent: w.StructuredContent, IsError: w.IsError, Meta: w.Meta}
			if w.NestedContent != nil {
				var ok bool
				if tr.Content, ok = blocks(w.NestedContent, true); !ok {
					return nil, false
				}
			}
			c = tr
		default:
			return nil, false // unknown: the SDK's error
		}
		out = append(out, c)
	}
	return out, true
}
