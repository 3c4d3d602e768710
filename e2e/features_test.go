package e2e

//lint:file-ignore SA1019 sampling, elicitation and logging are deprecated from MCP 2026-07-28 on but still part of the protocol, and carrying them for clients is what this file does.

import (
	"context"
	"encoding/json"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// featuresConfig fronts npm's server-everything, with prefixed names: its prompts and the
// names of its resources and templates get "everything__", resource URIs are kept.
const featuresConfig = `
gateway:
  listen: "{{listen}}"
  state_dir: "{{dir}}/state"
  tool_names: prefixed
servers:
  - name: everything
    command: node
    args: ["{{server_everything}}", "stdio", "{{marker}}"]
    contract: passthrough
  # The Go SDK's conformance server speaks 2026-07-28 and puts its server info in every result's
  # _meta: the gateway must not pass that on.
  - name: conf
    command: "{{everything_go}}"
    args: ["{{marker}}"]
    contract: passthrough
`

// What server-everything offers (see its dist/resources, dist/prompts and dist/tools).
const (
	staticDocURI      = "demo://resource/static/document/features.md"
	staticDocName     = "features.md"
	textTemplateURI   = "demo://resource/dynamic/text/{resourceId}"
	textTemplateName  = "Dynamic Text Resource"
	blobTemplateURI   = "demo://resource/dynamic/blob/{resourceId}"
	samplingTool      = "everything__trigger-sampling-request"
	elicitationTool   = "everything__trigger-elicitation-request"
	loggingToggleTool = "everything__toggle-simulated-logging"
)

// featureClient records what the upstream asks a downstream client through the gateway, and
// answers with known values.
type featureClient struct {
	mu       sync.Mutex
	sampling []*mcp.CreateMessageParams
	elicits  []*mcp.ElicitParams
	logs     chan *mcp.LoggingMessageParams
}

const (
	sampledText  = "sampled by the e2e client: the answer is 42"
	sampledModel = "e2e-model-7"
)

var elicitAnswer = map[string]any{"name": "Ada Lovelace", "check": true, "email": "ada@example.com", "integer": 7}

func newFeatureClient() *featureClient {
	return &featureClient{logs: make(chan *mcp.LoggingMessageParams, 100)}
}

func (f *featureClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			f.mu.Lock()
			f.sampling = append(f.sampling, req.Params)
			f.mu.Unlock()
			return &mcp.CreateMessageResult{
				Content:    &mcp.TextContent{Text: sampledText},
				Model:      sampledModel,
				Role:       "assistant",
				StopReason: "endTurn",
			}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			f.mu.Lock()
			f.elicits = append(f.elicits, req.Params)
			f.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: elicitAnswer}, nil
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			select {
			case f.logs <- req.Params:
			default:
			}
		},
	}
}

