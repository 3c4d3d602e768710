package gateway

//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them for clients is what this file does.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// featureServerEnv makes the test binary run as a stdio MCP server named after the variable's
// value, with a resource, a resource template, a prompt with completions and tools that ask the
// client for a sampled message.
const featureServerEnv = "GATEWAY_FEATURE_SERVER"

func runFeatureServer(name string) int {
	srv := mcp.NewServer(&mcp.Implementation{Name: "feature-" + name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			if req.Params.Ref.Type != "ref/prompt" || req.Params.Ref.Name != "greet" {
				return nil, fmt.Errorf("no completions for %s %s", req.Params.Ref.Type, req.Params.Ref.Name)
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{req.Params.Argument.Value + "rld from " + name}}}, nil
		},
	})
	srv.AddResource(&mcp.Resource{Name: "doc", URI: "test://" + name + "/doc", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "doc of " + name}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "item", URITemplate: "test://" + name + "/item/{id}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimPrefix(req.Params.URI, "test://"+name+"/item/")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item " + id + " of " + name}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Hello " + req.Params.Arguments["who"] + " from " + name}}}}, nil
		})
	ask := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "question from " + name}}}})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		text, _ := res.Content.(*mcp.TextContent)
		if text == nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no text sampled"}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled: " + text.Text}}}, nil
	}
	obj := map[string]any{"type": "object"}
	srv.AddTool(&mcp.Tool{Name: "ask_" + name, InputSchema: obj}, ask)
	// touch_doc tells the subscribers of the doc that it changed.
	srv.AddTool(&mcp.Tool{Name: "touch_doc_" + name, InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://" + name + "/doc"}); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil
	})
	// ask_together asks only once a second call is in flight, and returns only once the other
	// has asked too (or after 5s each), so that two clients' calls are in flight on the server
	// whenever it asks.
	barrier := func() func() {
		var n atomic.Int32
		all := make(chan struct{})
		return func() {
			if n.Add(1) == 2 {
				close(all)
			}
			select {
			case <-all:
			case <-time.After(5 * time.Second):
			}
		}
	}
	arrived, asked := barrier(), barrier()
	srv.AddTool(&mcp.Tool{Name: "ask_together_" + name, InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		arrived()
		res, err := ask(ctx, req)
		asked()
		return res, err
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "feature server:", err)
	}
	return 0
}

// featureServer is a config entry for a feature server named name, asked for the 2025-11-25
// revision under which it may send sampling requests while serving a call.
func featureServer(name string) string {
	return fmt.Sprintf("  - name: %s\n    command: \"{{exe}}\"\n    env: {%s: %q}\n    startup_timeout_sec: 10\n    contract: passthrough\n    protocol_version: \"2025-11-25\"\n", name, featureServerEnv, name)
}

// connectClient connects an in-memory MCP client to the gateway, speaking 2025-11-25: under
// 2026-07-28 a server may not send it requests outside results (the SDK refuses), and the
// feature servers sample the legacy way.
func connectClient(t *testing.T, f *reloadFixture, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectClientAt(t, f, opts, "2025-11-25")
}

func connectClientAt(t *testing.T, f *reloadFixture, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clientT, serverT := mcp.NewInMemoryTransports()
	if _, err := f.g.MCPServer().Connect(ctx, serverT, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, opts).Connect(ctx, clientT, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func sampler(text string) *mcp.ClientOptions {
	return &mcp.ClientOptions{CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		q, _ := req.Params.Messages[0].Content.(*mcp.TextContent)
		return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: text + " (to " + q.Text + ")"}}, nil
	}}
}

