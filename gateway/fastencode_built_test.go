package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// builder makes a value of the kinds a JSON decoder makes, from the fuzzer's bytes: any
// string (invalid UTF-8 and all), any float64 bit pattern, typed nils, mcp.Meta, nesting.
type builder struct{ b []byte }

func (x *builder) byte() byte {
	if len(x.b) == 0 {
		return 0
	}
	c := x.b[0]
	x.b = x.b[1:]
	return c
}

func (x *builder) str() string {
	n := int(x.byte() % 24)
	n = min(n, len(x.b))
	s := string(x.b[:n])
	x.b = x.b[n:]
	return s
}

func (x *builder) value(depth int) any {
	switch op := x.byte() % 12; {
	case op == 0:
		return nil
	case op == 1:
		return x.byte()%2 == 0
	case op == 2, op == 3:
		return x.str()
	case op == 4:
		var u [8]byte
		for i := range u {
			u[i] = x.byte()
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(u[:]))
	case op == 5:
		return float64(int8(x.byte())) * math.Pow(10, float64(int8(x.byte())%40))
	case op == 6 && depth < 6:
		n := int(x.byte() % 6)
		m := make(map[string]any, n)
		for range n {
			m[x.str()] = x.value(depth + 1)
		}
		if x.byte()%5 == 0 {
			return mcp.Meta(m)
		}
		return m
	case op == 7 && depth < 6:
		n := int(x.byte() % 6)
		l := []any{}
		for range n {
			l = append(l, x.value(depth+1))
		}
		return l
	case op == 8:
		return map[string]any(nil)
	case op == 9:
		return []any(nil)
	case op == 10:
		return mcp.Meta(nil)
	}
	return x.str()
}

// FuzzPlainBuiltValue: a result whose structured content and _meta the fuzzer builds
// directly (not through a decoder) encodes as encoding/json encodes it, or is declined with
// nothing written when encoding/json cannot encode it.
func FuzzPlainBuiltValue(f *testing.F) {
	f.Add([]byte{6, 3, 1, 0xff, 4, 0, 0, 0, 0, 0, 0, 0xf0, 0x7f})
	f.Add([]byte{6, 2, 2, 1, 0xfe, 1, 1, 2, 1, 0xff, 0})
	f.Add([]byte{7, 3, 5, 3, 30, 5, 0xff, 0xe0, 4, 0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		x := &builder{b: data}
		sc := x.value(0)
		meta, _ := x.value(1).(map[string]any)
		if mm, ok := sc.(mcp.Meta); ok && x.byte()%2 == 0 {
			meta = mm
		}
		res := &mcp.CallToolResult{Meta: meta, Content: []mcp.Content{&mcp.TextContent{Text: x.str()}}, StructuredContent: sc}
		var want bytes.Buffer
		wantErr := wirejson.Append(&want, res)
		got := bytes.NewBufferString("x")
		took := appendPlainResult(got, res)
		switch {
		case wantErr != nil:
			if took || got.String() != "x" {
				t.Fatalf("encoding/json refuses (%v), appendPlainResult took it: %q", wantErr, got.String())
			}
		case !took:
			if got.String() != "x" {
				t.Fatalf("declined but wrote %q", got.String())
			}
			// declining a value encoding/json encodes is allowed only past plainDepth
			b, _ := json.Marshal(sc)
			t.Logf("declined an encodable value %s", b)
		case got.String()[1:] != want.String():
			t.Fatalf("appendPlainResult wrote\n %q\nencoding/json writes\n %q", got.String()[1:], want.String())
		}
	})
}