// connectDirect connects a client straight to a server-everything of its own, for comparison.
func connectDirect(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command("node", serverEverything, "stdio", marker(t)+"-direct")
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-direct", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect directly to server-everything: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectDirectConf connects straight to a Go SDK conformance server of its own.
func connectDirectConf(t *testing.T) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(everythingGoBin, marker(t)+"-direct-conf")
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-direct", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect directly to the conformance server: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestFeatures(t *testing.T) {
	// Registered first, so it runs last: every child process is gone once the gateways and the
	// direct client are stopped.
	t.Cleanup(func() { waitNoProcesses(t, marker(t), 15*time.Second) })

	direct := connectDirect(t, newFeatureClient().options())
	directConf := connectDirectConf(t)

	transports := []struct {
		name string
		// connect returns a session of a client with handlers, and one of a client without
		// any (nil if not tested on this transport).
		connect func(t *testing.T, opts *mcp.ClientOptions) (cs, bare *mcp.ClientSession)
		// newProtocol: the session uses MCP 2026-07-28, where the log level goes in each
		// request's _meta, and the SDK forbids server-initiated requests.
		newProtocol bool
	}{
		// A client of 2025-11-25 on the default config begins with initialize and is served
		// in a session.
		{"http", func(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *mcp.ClientSession) {
			cfg, addr := writeConfig(t, featuresConfig)
			startGateway(t, cfg, addr)
			return connectHTTPAt(t, addr, opts, "2025-11-25"), connectHTTPAt(t, addr, nil, "2025-11-25")
		}, false},
		// The SDK client's default, 2026-07-28 (server/discover), on the default config: each
		// request stands alone, as over stateless HTTP.
		{"http_2026-07-28", func(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *mcp.ClientSession) {
			cfg, addr := writeConfig(t, featuresConfig)
			startGateway(t, cfg, addr)
			return connectHTTP(t, addr, opts), connectHTTP(t, addr, nil)
		}, true},
		{"stdio_2025-11-25", func(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *mcp.ClientSession) {
			cfg, _ := writeConfig(t, featuresConfig)
			cs, _ := connectStdioAt(t, cfg, opts, "2025-11-25")
			return cs, nil
		}, false},
		// Over stateless streamable HTTP the SDK client speaks 2026-07-28 (server/discover): the
		// older server's sampling and elicitation reach it as input requests in results.
		{"http_stateless", func(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *mcp.ClientSession) {
			cfg, addr := writeConfig(t, strings.Replace(featuresConfig, "tool_names: prefixed", "tool_names: prefixed\n  http_mode: stateless", 1))
			startGateway(t, cfg, addr)
			return connectHTTP(t, addr, opts), connectHTTP(t, addr, nil)
		}, true},
		// Over stdio the SDK client's default is server/discover at 2026-07-28.
		{"stdio_2026-07-28", func(t *testing.T, opts *mcp.ClientOptions) (*mcp.ClientSession, *mcp.ClientSession) {
			cfg, _ := writeConfig(t, featuresConfig)
			cs, _ := connectStdio(t, cfg, opts)
			return cs, nil
		}, true},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			fc := newFeatureClient()
			cs, bare := tr.connect(t, fc.options())
			if v := cs.InitializeResult().ProtocolVersion; (v >= "2026-07-28") != tr.newProtocol {
				t.Fatalf("negotiated protocol version %s, not what this subtest is about", v)
			}
			// The sampling and elicitation tools are registered by server-everything only after
			// it initialised (announced with tools/list_changed).
			waitForTools(t, cs, samplingTool, elicitationTool, loggingToggleTool, "everything__echo")

			t.Run("resources", func(t *testing.T) { checkResources(t, cs, direct) })
			t.Run("prompts", func(t *testing.T) { checkPrompts(t, cs, direct) })
			t.Run("completions", func(t *testing.T) { checkCompletions(t, cs, direct) })
			t.Run("sampling", func(t *testing.T) {
				checkSampling(t, cs, fc)
			})
			t.Run("elicitation", func(t *testing.T) {
				checkElicitation(t, cs, fc)
			})
			t.Run("logging", func(t *testing.T) { checkLogging(t, cs, fc, tr.newProtocol) })
			t.Run("logging_before_result", func(t *testing.T) { checkLoggingRace(t, cs, fc, tr.newProtocol) })
			t.Run("fresh_results", func(t *testing.T) { checkFreshResults(t, cs, direct, directConf) })
			if bare != nil {
				t.Run("client_without_sampling", func(t *testing.T) { checkUndeclaredCapabilities(t, bare) })
			}
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// collect gathers a paginated list by key, failing the test on an error.
func collect[T any](t *testing.T, method string, items iter.Seq2[T, error], key func(T) string) map[string]T {
	t.Helper()
	out := map[string]T{}
	for it, err := range items {
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		out[key(it)] = it
	}
	return out
}

func listResources(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Resource {
	t.Helper()
	return collect(t, "resources/list", cs.Resources(ctxFor(t), nil), func(r *mcp.Resource) string { return r.URI })
}

func listTemplates(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.ResourceTemplate {
	t.Helper()
	return collect(t, "resources/templates/list", cs.ResourceTemplates(ctxFor(t), nil), func(r *mcp.ResourceTemplate) string { return r.URITemplate })
}

func listPrompts(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Prompt {
	t.Helper()
	return collect(t, "prompts/list", cs.Prompts(ctxFor(t), nil), func(p *mcp.Prompt) string { return p.Name })
}

func checkResources(t *testing.T, cs, direct *mcp.ClientSession) {
	ctx := ctxFor(t)
	want := listResources(t, direct)
	if want[staticDocURI] == nil {
		t.Fatalf("server-everything itself does not list %s; its resources: %s", staticDocURI, mustJSON(want))
	}
	got := listResources(t, cs)
	for uri, w := range want {
		g := got[uri]
		if g == nil {
			t.Errorf("resource %s of the upstream is not listed by the gateway", uri)
			continue
		}
		if g.Name != "everything__"+w.Name || g.MIMEType != w.MIMEType || g.Description != w.Description {
			t.Errorf("resource %s: gateway lists %s, upstream %s", uri, mustJSON(g), mustJSON(w))
		}
	}
	if g := got[staticDocURI]; g == nil || g.Name != "everything__"+staticDocName || g.MIMEType != "text/markdown" {
		t.Errorf("static resource listed as %s", mustJSON(g))
	}

	// Reading the static resource: the upstream's content, which is the file it serves.
	file, err := os.ReadFile(filepath.Join(filepath.Dir(serverEverything), "docs", staticDocName))
	if err != nil {
		t.Fatal(err)
	}
	gres, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: staticDocURI})
	if err != nil {
		t.Fatalf("resources/read %s through the gateway: %v", staticDocURI, err)
	}
	dres, err := direct.ReadResource(ctx, &mcp.ReadResourceParams{URI: staticDocURI})
	if err != nil {
		t.Fatalf("resources/read %s directly: %v", staticDocURI, err)
	}
	if mustJSON(gres.Contents) != mustJSON(dres.Contents) {
		t.Errorf("resources/read %s: gateway %s, upstream %s", staticDocURI, mustJSON(gres.Contents), mustJSON(dres.Contents))
	}
	if len(gres.Contents) != 1 || gres.Contents[0].Text != string(file) || gres.Contents[0].URI != staticDocURI || gres.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("resources/read %s returned %.300s, want the text of %s", staticDocURI, mustJSON(gres.Contents), staticDocName)
	}

	// Templates: listed with prefixed names and the upstream's URI templates.
	wantT := listTemplates(t, direct)
	gotT := listTemplates(t, cs)
	for tmpl, w := range wantT {
		g := gotT[tmpl]
		if g == nil || g.Name != "everything__"+w.Name || g.MIMEType != w.MIMEType || g.Description != w.Description {
			t.Errorf("template %s: gateway lists %s, upstream %s", tmpl, mustJSON(g), mustJSON(w))
		}
	}
	if g := gotT[textTemplateURI]; g == nil || g.Name != "everything__"+textTemplateName {
		t.Errorf("template %s listed as %s", textTemplateURI, mustJSON(g))
	}

	// Reading URIs of the templates (not listed as resources): content made by the upstream.
	textURI := strings.Replace(textTemplateURI, "{resourceId}", "7", 1)
	tres, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: textURI})
	if err != nil {
		t.Fatalf("resources/read %s: %v", textURI, err)
	}
	textRE := regexp.MustCompile(`^Resource 7: This is a plaintext resource created at \S`)
	if len(tres.Contents) != 1 || tres.Contents[0].URI != textURI || tres.Contents[0].MIMEType != "text/plain" || !textRE.MatchString(tres.Contents[0].Text) {
		t.Errorf("resources/read %s returned %s", textURI, mustJSON(tres.Contents))
	}
	blobURI := strings.Replace(blobTemplateURI, "{resourceId}", "3", 1)
	bres, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: blobURI})
	if err != nil {
		t.Fatalf("resources/read %s: %v", blobURI, err)
	}
	if len(bres.Contents) != 1 || bres.Contents[0].URI != blobURI || !strings.HasPrefix(string(bres.Contents[0].Blob), "Resource 3: This is a base64 blob created at ") {
		t.Errorf("resources/read %s returned %s", blobURI, mustJSON(bres.Contents))
	}

	// A URI the upstream does not know is an error, not empty content.
	if res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/static/document/no-such-file.md"}); err == nil {
		t.Errorf("reading an unknown URI succeeded: %s", mustJSON(res))
	}
}