func textOf(t *testing.T, c []mcp.Content) string {
	t.Helper()
	var b strings.Builder
	for _, x := range c {
		if tc, ok := x.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Resources, templates, prompts, completions and sampling of two servers are each routed to
// the server they belong to.
func TestFeaturesRouteToTheirServer(t *testing.T) {
	f := startFixture(t, withServers(allowAll, featureServer("a"), featureServer("b")))
	cs := connectClient(t, f, sampler("forty-two"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	resources, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, r := range resources.Resources {
		names[r.URI] = r.Name
	}
	if names["test://a/doc"] != "a__doc" || names["test://b/doc"] != "b__doc" {
		t.Fatalf("resources: %v, want URIs kept and names prefixed", names)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 2 {
		t.Fatalf("templates: %v %v", templates, err)
	}
	for uri, want := range map[string]string{"test://b/doc": "doc of b", "test://a/doc": "doc of a", "test://b/item/7": "item 7 of b"} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != want {
			t.Errorf("read %s: %v %v, want %q", uri, res, err, want)
		}
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://c/doc"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeResourceNotFound {
		t.Errorf("read of a URI no server has: %v, want resource not found (%d)", err, mcp.CodeResourceNotFound)
	}

	prompt, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__greet", Arguments: map[string]string{"who": "Ada"}})
	if err != nil || len(prompt.Messages) != 1 {
		t.Fatalf("prompt: %v %v", prompt, err)
	}
	if got := prompt.Messages[0].Content.(*mcp.TextContent).Text; got != "Hello Ada from b" {
		t.Errorf("prompt text %q", got)
	}
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a__greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "wo"}})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "world from a" {
		t.Errorf("completion: %+v %v, want [world from a]", comp, err)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "x"}}); err == nil || !strings.Contains(err.Error(), `no prompt named "greet"`) {
		t.Errorf("completion of an unknown prompt: %v", err)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__ask_b"})
	if err != nil || res.IsError || textOf(t, res.Content) != "sampled: forty-two (to question from b)" {
		t.Fatalf("sampling through the gateway: %v %+v %q", err, res, textOf(t, res.Content))
	}
}

// A client without a sampling handler is refused with the reason, and so is a sampling request
// while two clients' calls are in flight on the server: the gateway does not guess.
func TestSamplingRefusals(t *testing.T) {
	f := startFixture(t, withServers(allowAll, featureServer("a")))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	plain := connectClient(t, f, nil)
	res, err := plain.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res.Content), "did not declare the sampling capability") {
		t.Fatalf("sampling for a client without the capability: %v %+v", err, res)
	}

	one, two := connectClient(t, f, sampler("one")), connectClient(t, f, sampler("two"))
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, cs := range []*mcp.ClientSession{one, two} {
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_together_a"})
			if err != nil {
				results[i] = err.Error()
				return
			}
			results[i] = textOf(t, res.Content)
		})
	}
	wg.Wait()
	for i, r := range results {
		if !strings.Contains(r, "requests of 2 different clients of the gateway are in flight") {
			t.Errorf("client %d got %q, want the ambiguity refused", i+1, r)
		}
	}
}

// With bare names, two servers offering a prompt of the same name fail start-up, naming both.
func TestBarePromptCollision(t *testing.T) {
	yaml := "gateway:\n  tool_names: bare\n" + withServers(allowAll, featureServer("a"), featureServer("b"))
	f := &reloadFixture{path: t.TempDir() + "/gateway.yaml"}
	f.write(t, yaml)
	cfg, err := config.Load(f.path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = g.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), `prompt "greet" is offered by servers "a" and "b"`) {
		t.Fatalf("Start = %v, want the prompt collision", err)
	}
}

// A client of MCP 2026-07-28 cannot be sent requests outside a result: an older upstream's
// sampling request reaches it as an input request in an "input required" result, and its retry
// with the answer completes the call (the SDK's client does both rounds by itself).
func TestSamplingForA20260728Client(t *testing.T) {
	f := startFixture(t, withServers(allowAll, featureServer("a")))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cs := connectClientAt(t, f, sampler("modern"), "2026-07-28")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"})
	if err != nil || res.IsError || textOf(t, res.Content) != "sampled: modern (to question from a)" {
		t.Fatalf("sampling for a 2026-07-28 client: %v %+v", err, res)
	}

	// Without the multi-round-trip middleware the client sees the rounds.
	raw := connectClientAt(t, f, &mcp.ClientOptions{
		CreateMessageHandler: sampler("x").CreateMessageHandler,
		MultiRoundTrip:       &mcp.MultiRoundTripOptions{Disabled: true},
	}, "2026-07-28")
	first, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"})
	if err != nil || len(first.InputRequests) != 1 || !strings.HasPrefix(first.RequestState, continuationPrefix) {
		t.Fatalf("first round: %v %+v, want one input request and the gateway's request state", err, first)
	}
	var id string
	var asked *mcp.CreateMessageWithToolsParams
	for k, v := range first.InputRequests {
		id = k
		asked, _ = v.(*mcp.CreateMessageWithToolsParams)
	}
	if asked == nil || len(asked.Messages) != 1 {
		t.Fatalf("input request %s: %#v, want the upstream's sampling request", id, first.InputRequests[id])
	}

	// A request state the gateway does not know, and one sent with another tool, are refused.
	if _, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a", RequestState: continuationPrefix + "nope"}); err == nil || !strings.Contains(err.Error(), "names no call waiting for input") {
		t.Errorf("unknown request state: %v", err)
	}
	if _, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_together_a", RequestState: first.RequestState}); err == nil || !strings.Contains(err.Error(), "belongs to another call") {
		t.Errorf("request state with another tool: %v", err)
	}

	answer := &mcp.CreateMessageWithToolsResult{Role: "assistant", Model: "m", Content: []mcp.Content{&mcp.TextContent{Text: "by hand"}}}
	second, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a", RequestState: first.RequestState, InputResponses: mcp.InputResponseMap{id: answer}})
	if err != nil || second.IsError || textOf(t, second.Content) != "sampled: by hand" || second.InputRequests != nil {
		t.Fatalf("second round: %v %+v", err, second)
	}
	// The request state is spent.
	if _, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a", RequestState: first.RequestState, InputResponses: mcp.InputResponseMap{id: answer}}); err == nil {
		t.Error("a spent request state was accepted")
	}

	// One audit record per call, not per round.
	if err := f.st.Audit().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if err := f.st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool {
		if r.Tool == "a__ask_a" {
			calls++
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("%d audit records of a__ask_a, want 2 (one per call)", calls)
	}

	plain := connectClientAt(t, f, nil, "2026-07-28")
	res, err = plain.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res.Content), "did not declare the sampling capability") {
		t.Fatalf("sampling for a 2026-07-28 client without the capability: %v %+v", err, res)
	}
}

