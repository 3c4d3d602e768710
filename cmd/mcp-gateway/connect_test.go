package main

//lint:file-ignore SA1019 sampling and elicitation are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them is what connect does.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
)

// These tests put the bridge between the Go SDK's client (on a pair of pipes, as an IDE on
// stdin/stdout) and the SDK's own streamable HTTP server; e2e/connect_test.go does the same
// with the real gateway, the MCP Inspector and the simulated robot.

// testServer is an MCP server with a tool for each thing the bridge carries.
type testServer struct {
	*mcp.Server
	cancelled chan string // the progress token of each slow call that saw its cancellation
}

func newTestServer() *testServer {
	s := &testServer{
		Server:    mcp.NewServer(&mcp.Implementation{Name: "connect-test", Version: "1"}, nil),
		cancelled: make(chan string, 10),
	}
	mcp.AddTool(s.Server, &mcp.Tool{Name: "echo", Description: "echo the text"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	// slow sends progress until it is cancelled.
	mcp.AddTool(s.Server, &mcp.Tool{Name: "slow", Description: "run until cancelled"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				s.cancelled <- fmt.Sprint(token)
				return nil, nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Message: fmt.Sprintf("step %d", i)})
			}
		}
	})
	// ask asks the client to sample and to elicit during the call, and answers with both.
	mcp.AddTool(s.Server, &mcp.Tool{Name: "ask", Description: "sample and elicit"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		sample, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "what is the answer?"}}},
			MaxTokens: 7,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sampling: %w", err)
		}
		elicited, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message:         "your name?",
			RequestedSchema: &jsonschemaObject,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("elicitation: %w", err)
		}
		text := fmt.Sprintf("sampled %q by %s; elicited %s %v", sample.Content.(*mcp.TextContent).Text, sample.Model, elicited.Action, elicited.Content["name"])
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	// tagged has an argument that MCP 2026-07-28 also carries in a header.
	s.AddTool(&mcp.Tool{
		Name:        "tagged",
		Description: "answer with the region",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"nested":{"type":"object","properties":{"zone":{"type":"integer","x-mcp-header":"Zone"}}}}}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "args " + string(req.Params.Arguments)}}}, nil
	})
	return s
}

var jsonschemaObject = mustSchema(`{"type":"object","properties":{"name":{"type":"string"}}}`)

func mustSchema(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

// serveHTTP serves s over streamable HTTP, with the gateway's setting of cancelling a call whose
// client went away.
func serveHTTP(t *testing.T, s *mcp.Server, opts mcp.StreamableHTTPOptions) *httptest.Server {
	t.Helper()
	opts.PropagateRequestCancellation = true
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &opts))
	t.Cleanup(srv.Close)
	return srv
}

// syncBuf collects the bridge's stderr.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// bridged is a bridge serving an IDE's pipes.
type bridged struct {
	b      *bridge
	stdin  *io.PipeWriter // the IDE's end
	stdout *io.PipeReader // the IDE's end
	stderr *syncBuf
	done   chan error // what serve returned
}

func startBridge(t *testing.T, url, token string, keepalive time.Duration) *bridged {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	br := &bridged{stdin: inW, stdout: outR, stderr: &syncBuf{}, done: make(chan error, 1)}
	br.b = newBridge(url, token, defaultTokenEnv, keepalive, br.stderr)
	go func() {
		br.done <- br.b.serve(context.Background(), inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		select {
		case <-br.done:
		case <-time.After(10 * time.Second):
			t.Error("the bridge did not stop within 10s of the end of its stdin")
		}
		if t.Failed() {
			t.Logf("bridge stderr:\n%s", br.stderr.String())
		}
	})
	return br
}

// exit waits for serve to return.
func (br *bridged) exit(t *testing.T) error {
	t.Helper()
	select {
	case err := <-br.done:
		br.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the bridge did not exit")
		return nil
	}
}