func checkPrompts(t *testing.T, cs, direct *mcp.ClientSession) {
	ctx := ctxFor(t)
	want := listPrompts(t, direct)
	got := listPrompts(t, cs)
	for _, name := range []string{"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"} {
		w, g := want[name], got["everything__"+name]
		if w == nil {
			t.Fatalf("server-everything itself does not list prompt %s: %s", name, mustJSON(want))
		}
		if g == nil {
			t.Errorf("prompt everything__%s is not listed; listed: %s", name, mustJSON(got))
			continue
		}
		if g.Description != w.Description || mustJSON(g.Arguments) != mustJSON(w.Arguments) {
			t.Errorf("prompt %s: gateway lists %s, upstream %s", name, mustJSON(g), mustJSON(w))
		}
	}
	if got["args-prompt"] != nil {
		t.Error("prompt listed under its bare name with tool_names: prefixed")
	}

	args := map[string]string{"city": "Paris", "state": "Texas"}
	gres, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__args-prompt", Arguments: args})
	if err != nil {
		t.Fatalf("prompts/get everything__args-prompt: %v", err)
	}
	dres, err := direct.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: args})
	if err != nil {
		t.Fatalf("prompts/get args-prompt directly: %v", err)
	}
	if mustJSON(gres.Messages) != mustJSON(dres.Messages) || gres.Description != dres.Description {
		t.Errorf("prompts/get: gateway %s, upstream %s", mustJSON(gres), mustJSON(dres))
	}
	if len(gres.Messages) != 1 || gres.Messages[0].Role != "user" {
		t.Fatalf("prompts/get messages: %s", mustJSON(gres.Messages))
	}
	if tc, ok := gres.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "What's weather in Paris, Texas?" {
		t.Errorf("prompts/get message: %s", mustJSON(gres.Messages[0]))
	}

	// The upstream's own name is not the gateway's.
	if res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: args}); err == nil {
		t.Errorf("prompts/get of the bare name succeeded: %s", mustJSON(res))
	}
}