// A client that does not come back with its answers: the upstream's request is refused after
// the wait and the call ends as the upstream decides.
func TestSuspendedCallExpires(t *testing.T) {
	defer func(d time.Duration) { inputWait = d }(inputWait)
	inputWait = 300 * time.Millisecond
	f := startFixture(t, withServers(allowAll, featureServer("a")))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw := connectClientAt(t, f, &mcp.ClientOptions{
		CreateMessageHandler: sampler("x").CreateMessageHandler,
		MultiRoundTrip:       &mcp.MultiRoundTripOptions{Disabled: true},
	}, "2026-07-28")
	first, err := raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"})
	if err != nil || len(first.InputRequests) != 1 {
		t.Fatalf("first round: %v %+v", err, first)
	}
	time.Sleep(3 * inputWait)
	_, err = raw.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a", RequestState: first.RequestState})
	if err == nil || !strings.Contains(err.Error(), "names no call waiting for input") {
		t.Fatalf("late answer: %v, want the request state refused", err)
	}
	// The upstream got the refusal: its call ended with it.
	if err := f.st.Audit().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var outcome string
	deadline := time.Now().Add(5 * time.Second)
	for outcome == "" && time.Now().Before(deadline) {
		_ = f.st.AuditScan(store.AuditFilter{Type: store.RecordCall}, func(r store.Record) bool {
			if r.Tool == "a__ask_a" {
				outcome = r.Outcome
			}
			return true
		})
		time.Sleep(50 * time.Millisecond)
		_ = f.st.Audit().Flush(ctx)
	}
	if outcome != "tool_failure" {
		t.Errorf("the expired call's audit outcome is %q, want tool_failure (the upstream's sampling was refused)", outcome)
	}
}

// A subscription through the gateway gets the upstream's updates, also after the upstream was
// restarted (the gateway renews its subscription), and none after the client unsubscribed.
func TestResourceSubscriptions(t *testing.T) {
	f := startFixture(t, withServers(allowAll, featureServer("a"), featureServer("b")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	updates := make(chan string, 16)
	cs := connectClient(t, f, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updates <- req.Params.URI
	}})
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://b/doc"}); err != nil {
		t.Fatal(err)
	}
	touch := func() {
		t.Helper()
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "b__touch_doc_b"}); err != nil || res.IsError {
			t.Fatalf("touch_doc_b: %v %+v", err, res)
		}
	}
	expect := func(what string) {
		t.Helper()
		select {
		case uri := <-updates:
			if uri != "test://b/doc" {
				t.Fatalf("%s: update of %q", what, uri)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notifications/resources/updated reached the client", what)
		}
	}
	touch()
	expect("subscribed")

	if err := f.g.Upstreams().Get("b").Restart(ctx); err != nil {
		t.Fatal(err)
	}
	touch()
	expect("after the upstream restarted")

	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://b/doc"}); err != nil {
		t.Fatal(err)
	}
	touch()
	select {
	case uri := <-updates:
		t.Fatalf("update of %q after unsubscribing", uri)
	case <-time.After(300 * time.Millisecond):
	}

	// A URI no server offers cannot be subscribed to.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://c/doc"}); err == nil || !strings.Contains(err.Error(), "no server of the gateway offers test://c/doc") {
		t.Errorf("subscribe to a URI no server offers: %v", err)
	}
}

