package upstream

//lint:file-ignore SA1019 the log level a client set is in a call's _meta (logging is deprecated from MCP 2026-07-28 on but still part of the protocol), and the encoder writes it as the SDK does.

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// appendCallParams appends the JSON of p as wirejson.Marshal writes it (encoding/json's bytes,
// HTML not escaped), without reflection over the params and their _meta map: fields in the
// struct's order, omitempty as tagged, _meta's keys sorted, a json.RawMessage compacted. A
// value it does not know (anything in _meta but strings, raw JSON and the session's
// capabilities; arguments that are not raw JSON; input responses) is encoded by
// wirejson.Marshal, and anything that encoder would refuse is left to it whole, so that its
// error is the SDK path's. TestFastPathMatchesTheSDK holds the bytes to the SDK's.
func appendCallParams(b []byte, p *mcp.CallToolParams) ([]byte, error) {
	if len(p.InputResponses) > 0 {
		return marshalAppend(b, p)
	}
	start := len(b)
	raw, _ := p.Arguments.(json.RawMessage)
	b = slices.Grow(b, 320+len(raw)+len(p.RequestState)) // _meta as a session's calls carry it
	b = append(b, '{')
	if len(p.Meta) > 0 {
		b = append(b, `"_meta":{`...)
		var keys [8]string
		ks := keys[:0]
		for k := range p.Meta {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for i, k := range ks {
			if i > 0 {
				b = append(b, ',')
			}
			b = wirejson.AppendString(b, k, false)
			b = append(b, ':')
			var ok bool
			if b, ok = appendMetaValue(b, p.Meta[k]); !ok {
				return marshalAppend(b[:start], p)
			}
		}
		b = append(b, "},"...)
	}
	b = append(b, `"name":`...)
	b = wirejson.AppendString(b, p.Name, false)
	switch a := p.Arguments.(type) {
	case nil:
	case json.RawMessage:
		if len(a) == 0 {
			return marshalAppend(b[:start], p)
		}
		b = append(b, `,"arguments":`...)
		var ok bool
		if b, ok = appendCompact(b, a); !ok {
			return marshalAppend(b[:start], p)
		}
	case map[string]any:
		if a == nil || len(a) > 0 {
			return marshalAppend(b[:start], p)
		}
		b = append(b, `,"arguments":{}`...)
	default:
		return marshalAppend(b[:start], p)
	}
	if p.RequestState != "" {
		b = append(b, `,"requestState":`...)
		b = wirejson.AppendString(b, p.RequestState, false)
	}
	return append(b, '}'), nil
}

// appendMetaValue appends one value of a request's _meta; false when it is left to
// wirejson.Marshal with the rest.
func appendMetaValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return wirejson.AppendString(b, v, false), true
	case mcp.LoggingLevel:
		return wirejson.AppendString(b, string(v), false), true
	case json.RawMessage:
		if len(v) == 0 {
			return b, false
		}
		return appendCompact(b, v)
	case *mcp.ClientCapabilities:
		if v != nil {
			return appendCached(b, v)
		}
	case *mcp.Implementation:
		if v != nil {
			return appendCached(b, v)
		}
	}
	return b, false
}

// appendCached appends cachedJSON's encoding of v.
func appendCached(b []byte, v any) ([]byte, bool) {
	enc, ok := cachedJSON(v)
	return append(b, enc...), ok
}

// appendCompact appends raw with its insignificant spaces removed, as encoding/json writes a
// json.RawMessage; false when raw is not valid JSON, or holds U+2028 or U+2029, which the
// encoding/json built on encoding/json/v2 escapes there and json.Compact does not.
func appendCompact(b []byte, raw json.RawMessage) ([]byte, bool) {
	if bytes.Contains(raw, lineSep) || bytes.Contains(raw, paraSep) {
		return b, false
	}
	buf := bytes.NewBuffer(b)
	if json.Compact(buf, raw) != nil {
		return b, false
	}
	return buf.Bytes(), true
}

var lineSep, paraSep = []byte("\u2028"), []byte("\u2029")

// marshalAppend appends wirejson.Marshal's encoding of p to b.
func marshalAppend(b []byte, p *mcp.CallToolParams) ([]byte, error) {
	enc, err := wirejson.Marshal(p)
	if err != nil {
		return b, err
	}
	return append(b, enc...), nil
}

// The encodings of the values every call of a session carries in its _meta: the capabilities
// the downstream client declared at initialization (*mcp.ClientCapabilities) and, on MCP
// 2026-07-28, the gateway's own implementation (*mcp.Implementation); nothing changes either
// after. Held by pointer, which keeps each value alive while it is held, so that an address
// is never another value's. What it may hold on to after its sessions ended is bounded: at
// most cachedJSONSize values (the default max_sessions), emptied when full, and only values
// whose encoding takes at most cachedJSONMax bytes; a larger one is encoded for each call, as
// before.
var jsonCache struct {
	sync.Mutex
	m map[any][]byte
}

const (
	cachedJSONSize = 256
	cachedJSONMax  = 512
)

// cachedJSON is wirejson.Marshal's encoding of v, a pointer, from the cache when v was encoded
// before.
func cachedJSON(v any) ([]byte, bool) {
	jsonCache.Lock()
	enc, ok := jsonCache.m[v]
	jsonCache.Unlock()
	if ok {
		return enc, true
	}
	enc, err := wirejson.Marshal(v)
	if err != nil {
		return nil, false
	}
	if len(enc) > cachedJSONMax {
		return enc, true
	}
	jsonCache.Lock()
	if jsonCache.m == nil || len(jsonCache.m) >= cachedJSONSize {
		jsonCache.m = make(map[any][]byte, cachedJSONSize)
	}
	jsonCache.m[v] = enc
	jsonCache.Unlock()
	return enc, true
}