func complete(t *testing.T, cs *mcp.ClientSession, p *mcp.CompleteParams) []string {
	t.Helper()
	res, err := cs.Complete(ctxFor(t), p)
	if err != nil {
		t.Fatalf("completion/complete %s: %v", mustJSON(p), err)
	}
	return res.Completion.Values
}

func checkCompletions(t *testing.T, cs, direct *mcp.ClientSession) {
	prompt := func(name, arg, value string, context map[string]string) *mcp.CompleteParams {
		p := &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: name},
			Argument: mcp.CompleteParamsArgument{Name: arg, Value: value},
		}
		if context != nil {
			p.Context = &mcp.CompleteContext{Arguments: context}
		}
		return p
	}
	tests := []struct {
		name          string
		viaGW, direct *mcp.CompleteParams
		want          []string
	}{
		{"prompt argument",
			prompt("everything__completable-prompt", "department", "S", nil),
			prompt("completable-prompt", "department", "S", nil),
			[]string{"Sales", "Support"}},
		{"prompt argument with context",
			prompt("everything__completable-prompt", "name", "", map[string]string{"department": "Engineering"}),
			prompt("completable-prompt", "name", "", map[string]string{"department": "Engineering"}),
			[]string{"Alice", "Bob", "Charlie"}},
		{"resource template variable",
			&mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: textTemplateURI}, Argument: mcp.CompleteParamsArgument{Name: "resourceId", Value: "42"}},
			&mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: textTemplateURI}, Argument: mcp.CompleteParamsArgument{Name: "resourceId", Value: "42"}},
			[]string{"42"}},
	}
	for _, tt := range tests {
		got := complete(t, cs, tt.viaGW)
		want := complete(t, direct, tt.direct)
		if !reflect.DeepEqual(want, tt.want) {
			t.Errorf("%s: server-everything itself completes %v, this test expects %v", tt.name, want, tt.want)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: gateway completes %v, upstream %v", tt.name, got, want)
		}
	}
	// The bare upstream name is not a prompt of the gateway.
	if res, err := cs.Complete(ctxFor(t), prompt("completable-prompt", "department", "S", nil)); err == nil {
		t.Errorf("completion of the bare prompt name succeeded: %s", mustJSON(res))
	}
}