// connectClient connects the Go SDK's client through the bridge; version "" is the SDK's
// default (2026-07-28 with server/discover, falling back to initialize).
func connectClient(t *testing.T, br *bridged, opts *mcp.ClientOptions, version string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: br.stdout, Writer: br.stdin}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("call %s: %s", name, mustMarshal(res))
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func listToolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// TestConnectCarriesAStatefulSession: through the bridge the client negotiates with the server
// (the SDK's default falls back from server/discover to initialize), lists and calls, gets
// progress before the result, answers sampling and elicitation during a call, hears of a tool
// added later on the GET stream, and its cancellation reaches the server's handler.
func TestConnectCarriesAStatefulSession(t *testing.T) {
	s := newTestServer()
	srv := serveHTTP(t, s.Server, mcp.StreamableHTTPOptions{})
	br := startBridge(t, srv.URL, "", time.Minute)

	var mu sync.Mutex
	var progress []float64
	listChanged := make(chan struct{}, 10)
	cs, err := connectClient(t, br, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Progress)
			mu.Unlock()
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if r.Params.MaxTokens != 7 {
				return nil, fmt.Errorf("maxTokens %d", r.Params.MaxTokens)
			}
			return &mcp.CreateMessageResult{Content: &mcp.TextContent{Text: "42"}, Model: "ide-model", Role: "assistant"}, nil
		},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
	}, "")
	if err != nil {
		t.Fatalf("connect through the bridge: %v", err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s, want 2025-11-25 (initialize after server/discover was refused)", v)
	}

	if names := strings.Join(listToolNames(t, cs), ","); names != "ask,echo,slow,tagged" {
		t.Fatalf("tools: %s", names)
	}
	if got := callText(t, cs, "echo", map[string]any{"text": "hi"}); got != "echo: hi" {
		t.Fatalf("echo: %q", got)
	}
	if got := callText(t, cs, "ask", map[string]any{}); got != `sampled "42" by ide-model; elicited accept Ada` {
		t.Fatalf("ask: %q", got)
	}

	t.Run("progress_and_cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
		params.SetProgressToken("tok-1")
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, params)
			errc <- err
		}()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(progress)
			mu.Unlock()
			if n >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d progress notifications in 5s", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("a cancelled call returned a result")
		}
		select {
		case token := <-s.cancelled:
			if token != "tok-1" {
				t.Fatalf("the server saw the cancellation of %s", token)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the server's handler never saw the cancellation")
		}
		mu.Lock()
		defer mu.Unlock()
		for i := 1; i < len(progress); i++ {
			if progress[i] <= progress[i-1] {
				t.Fatalf("progress out of order: %v", progress)
			}
		}
		// The session goes on.
		if got := callText(t, cs, "echo", map[string]any{"text": "after"}); got != "echo: after" {
			t.Fatalf("echo after the cancellation: %q", got)
		}
	})

	t.Run("list_changed_outside_a_request", func(t *testing.T) {
		mcp.AddTool(s.Server, &mcp.Tool{Name: "late", Description: "added later"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil, nil
		})
		select {
		case <-listChanged:
		case <-time.After(5 * time.Second):
			t.Fatal("notifications/tools/list_changed never reached the client")
		}
	})

	cs.Close()
	if err := br.exit(t); err != nil {
		t.Fatalf("the bridge ended with %v after the client closed", err)
	}
	// The bridge closed the session (DELETE) when its stdin ended.
	deadline := time.Now().Add(5 * time.Second)
	for n := countSessions(s.Server); n != 0; n = countSessions(s.Server) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still open on the server", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countSessions(s *mcp.Server) int {
	n := 0
	for range s.Sessions() {
		n++
	}
	return n
}