// Reading a resource or getting a prompt of an untrusted server labels the session untrusted,
// as calling one of its tools does, and policies see the label.
func TestUntrustedResourcesAndPromptsLabelTheSession(t *testing.T) {
	untrusted := strings.Replace(featureServer("web"), "    contract: passthrough\n", "    contract: passthrough\n    untrusted: true\n", 1)
	yaml := withServers(allowAll, featureServer("a"), untrusted) + `  rules:
    - id: no-ask-after-untrusted
      effect: deny
      when: 'labels.untrusted && upstream_tool == "ask_a"'
      reason: the session has read untrusted content
`
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	// One gateway each: in-memory sessions have no id, so they share their labels.
	for what, read := range map[string]func(*mcp.ClientSession) error{
		"resource": func(cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://web/doc"})
			return err
		},
		"prompt": func(cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "web__greet", Arguments: map[string]string{"who": "x"}})
			return err
		},
	} {
		t.Log(what)
		f := startFixture(t, yaml)
		cs := connectClient(t, f, sampler("s"))
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"}); err != nil || res.IsError {
			t.Fatalf("before reading untrusted content: %v %+v", err, res)
		}
		// The trusted server's resource does not label the session.
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/doc"}); err != nil {
			t.Fatal(err)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"}); err != nil || res.IsError {
			t.Fatalf("after reading trusted content: %v %+v", err, res)
		}
		if err := read(cs); err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__ask_a"})
		if err != nil || !res.IsError || !strings.Contains(textOf(t, res.Content), "no-ask-after-untrusted") {
			t.Fatalf("after reading untrusted content: %v %+v, want the policy's refusal", err, res)
		}
	}
}

func TestSubscriptionsEndWithTheLastSession(t *testing.T) {
	var s subscriptions
	live := map[string]bool{"s1": true, "s2": true}
	if ended := s.change("u", "s1", true, live); len(ended) != 0 {
		t.Fatalf("subscribe ended %v", ended)
	}
	s.change("u", "s2", true, live)
	if ended := s.change("u", "s1", false, live); len(ended) != 0 {
		t.Fatalf("s1 unsubscribed while s2 is subscribed: ended %v", ended)
	}
	// s2 goes away without unsubscribing: noticed at the next change of any session.
	delete(live, "s2")
	if ended := s.change("v", "", true, live); len(ended) != 1 || ended[0] != "u" {
		t.Fatalf("after s2 went away: ended %v, want [u]", ended)
	}
	// A session without an id is never taken for gone.
	if ended := s.change("x", "s1", false, live); len(ended) != 0 {
		t.Fatalf("the subscription of a session without id ended: %v", ended)
	}
	if ended := s.change("v", "", false, live); len(ended) != 1 || ended[0] != "v" {
		t.Fatalf("unsubscribe of the session without id: ended %v, want [v]", ended)
	}
}

// The bridge is taken only where it is needed: a 2026-07-28 client calling a tool of a server
// that may send requests mid-call (an older revision); not for an older client, a 2026-07-28
// server (it asks in results), or a name that is no tool.
func TestNeedsBridge(t *testing.T) {
	f := startFixture(t, withServers(allowAll, featureServer("old"), server("robot", "")))
	call := func(name, version string) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Meta: mcp.Meta{mcp.MetaKeyProtocolVersion: version}}}
	}
	for _, c := range []struct {
		name, version string
		want          bool
	}{
		{"old__ask_old", "2026-07-28", true},
		{"old__ask_old", "2025-11-25", false},
		{"robot__move", "2026-07-28", false},
		{"nowhere__nothing", "2026-07-28", false},
	} {
		if got := f.g.needsBridge(call(c.name, c.version)); got != c.want {
			t.Errorf("needsBridge(%s at %s) = %v, want %v", c.name, c.version, got, c.want)
		}
	}
}

// A reload that pins another protocol revision restarts the server on it.
func TestReloadRestartsOnAnotherProtocolVersion(t *testing.T) {
	f := startFixture(t, withServers(allowAll, server("robot", "")))
	if !f.g.Upstreams().Get("robot").AsksInResults() {
		t.Fatal("the test server does not speak 2026-07-28 by default")
	}
	rep, err := f.reload(t, withServers(allowAll, server("robot", "    protocol_version: \"2025-11-25\"\n")))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Restarted, []string{"robot"}) {
		t.Fatalf("report: %+v, want robot restarted", rep)
	}
	if f.g.Upstreams().Get("robot").AsksInResults() {
		t.Fatal("after the reload the server still speaks 2026-07-28")
	}
}
