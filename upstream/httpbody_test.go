package upstream

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestBoundedTransportReplacesBodiesOverTheLimit(t *testing.T) {
	const limit = 1000
	big := `{"jsonrpc":"2.0","result":{"t":"` + strings.Repeat("x", 3*limit) + `"},"id":41}`
	small := `{"jsonrpc":"2.0","id":42,"result":{}}`
	for _, tt := range []struct {
		name, contentType, body string
		length                  bool // send a Content-Length
		wantSmall               bool // the body passes unchanged
	}{
		{"json of unknown length over the limit", "application/json", big, false, false},
		{"json with a length over the limit", "application/json", big, true, false},
		{"json within the limit", "application/json", small, false, true},
		{"an event over the limit", "text/event-stream", "id: e1\ndata: " + big + "\n\n", false, false},
		{"an event within the limit", "text/event-stream", "data: " + small + "\n\n", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				if !tt.length {
					w.(http.Flusher).Flush() // no Content-Length
				}
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			bt := &boundedTransport{base: http.DefaultTransport, server: "cam", limit: limit, log: slog.New(slog.DiscardHandler), stats: &outputStats{}, refusals: &refusals{}}
			resp, err := (&http.Client{Transport: bt}).Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantSmall {
				if string(body) != tt.body {
					t.Fatalf("body %q, want it unchanged", body)
				}
				return
			}
			data := string(body)
			if tt.contentType == "text/event-stream" {
				if !strings.HasPrefix(data, "id: e1\ndata: ") || !strings.HasSuffix(data, "\n\n") {
					t.Fatalf("event %q", data)
				}
				data = strings.TrimSuffix(strings.TrimPrefix(data, "id: e1\ndata: "), "\n\n")
			}
			msg, err := jsonrpc.DecodeMessage([]byte(data))
			if err != nil {
				t.Fatalf("replacement %q: %v", data, err)
			}
			resp2 := msg.(*jsonrpc.Response)
			e, ok := bt.refusals.take(resp2.Error)
			if resp2.ID.Raw() != int64(41) || !ok || e.Reason != OutputTooLarge || e.Size < int64(len(big)) || e.Size > int64(len(tt.body)) || e.Limit != limit {
				t.Fatalf("replacement %q: %+v", data, e)
			}
			if _, again := bt.refusals.take(resp2.Error); again {
				t.Error("a refusal's token must be good once")
			}
			forged := &jsonrpc.Error{Code: codeRefused, Message: "mcp-gateway refused the answer 00"}
			if _, ok := bt.refusals.take(forged); ok {
				t.Error("an error the server made up passed for a refusal")
			}
		})
	}
}
