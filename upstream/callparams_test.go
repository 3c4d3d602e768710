package upstream

//lint:file-ignore SA1019 the params tested carry a log level and the capabilities of a client that samples, deprecated from MCP 2026-07-28 on but still part of the protocol.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/wirejson"
)

// TestAppendCallParamsIsMarshal: the params of a call encode to wirejson.Marshal's bytes, or
// fail with its error, whatever they hold, the cases it encodes itself and those it leaves to
// wirejson.Marshal alike.
func TestAppendCallParamsIsMarshal(t *testing.T) {
	caps := &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}
	impl := &mcp.Implementation{Name: "gw <&>", Version: "1"}
	metas := []mcp.Meta{
		nil,
		{},
		{mcp.MetaKeyClientCapabilities: noCapabilities},
		{mcp.MetaKeyClientCapabilities: caps, MetaKeyLogLevel: mcp.LoggingLevel("debug"), "progressToken": "p-1"},
		{mcp.MetaKeyClientCapabilities: json.RawMessage(" { \"x\" : \"<&>\u2028\" } "), mcp.MetaKeyClientInfo: impl, mcp.MetaKeyProtocolVersion: "2026-07-28"},
		{"traceparent": "00-ab", "baggage": "k=\xff\u2029", "b": "2", "a": "1", "é": "x", "Z": ""},
		{mcp.MetaKeyClientCapabilities: (*mcp.ClientCapabilities)(nil)},
		{"n": 1, "f": 0.5, "m": map[string]any{"z": 1, "a": []any{true, nil}}},
		{"raw": json.RawMessage(`{"a":`)},
		{"raw": json.RawMessage(nil)},
		{"ch": make(chan int)},
	}
	args := []any{
		nil,
		map[string]any{},
		map[string]any(nil),
		map[string]any{"b": 1, "a": "x"},
		json.RawMessage(`{"message":"hi"}`),
		json.RawMessage(" {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"s\":\"a b\\n<&>\" } "),
		json.RawMessage(`{"a":`),
		json.RawMessage(`{"a":1}{}`),
		json.RawMessage(nil),
		json.RawMessage(`"x"`),
		json.RawMessage("{\"a\":\"\xff\xfe\"}"),
		json.RawMessage("{\"a\":\"\u2029 é 文\"}"),
		[]int{1},
	}
	others := []mcp.CallToolParams{
		{},
		{RequestState: "state <&>"},
		{InputResponses: mcp.InputResponseMap{"1": &mcp.ElicitResult{Action: "accept"}}},
	}
	n := 0
	for _, meta := range metas {
		for _, a := range args {
			for _, o := range others {
				p := o
				p.Meta, p.Name, p.Arguments = meta, "tool \"<&>\" é", a
				want, wantErr := wirejson.Marshal(&p)
				got, err := appendCallParams([]byte("prefix"), &p)
				name := fmt.Sprintf("meta %v, arguments %v, %+v", meta, a, o)
				switch {
				case (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error():
					t.Errorf("%s: error %v, wirejson.Marshal's %v", name, err, wantErr)
				case err == nil && string(got) != "prefix"+string(want):
					t.Errorf("%s:\n got %s\nwant prefix%s", name, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d params", n)
}

func BenchmarkEncodeCallParams(b *testing.B) {
	p := &mcp.CallToolParams{Name: "echo", Meta: (&Origin{}).meta(), Arguments: json.RawMessage(`{"message":"bench-000123 hello world, a typical message"}`)}
	b.Run("wirejson.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wirejson.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendCallParams", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendCallParams(nil, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCachedJSONHoldsLittleOfEndedSessions: the encodings kept for the capabilities of
// sessions are at most cachedJSONSize, each of at most cachedJSONMax bytes, however many
// sessions come and go and however large the capabilities their clients declare; a value too
// large to keep is still encoded right.
func TestCachedJSONHoldsLittleOfEndedSessions(t *testing.T) {
	large := strings.Repeat("x", 16<<10)
	for i := range 3 * cachedJSONSize {
		caps := &mcp.ClientCapabilities{Experimental: map[string]any{"k": fmt.Sprint(i)}}
		if i%2 == 0 {
			caps.Experimental["large"] = large
		}
		got, ok := cachedJSON(caps)
		want, err := wirejson.Marshal(caps)
		if !ok || err != nil || string(got) != string(want) {
			t.Fatalf("session %d: %v %s, want %s (%v)", i, ok, got, want, err)
		}
	}
	jsonCache.Lock()
	defer jsonCache.Unlock()
	if len(jsonCache.m) > cachedJSONSize {
		t.Errorf("%d encodings held, at most %d", len(jsonCache.m), cachedJSONSize)
	}
	for v, enc := range jsonCache.m {
		if len(enc) > cachedJSONMax {
			t.Errorf("an encoding of %d bytes is held (%T)", len(enc), v)
		}
	}
}

// FuzzAppendCallParamsIsMarshal: whatever a call's name, request state, a _meta string and raw
// arguments hold (invalid UTF-8, control characters, U+2028, broken or spaced JSON), the
// encoder writes wirejson.Marshal's bytes or fails with its error. `make test` runs the seeds.
func FuzzAppendCallParamsIsMarshal(f *testing.F) {
	f.Add("echo", "", "p-1", []byte(`{"message":"hi"}`))
	f.Add("tool \"<&>\" é", "state\u2028", "k=\xff", []byte(" {\n\t\"a\" : [ 1 , 2 ] } "))
	f.Add("", "\x00\x1f", "\u2029", []byte(`{"a":`))
	f.Add("n", "s", "", []byte("{\"a\":\"\u2028\"}"))
	f.Add("n", "s", "v", []byte(`{"a":1}{}`))
	f.Fuzz(func(t *testing.T, name, state, value string, args []byte) {
		p := mcp.CallToolParams{
			Meta:         mcp.Meta{mcp.MetaKeyClientCapabilities: noCapabilities, "progressToken": value, value: json.RawMessage(args)},
			Name:         name,
			Arguments:    json.RawMessage(args),
			RequestState: state,
		}
		want, wantErr := wirejson.Marshal(&p)
		got, err := appendCallParams(nil, &p)
		switch {
		case (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error():
			t.Fatalf("error %v, wirejson.Marshal's %v", err, wantErr)
		case err == nil && string(got) != string(want):
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}
