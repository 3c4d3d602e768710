package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/msgline"
)

// What connect reads and writes on the wire besides whole messages: the HTTP headers of MCP
// 2026-07-28, event streams, lines.

// metaVersion is the protocol version in a request's _meta (MCP 2026-07-28), or "".
func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v)
	return v
}

// toolParams is what the headers need of a tools/call.
type toolParams struct {
	Name      string                     `json:"name"`
	Arguments map[string]json.RawMessage `json:"arguments"`
}

// requestName is the value of Mcp-Name for the methods that have one: the tool, the prompt, the
// resource's URI.
func requestName(m *envelope) (string, bool) {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return "", false
	}
	switch m.Method {
	case "tools/call", "prompts/get":
		return p.Name, true
	case "resources/read":
		return p.URI, true
	}
	return "", false
}

// validHeaderValue: an HTTP client refuses a header value with control characters, which
// would read as the gateway being unreachable; such a header is left out, and the gateway
// says what is missing.
func validHeaderValue(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f })
}

// paramBinding is an argument that a tool's input schema marks with x-mcp-header: from MCP
// 2026-07-28 on, a call carries its value in the header Mcp-Param-<header> too.
type paramBinding struct {
	path   []string
	header string
}

// paramBindings are the x-mcp-header annotations of an input schema, at any depth of
// properties.
func paramBindings(schema json.RawMessage) []paramBinding {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	return collectBindings(s.Properties, nil, nil)
}

func collectBindings(props map[string]json.RawMessage, prefix []string, out []paramBinding) []paramBinding {
	for name, raw := range props {
		var p struct {
			Header     json.RawMessage            `json:"x-mcp-header"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(raw, &p) != nil {
			continue
		}
		path := append(slices.Clone(prefix), name)
		var header string
		if json.Unmarshal(p.Header, &header) == nil && header != "" {
			out = append(out, paramBinding{path: path, header: header})
		}
		out = collectBindings(p.Properties, path, out)
	}
	return out
}

// paramHeaders are the Mcp-Param-* headers of a call's arguments, encoded as SEP-2243 says:
// strings, booleans and safe integers only; a value that is not plain printable ASCII, or
// that looks encoded, in base64 between =?base64? and ?=.
func paramHeaders(bindings []paramBinding, args map[string]json.RawMessage) map[string]string {
	if len(bindings) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, b := range bindings {
		raw, ok := lookupArgument(args, b.path)
		if !ok {
			continue
		}
		if v, ok := headerValue(raw); ok {
			out["Mcp-Param-"+b.header] = v
		}
	}
	return out
}

func lookupArgument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur, ok := args[path[0]]
	for _, part := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		cur, ok = obj[part]
	}
	return cur, ok && string(cur) != "null"
}

func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case float64:
		const safe = 1<<53 - 1
		if v != math.Trunc(v) || math.Abs(v) > safe {
			return "", false
		}
		s = strconv.FormatInt(int64(v), 10)
	default:
		return "", false
	}
	const pre, post = "=?base64?", "?="
	plain := !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) &&
		(s == "" || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')) &&
		!(strings.HasPrefix(s, pre) && strings.HasSuffix(s, post))
	if plain {
		return s, true
	}
	return pre + base64.StdEncoding.EncodeToString([]byte(s)) + post, true
}

// refusalReason is the gateway's reason in the body of a refusal: the error member of its JSON
// (the admin API's form, or a JSON-RPC error's message), or the text.
func refusalReason(data []byte) string {
	var r struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &r) == nil && len(r.Error) > 0 {
		var s string
		if json.Unmarshal(r.Error, &s) == nil {
			return s
		}
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(r.Error, &e) == nil && e.Message != "" {
			return e.Message
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "no reason given"
	}
	return s
}

// errTooLarge: a line or an event longer than the bound.
var errTooLarge = errors.New("message too large")

// readAtMost reads r to its end, failing with errTooLarge past limit bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err == nil && int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, err
}

// readLine reads one line without its line ending. A line over limit is read to its end and
// dropped (errTooLarge). The last line of the input may come with io.EOF.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	line, tooLong, err := msgline.Read(br, int64(limit))
	if tooLong {
		return nil, errTooLarge
	}
	return line, err
}

// readEvents reads a text/event-stream body and hands the data of each message event to each
// until it returns false (then nil) or the body ends (io.EOF, or the error that ended it).
// Event ids and retry hints are not kept: the gateway keeps no event store, so its streams
// cannot be resumed.
func readEvents(r io.Reader, each func(data []byte) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data []byte
	var name string
	hasData := false
	for {
		line, err := readLine(br, maxMessage)
		if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
			return err
		}
		if len(line) == 0 {
			if hasData && (name == "" || name == "message") && !each(data) {
				return nil
			}
			data, name, hasData = nil, "", false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, value...), true
			if len(data) > maxMessage {
				return errTooLarge
			}
		case "event":
			name = string(value)
		}
	}
}
