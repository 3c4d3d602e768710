package upstream

//lint:file-ignore SA1019 a tool result may hold sampling's tool_use and tool_result content, deprecated from MCP 2026-07-28 on; the SDK decodes them in results, and so must this file.

import (
	"errors"
	"io"
	"sync"

	segjson "github.com/segmentio/encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/strictjson"
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
	if res, ok := plainTextResult(data); ok {
		return res, nil
	}
	if tooDeep(data, sdkMaxDepth) {
		return decodeBySDK(data) // for the SDK's error
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

// rawKey is plainString without the copy: the bytes of the key, for comparing.
func rawKey(b []byte) (key, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
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

// plainTextResult decodes the result most tools return, text content, without the reflection
// of the SDK's JSON library: an object of "content", a list of blocks that each have a "type"
// of "text" and a "text", and perhaps "isError" (true or false), a plain "_meta" (wireMeta),
// "resultType" ("complete" or "input_required"), "requestState" and "structuredContent" (whose
// value alone goes to the SDK's library, as the whole result did). Decoding a whole text result
// through that library costs a microsecond or more and a dozen allocations a call. ok is false
// for anything else, and for anything this pass might not read exactly as that library does (a
// member twice, an escape that is half a surrogate pair, bytes that are not UTF-8, a control
// character, an unknown member): decodeCallToolResult then decodes it as before.
func plainTextResult(data []byte) (*mcp.CallToolResult, bool) {
	b := skipSpace(data)
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var (
		content                             []mcp.Content
		isError                             bool
		meta                                map[string]any
		structured                          any
		resultType, requestState            string
		seenContent, seenIsError, seenMeta  bool
		seenStructured, seenType, seenState bool
	)
	once := func(seen *bool) bool {
		if *seen {
			return false
		}
		*seen = true
		return true
	}
	b = skipSpace(b[1:])
	for {
		key, rest, ok := rawKey(b)
		if !ok {
			return nil, false // also {}: the SDK's library says what a result without content is
		}
		if b = skipSpace(rest); len(b) == 0 || b[0] != ':' {
			return nil, false
		}
		b = skipSpace(b[1:])
		switch string(key) {
		case "content":
			if !once(&seenContent) {
				return nil, false
			}
			if content, b, ok = textBlocks(b); !ok {
				return nil, false
			}
		case "isError":
			if !once(&seenIsError) {
				return nil, false
			}
			switch {
			case len(b) >= 4 && string(b[:4]) == "true":
				isError, b = true, b[4:]
			case len(b) >= 5 && string(b[:5]) == "false":
				b = b[5:]
			default:
				return nil, false
			}
		case "_meta":
			if !once(&seenMeta) {
				return nil, false
			}
			if meta, b, ok = plainObject(b, 0); !ok {
				return nil, false
			}
		case "structuredContent":
			if !once(&seenStructured) {
				return nil, false
			}
			if !shallow(b, plainStructuredDepth) {
				return nil, false
			}
			var v any // here, so that only a result with structured content puts it on the heap
			var err error
			if b, err = segjson.Parse(b, &v, sdkParseFlags); err != nil {
				return nil, false
			}
			structured = v
		case "resultType":
			if !once(&seenType) {
				return nil, false
			}
			if resultType, b, ok = strictjson.String(b); !ok || (resultType != "complete" && resultType != "input_required") {
				return nil, false
			}
		case "requestState":
			if !once(&seenState) {
				return nil, false
			}
			if requestState, b, ok = strictjson.String(b); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
		if b = skipSpace(b); len(b) == 0 {
			return nil, false
		}
		if b[0] == ',' {
			b = skipSpace(b[1:])
			continue
		}
		if b[0] != '}' || !seenContent || len(skipSpace(b[1:])) != 0 {
			return nil, false
		}
		break
	}
	res := new(mcp.CallToolResult)
	if resultType != "" {
		// The result type is kept in a field of the SDK's own (wireResult.result).
		*res = resultTypes(resultType)
	}
	res.Meta = meta
	res.Content = content
	res.StructuredContent = structured
	res.IsError = isError
	res.RequestState = requestState
	return res, true
}

// sdkMaxDepth is the nesting the SDK refuses a message beyond, before it decodes it; its JSON
// library has no bound of its own.
const sdkMaxDepth = 1000

// tooDeep reports whether data nests more than limit arrays and objects, counted as the SDK
// counts them: over all of data, brackets in strings left out.
func tooDeep(data []byte, limit int) bool {
	depth, inStr, esc := 0, false, false
	for _, c := range data {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// plainStructuredDepth bounds the nesting of the structured content plainTextResult hands to
// the SDK's library alone: the SDK refuses a result nested deeper than 1000 levels before it
// decodes it, and the library by itself has no bound.
const plainStructuredDepth = 512

// shallow reports whether the JSON value at the start of b nests at most limit arrays and
// objects deep. It reads only up to where the value ends (or up to limit+1 levels).
func shallow(b []byte, limit int) bool {
	depth, inStr := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			if depth++; depth > limit {
				return false
			}
		case ']', '}':
			if depth--; depth <= 0 {
				return true
			}
		case ',':
			if depth == 0 {
				return true
			}
		}
	}
	return true
}

// textBlocks decodes a list of text blocks ({"type":"text","text":...}, in either order, both
// there) at the start of b; never an empty nil list, as the SDK's.
func textBlocks(b []byte) (out []mcp.Content, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '[' {
		return nil, nil, false
	}
	b = skipSpace(b[1:])
	out = make([]mcp.Content, 0, 1)
	if len(b) > 0 && b[0] == ']' {
		return out, b[1:], true
	}
	for {
		if len(b) == 0 || b[0] != '{' {
			return nil, nil, false
		}
		b = skipSpace(b[1:])
		var typed, texted bool
		var text string
		for {
			var key []byte
			if key, b, ok = rawKey(b); !ok {
				return nil, nil, false
			}
			if b = skipSpace(b); len(b) == 0 || b[0] != ':' {
				return nil, nil, false
			}
			b = skipSpace(b[1:])
			switch {
			case string(key) == "type" && !typed:
				typed = true
				if len(b) < 6 || string(b[:6]) != `"text"` {
					return nil, nil, false
				}
				b = b[6:]
			case string(key) == "text" && !texted:
				texted = true
				if text, b, ok = strictjson.String(b); !ok {
					return nil, nil, false
				}
			default:
				return nil, nil, false
			}
			if b = skipSpace(b); len(b) == 0 {
				return nil, nil, false
			}
			if b[0] == ',' {
				b = skipSpace(b[1:])
				continue
			}
			if b[0] != '}' || !typed || !texted {
				return nil, nil, false
			}
			b = skipSpace(b[1:])
			break
		}
		out = append(out, &mcp.TextContent{Text: text})
		if len(b) == 0 {
			return nil, nil, false
		}
		switch b[0] {
		case ',':
			b = skipSpace(b[1:])
		case ']':
			return out, b[1:], true
		default:
			return nil, nil, false
		}
	}
}