// TestConnectModernProtocol: at MCP 2026-07-28 (a stateless server) each request carries its
// version, and the bridge sets the headers that revision needs: the SDK's server refuses a
// request whose Mcp-Method, Mcp-Name or Mcp-Param-* headers are missing or do not match.
func TestConnectModernProtocol(t *testing.T) {
	s := newTestServer()
	srv := serveHTTP(t, s.Server, mcp.StreamableHTTPOptions{Stateless: true})
	br := startBridge(t, srv.URL, "", time.Minute)
	cs, err := connectClient(t, br, nil, "")
	if err != nil {
		t.Fatalf("connect through the bridge: %v", err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != version20260728 {
		t.Fatalf("negotiated %s", v)
	}
	listToolNames(t, cs) // the bridge learns tagged's x-mcp-header annotations here
	got := callText(t, cs, "tagged", map[string]any{"region": "  eu-west ", "nested": map[string]any{"zone": 3}})
	if !strings.Contains(got, `"region":"  eu-west "`) {
		t.Fatalf("tagged: %q", got)
	}
	if got := callText(t, cs, "echo", map[string]any{"text": "modern"}); got != "echo: modern" {
		t.Fatalf("echo: %q", got)
	}
}

// TestConnectNamesTheTokenVariable: a gateway that wants a token refuses the bridge with 401;
// the client's initialize gets an error that names the variable, the bridge exits with it, and
// the token itself is written nowhere.
func TestConnectNamesTheTokenVariable(t *testing.T) {
	const good = "tok-7f3a9c2e1b5d4a60"
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestServer().Server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+good {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"a bearer token is required"}`))
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	for _, tc := range []struct{ name, token, want string }{
		{"none", "", "needs a bearer token (HTTP 401: a bearer token is required): set the environment variable MCP_GATEWAY_TOKEN"},
		{"wrong", "tok-wrong-0123456789", "refused the bearer token in the environment variable MCP_GATEWAY_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := startBridge(t, srv.URL, tc.token, time.Minute)
			_, err := connectClient(t, br, nil, "2025-11-25")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("initialize: %v\nwant an error with %q", err, tc.want)
			}
			if err := br.exit(t); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the bridge exited with %v", err)
			}
			if tc.token != "" && strings.Contains(err.Error()+br.stderr.String(), tc.token) {
				t.Fatal("the token was written out")
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		br := startBridge(t, srv.URL, good, time.Minute)
		cs, err := connectClient(t, br, nil, "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		if got := callText(t, cs, "echo", map[string]any{"text": "in"}); got != "echo: in" {
			t.Fatalf("echo: %q", got)
		}
	})
}

// TestConnectUnreachableGateway: nothing listens at the URL; initialize gets the reason and the
// bridge exits with it.
func TestConnectUnreachableGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	br := startBridge(t, url, "", time.Minute)
	_, err = connectClient(t, br, nil, "2025-11-25")
	const want = "cannot reach the gateway at "
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("initialize: %v", err)
	}
	if err := br.exit(t); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the bridge exited with %v", err)
	}
}

// TestConnectGatewayGoneMidCall: the gateway goes away while a call runs; the call gets an error
// at once and the bridge exits with the reason.
func TestConnectGatewayGoneMidCall(t *testing.T) {
	s := newTestServer()
	srv := serveHTTP(t, s.Server, mcp.StreamableHTTPOptions{})
	br := startBridge(t, srv.URL, "", time.Minute)
	cs, err := connectClient(t, br, nil, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		errc <- err
	}()
	time.Sleep(200 * time.Millisecond)
	srv.CloseClientConnections()
	srv.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "lost the gateway at "+srv.URL) {
			t.Fatalf("the call in flight got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight got no answer after the gateway went away")
	}
	if err := br.exit(t); err == nil || !strings.Contains(err.Error(), "lost the gateway") {
		t.Fatalf("the bridge exited with %v", err)
	}
}

// TestConnectKeepsAnIdleSessionOpen: the server ends sessions idle for 300ms; the bridge's
// keepalive keeps an idle IDE's session, and without it the next call finds the session gone
// and the bridge says so.
func TestConnectKeepsAnIdleSessionOpen(t *testing.T) {
	s := newTestServer()
	srv := serveHTTP(t, s.Server, mcp.StreamableHTTPOptions{SessionTimeout: 300 * time.Millisecond})
	for _, tc := range []struct {
		name      string
		keepalive time.Duration
	}{{"keepalive", 100 * time.Millisecond}, {"none", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			br := startBridge(t, srv.URL, "", tc.keepalive)
			cs, err := connectClient(t, br, nil, "2025-11-25")
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "idle"}})
			if tc.keepalive > 0 {
				if err != nil || res.IsError {
					t.Fatalf("after a second idle: %v %s", err, mustMarshal(res))
				}
				return
			}
			const want = "no longer knows this session"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("without keepalive, after a second idle: %v", err)
			}
			if err := br.exit(t); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("the bridge exited with %v", err)
			}
		})
	}
}

// TestConnectEndOfStdinWaitsForCalls: a client that writes its requests and closes stdin (a
// script) still gets every answer before the bridge exits; lines that are not JSON-RPC messages
// are answered by the bridge, and the stdout carries nothing but messages.
func TestConnectEndOfStdinWaitsForCalls(t *testing.T) {
	s := newTestServer()
	srv := serveHTTP(t, s.Server, mcp.StreamableHTTPOptions{})
	b := newBridge(srv.URL, "", defaultTokenEnv, time.Minute, io.Discard)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`not json`,
		`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"echo","arguments":{"text":"last"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := b.serve(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line is not a message: %q", line)
		}
		code := 0
		if m.Error != nil {
			code = m.Error.Code
		}
		ids = append(ids, fmt.Sprintf("%s:%d", m.ID, code))
		if string(m.ID) == `"two"` && !strings.Contains(string(m.Result), "echo: last") {
			t.Fatalf("the call's answer: %s", line)
		}
	}
	if got := strings.Join(ids, " "); got != `1:0 null:-32700 null:-32600 "two":0` {
		t.Fatalf("answers (id:error code): %s\n%s", got, out.String())
	}
}

func TestConnectParamHeaders(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"plain":{"type":"string"},
		"flag":{"type":"boolean","x-mcp-header":"Flag"},
		"n":{"type":"integer","x-mcp-header":"N"},
		"deep":{"type":"object","properties":{"zone":{"type":"string","x-mcp-header":"Zone"}}}}}`)
	bindings := paramBindings(schema)
	if len(bindings) != 4 {
		t.Fatalf("bindings: %+v", bindings)
	}
	for _, tc := range []struct {
		args string
		want map[string]string
	}{
		{`{"region":"eu-west","flag":true,"n":42,"deep":{"zone":"b"}}`,
			map[string]string{"Mcp-Param-Region": "eu-west", "Mcp-Param-Flag": "true", "Mcp-Param-N": "42", "Mcp-Param-Zone": "b"}},
		{`{"region":" padded","n":1.5}`, map[string]string{"Mcp-Param-Region": "=?base64?IHBhZGRlZA==?="}},
		{`{"region":"Zürich","n":null}`, map[string]string{"Mcp-Param-Region": "=?base64?WsO8cmljaA==?="}},
		{`{"region":"=?base64?abc?="}`, map[string]string{"Mcp-Param-Region": "=?base64?PT9iYXNlNjQ/YWJjPz0=?="}},
		{`{"region":["not","primitive"],"n":9007199254740993}`, map[string]string{}},
	} {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.args), &args); err != nil {
			t.Fatal(err)
		}
		got := paramHeaders(bindings, args)
		if mustMarshal(got) != mustMarshal(tc.want) {
			t.Errorf("%s: headers %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestConnectEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080/mcp": "http://127.0.0.1:8080/mcp",
		"http://127.0.0.1:8080":     "http://127.0.0.1:8080/mcp",
		"https://cell-3.lab/":       "https://cell-3.lab/mcp",
		"http://h:1/prefix/mcp":     "http://h:1/prefix/mcp",
		"127.0.0.1:8080":            "",
		"localhost:8080/mcp":        "",
		"ftp://h/mcp":               "",
	} {
		got, err := endpointURL(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("endpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestConnectRunningGatewayURL(t *testing.T) {
	cfg := &config.Config{}
	cfg.Gateway.Listen = "127.0.0.1:8080"
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"mcp-gateway", "serve", "-c", "robot.yaml"}, "http://127.0.0.1:8080/mcp"},
		{[]string{"mcp-gateway", "serve", "-c", "robot.yaml", "--listen", "127.0.0.1:9001"}, "http://127.0.0.1:9001/mcp"},
		{[]string{"mcp-gateway", "serve", "--listen=0.0.0.0:9002", "-c", "robot.yaml"}, "http://127.0.0.1:9002/mcp"},
		{[]string{"mcp-gateway", "serve", "-listen", ":9003"}, "http://127.0.0.1:9003/mcp"},
		{[]string{"mcp-gateway", "serve", "-listen", "[::]:9004"}, "http://127.0.0.1:9004/mcp"},
		{[]string{"mcp-gateway", "serve", "-c", "robot.yaml", "--stdio"}, ""},
		{[]string{"mcp-gateway", "serve", "--stdio", "-c", "robot.yaml", "--listen", "127.0.0.1:9005"}, "http://127.0.0.1:9005/mcp"},
		{[]string{"mcp-gateway", "serve", "--stdio=false", "-c", "robot.yaml"}, "http://127.0.0.1:8080/mcp"},
	} {
		if got := runningGatewayURL(cfg, tc.argv, "127.0.0.1"); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.argv, got, tc.want)
		}
	}
	cfg.Gateway.TLS = &config.TLS{CertFile: "server.crt", KeyFile: "server.key"}
	if got := runningGatewayURL(cfg, []string{"mcp-gateway", "serve"}, "127.0.0.1"); got != "https://127.0.0.1:8080/mcp" {
		t.Errorf("with gateway.tls: %q, want https://127.0.0.1:8080/mcp", got)
	}
	cfg.Gateway.Listen = ""
	if got := runningGatewayURL(cfg, []string{"mcp-gateway", "serve"}, "127.0.0.1"); got != "" {
		t.Errorf("gateway.listen empty: %q", got)
	}
}

func TestConnectShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/local/bin/mcp-gateway": "/usr/local/bin/mcp-gateway",
		"/opt/my tools/mcp-gateway":  "'/opt/my tools/mcp-gateway'",
		"it's":                       `'it'\''s'`,
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}
