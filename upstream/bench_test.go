package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// inMemoryDial connects sessions to srv in process, to measure the package's own cost.
func inMemoryDial(srv *mcp.Server) func(*session) (mcp.Transport, error) {
	return func(s *session) (mcp.Transport, error) {
		client, server := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(context.Background(), server, nil)
		if err != nil {
			return nil, err
		}
		s.release = func() { _ = ss.Close() }
		return client, nil
	}
}

// BenchmarkCall compares Upstream.Call with the SDK's own CallTool on the same in-memory
// connection ("sdk"), and measures the stdio hop to a real child.
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"object": "cup", "speed": 0.5}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	addTestTools(srv)

	start := func(b *testing.B, cfg config.Server, dial func(*session) (mcp.Transport, error)) *Upstream {
		m := NewManager([]config.Server{cfg}, Options{})
		b.Cleanup(func() { _ = m.Close() })
		if dial != nil {
			m.All()[0].dial = dial
		}
		if err := m.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		return m.All()[0]
	}
	run := func(b *testing.B, call func() error) {
		b.ReportAllocs()
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	}
	ctx := context.Background()

	b.Run("sdk", func(b *testing.B) {
		u := start(b, config.Server{Name: "mem", Command: "in-memory"}, inMemoryDial(srv))
		cs := u.ready.Load().cs
		run(b, func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
			return err
		})
	})
	b.Run("inmemory", func(b *testing.B) {
		u := start(b, config.Server{Name: "mem", Command: "in-memory"}, inMemoryDial(srv))
		run(b, func() error { _, err := u.Call(ctx, "echo", args, nil); return err })
	})
	b.Run("inmemory-physical", func(b *testing.B) {
		u := start(b, config.Server{Name: "mem", Command: "in-memory", Physical: true}, inMemoryDial(srv))
		run(b, func() error { _, err := u.Call(ctx, "echo", args, nil); return err })
	})
	b.Run("stdio", func(b *testing.B) {
		u := start(b, stdioServer(b, "tools"), nil)
		run(b, func() error { _, err := u.Call(ctx, "echo", args, nil); return err })
	})
}

// BenchmarkStdioRead measures reading one response off a stdio server's stdout, with the
// gateway's bounded reader and with the SDK's IOTransport it replaced, for a small result and
// a 1 MiB one.
func BenchmarkStdioRead(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		line := []byte(response("1", size) + "\n")
		for _, reader := range []string{"bounded", "sdk"} {
			b.Run(fmt.Sprintf("%s/%dB", reader, size), func(b *testing.B) {
				b.SetBytes(int64(len(line)))
				for b.Loop() {
					var tr mcp.Transport = &stdioTransport{server: "b", limit: config.DefaultMaxResultBytes, log: slog.New(slog.DiscardHandler),
						stats: &outputStats{}, r: io.NopCloser(bytes.NewReader(line)), w: &lockedBuffer{}}
					if reader == "sdk" {
						tr = &mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(line)), Writer: &lockedBuffer{}}
					}
					conn, _ := tr.Connect(context.Background())
					if _, err := conn.Read(context.Background()); err != nil {
						b.Fatal(err)
					}
					conn.Close()
				}
			})
		}
	}
}

// BenchmarkCallStdio measures one call to a real stdio server, on the fast path (fastcall.go)
// and on the SDK's, so that what each allocates per call is visible (-benchmem); "-traced" with
// telemetry on and the call made in a span's context, so that the trace context in _meta
// (trace.go) is sent.
func BenchmarkCallStdio(b *testing.B) {
	args := json.RawMessage(`{"object": "cup", "speed": 0.5}`)
	ctx := WithOrigin(context.Background(), &Origin{Capabilities: &mcp.ClientCapabilities{}})
	tel, tracer := newTracing(b, false)
	traced, span := tracer.Start(ctx, "tools/call robot__echo")
	defer span.End()
	for _, path := range []struct {
		name string
		fast bool
		tel  *telemetry.Provider
	}{{"fast", true, nil}, {"sdk", false, nil}, {"fast-traced", true, tel}, {"sdk-traced", false, tel}} {
		b.Run(path.name, func(b *testing.B) {
			ctx := ctx
			if path.tel != nil {
				ctx = traced
			}
			m := NewManager([]config.Server{stdioServer(b, "tools")}, Options{FastPath: path.fast, Telemetry: path.tel})
			b.Cleanup(func() { _ = m.Close() })
			if err := m.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			u := m.All()[0]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := u.Call(ctx, "echo", args, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