// resultText is the text of every text block of a result.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func checkSampling(t *testing.T, cs *mcp.ClientSession, fc *featureClient) {
	res, _ := call(t, cs, samplingTool, map[string]any{"prompt": "tell me about robots", "maxTokens": 42})
	text := resultText(res)
	if res.IsError || !strings.Contains(text, sampledText) || !strings.Contains(text, sampledModel) {
		t.Fatalf("sampling tool result does not carry the client's sample: %s", mustJSON(res))
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.sampling) != 1 {
		t.Fatalf("the client's sampling handler ran %d times, want 1", len(fc.sampling))
	}
	p := fc.sampling[0]
	if p.MaxTokens != 42 || p.SystemPrompt != "You are a helpful test server." || len(p.Messages) != 1 || p.Messages[0].Role != "user" {
		t.Fatalf("sampling request: %s", mustJSON(p))
	}
	if tc, ok := p.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Resource trigger-sampling-request context: tell me about robots" {
		t.Errorf("sampling request message: %s", mustJSON(p.Messages[0]))
	}
}

func checkElicitation(t *testing.T, cs *mcp.ClientSession, fc *featureClient) {
	res, _ := call(t, cs, elicitationTool, map[string]any{})
	text := resultText(res)
	for _, want := range []string{"User provided the requested information", "- Name: Ada Lovelace", "- Agreed to terms: true", "- Email: ada@example.com", "- Favorite Integer: 7"} {
		if res.IsError || !strings.Contains(text, want) {
			t.Fatalf("elicitation tool result lacks %q: %s", want, mustJSON(res))
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.elicits) != 1 {
		t.Fatalf("the client's elicitation handler ran %d times, want 1", len(fc.elicits))
	}
	p := fc.elicits[0]
	schema, _ := json.Marshal(p.RequestedSchema)
	if p.Message != "Please provide inputs for the following fields:" || !strings.Contains(string(schema), `"Your full, legal name"`) {
		t.Errorf("elicitation request: %s", mustJSON(p))
	}
}

// setLogLevel asks for log messages at level and above: with logging/setLevel, or at 2026-07-28
// in the request's own _meta.
func setLogLevel(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams, level mcp.LoggingLevel, perRequest bool) {
	t.Helper()
	if perRequest {
		params.Meta = mcp.Meta{mcp.MetaKeyLogLevel: level}
	} else if err := cs.SetLoggingLevel(ctxFor(t), &mcp.SetLoggingLevelParams{Level: level}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
}

func drainLogs(fc *featureClient) {
	for len(fc.logs) > 0 {
		<-fc.logs
	}
}

// checkLogging: log messages an upstream sends while serving the client's call reach the client.
// The conformance server's test_tool_with_logging logs "Tool execution started", waits 50 ms,
// logs "Tool processing data", waits 50 ms, logs "Tool execution completed" and returns.
func checkLogging(t *testing.T, cs *mcp.ClientSession, fc *featureClient, perRequest bool) {
	params := &mcp.CallToolParams{Name: "conf__test_tool_with_logging", Arguments: map[string]any{}}
	setLogLevel(t, cs, params, "debug", perRequest)
	drainLogs(fc)
	res, err := cs.CallTool(ctxFor(t), params)
	if err != nil || res.IsError || textOf(res) != "Tool with logging executed successfully" {
		t.Fatalf("test_tool_with_logging: %v %s", err, mustJSON(res))
	}
	// All three, the last one sent just before the result (see checkLoggingRace). The client's
	// SDK may hand a notification to the handler a moment after the result: wait for it.
	for _, want := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		select {
		case m := <-fc.logs:
			if m.Data != want || m.Level != "info" {
				t.Fatalf("log message %s, want %q at info", mustJSON(m), want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("log message %q the upstream sent during the call did not reach the client", want)
		}
	}
}

// checkLoggingRace: server-everything's toggle-simulated-logging sends one log message and its
// result right after it; the message must reach the client.
func checkLoggingRace(t *testing.T, cs *mcp.ClientSession, fc *featureClient, perRequest bool) {
	params := &mcp.CallToolParams{Name: loggingToggleTool, Arguments: map[string]any{}}
	setLogLevel(t, cs, params, "debug", perRequest)
	for range 5 {
		drainLogs(fc)
		res, err := cs.CallTool(ctxFor(t), params)
		if err != nil || res.IsError || !strings.Contains(textOf(res), "Started simulated") {
			t.Fatalf("toggle-simulated-logging: %v %s", err, mustJSON(res))
		}
		select {
		case m := <-fc.logs:
			data, _ := m.Data.(string)
			if !regexp.MustCompile(`(?i)^\w+[- ]level[- ]message`).MatchString(data) {
				t.Errorf("log message: %s", mustJSON(m))
			}
		case <-time.After(2 * time.Second):
			t.Fatal("the log message server-everything sent during the call did not reach the client")
		}
		// Off again (its next message would come in 5 s).
		if res, err := cs.CallTool(ctxFor(t), params); err != nil || !strings.Contains(textOf(res), "Stopped simulated") {
			t.Fatalf("toggle-simulated-logging off: %v %s", err, mustJSON(res))
		}
	}
}

// checkFreshResults: results through the gateway never carry an upstream's server info in
// _meta; if they have one, it is the gateway's.
func checkFreshResults(t *testing.T, cs, direct, directConf *mcp.ClientSession) {
	ctx := ctxFor(t)
	gatewayInfo := cs.InitializeResult().ServerInfo
	upstreamNames := []string{direct.InitializeResult().ServerInfo.Name, directConf.InitializeResult().ServerInfo.Name}
	for _, n := range upstreamNames {
		if gatewayInfo == nil || n == "" || gatewayInfo.Name == n {
			t.Fatalf("server info: gateway %s, upstreams %v", mustJSON(gatewayInfo), upstreamNames)
		}
	}
	// The conformance server does put its server info in results, so the check below means
	// something.
	dres, err := directConf.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if s := mustJSON(dres.Meta[mcp.MetaKeyServerInfo]); !strings.Contains(s, upstreamNames[1]) {
		t.Fatalf("the conformance server's own result has no server info in _meta: %s", mustJSON(dres))
	}
	gconf, _ := call(t, cs, "conf__test_simple_text", map[string]any{})
	if gconf.IsError || textOf(gconf) != textOf(dres) {
		t.Fatalf("test_simple_text: gateway %s, upstream %s", mustJSON(gconf), mustJSON(dres))
	}
	gres, _ := call(t, cs, "everything__echo", map[string]any{"message": "fresh"})
	if gres.IsError || !strings.Contains(textOf(gres), "fresh") {
		t.Fatalf("echo: %s", mustJSON(gres))
	}
	pres, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "everything__simple-prompt"})
	if err != nil {
		t.Fatal(err)
	}
	rres, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: staticDocURI})
	if err != nil {
		t.Fatal(err)
	}
	for what, meta := range map[string]mcp.Meta{
		"tools/call conf": gconf.Meta, "tools/call everything": gres.Meta, "prompts/get": pres.Meta, "resources/read": rres.Meta,
	} {
		for k, v := range meta {
			if !strings.HasPrefix(k, mcp.MetaKeyServerInfo) {
				continue
			}
			s := mustJSON(v)
			for _, n := range upstreamNames {
				if strings.Contains(s, n) {
					t.Errorf("%s result _meta[%s] = %s names upstream %q", what, k, s, n)
				}
			}
			if !strings.Contains(s, gatewayInfo.Name) {
				t.Errorf("%s result _meta[%s] = %s does not name the gateway %q", what, k, s, gatewayInfo.Name)
			}
		}
	}
}

// checkUndeclaredCapabilities: a client that declared neither sampling nor elicitation calling
// the tools that need them gets the gateway's explanation, and nothing is asked of it.
func checkUndeclaredCapabilities(t *testing.T, cs *mcp.ClientSession) {
	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{samplingTool, map[string]any{"prompt": "x", "maxTokens": 5}, "did not declare the sampling capability"},
		{elicitationTool, map[string]any{}, "did not declare the elicitation capability"},
	} {
		tool, want := tt.tool, tt.want
		res, err := cs.CallTool(ctxFor(t), &mcp.CallToolParams{Name: tool, Arguments: tt.args})
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", tool, err, want)
			}
		case !res.IsError || !strings.Contains(resultText(res), want):
			t.Errorf("%s: result does not fail with %q: %s", tool, want, mustJSON(res))
		}
	}
}
