package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// recorder is an SDK tracer whose ended spans the test reads.
func recorder(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), sr
}

// gatewayTelemetry is the gateway's own telemetry, on: its exporter points at a port nothing
// listens on, so its spans go nowhere, but they are real spans of the gateway's provider.
func gatewayTelemetry(t *testing.T) *telemetry.Provider {
	t.Helper()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) // the export that cannot succeed
	p, err := telemetry.New(context.Background(), config.Telemetry{Endpoint: "http://127.0.0.1:1"},
		telemetry.Options{Getenv: func(string) string { return "" }})
	if err != nil || p == nil {
		t.Fatalf("telemetry.New = %v, %v", p, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Shutdown(ctx)
	})
	return p
}

// chatEndpoint is a Chat Completions server (the ollama provider's wire) that answers with
// answers in order, the last one repeated, and keeps each request's headers.
type chatEndpoint struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newChatEndpoint(t *testing.T, answers ...func(w http.ResponseWriter)) *chatEndpoint {
	t.Helper()
	e := &chatEndpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.headers = append(e.headers, r.Header.Clone())
		n := len(e.headers)
		e.mu.Unlock()
		answers[min(n, len(answers))-1](w)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *chatEndpoint) received() []http.Header {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.headers
}

func answer(body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { io.WriteString(w, body) }
}

func status(code int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

const (
	navigateCall = `{"id":"c1","model":"llama3.2-0001","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"robot__navigate_to","arguments":"{\"target\":\"table\"}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":4}}`
	twoCalls = `{"id":"c1","model":"llama3.2","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"robot__navigate_to","arguments":"{}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"robot__pick_object","arguments":"{}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":11,"completion_tokens":4}}`
	doneAnswer = `{"id":"c2","model":"llama3.2-0001","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":20,"completion_tokens":2}}`
)

// httpModel is the ollama provider against e, configured as the command does; inject is the
// transport's trace context hook.
func httpModel(t *testing.T, e *chatEndpoint, inject func(context.Context, http.Header)) (model.Model, model.Settings) {
	t.Helper()
	s, err := ModelSettings(config.LLM{Provider: "ollama", BaseURL: e.URL, MaxRetries: intp(2)})
	if err != nil {
		t.Fatal(err)
	}
	s.InjectHeader = inject
	m, err := model.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// chainCaller runs each call through a governor chain, as the gateway does.
type chainCaller struct{ chain governor.Handler }

func (c chainCaller) Call(ctx context.Context, call *governor.Call) *governor.Outcome {
	return c.chain.Handle(ctx, call)
}

// spansByName indexes the recorded spans; a name recorded twice fails the test.
func spansByName(t *testing.T, sr *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		if m[s.Name()] != nil {
			t.Errorf("two spans named %q", s.Name())
		}
		m[s.Name()] = s
	}
	return m
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %q has parent %s in trace %s, want %q (%s in %s)", child.Name(), child.Parent().SpanID(), child.SpanContext().TraceID(),
			parent.Name(), parent.SpanContext().SpanID(), parent.SpanContext().TraceID())
	}
}

// TestRunTraceTree runs a task over a real HTTP model endpoint and a governor chain traced by
// the gateway's telemetry: one tool call, then the answer. The spans form run → step → chat and
// step → the chain's call span, under the caller's span; each model request carried the
// traceparent of its own chat span, made by the gateway's injection; nothing of the task, the
// prompts or the answer is on a span.
func TestRunTraceTree(t *testing.T) {
	tracer, sr := recorder(t)
	p := gatewayTelemetry(t)
	e := newChatEndpoint(t, answer(navigateCall), answer(doneAnswer))
	m, s := httpModel(t, e, p.InjectHeader)

	var callSpan sdktrace.ReadOnlySpan // the gateway's call span, as the chain's final handler sees it
	var callParent trace.SpanContext
	final := governor.HandlerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
		callSpan, _ = trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
		if callSpan != nil {
			callParent = callSpan.Parent()
		}
		return succeeded(c.Name)
	})
	caller := chainCaller{governor.Chain(final, governor.Trace(p))}
	r, _ := newRunner(m, caller, Options{MaxSteps: 5})
	r.Tracer, r.Provider, r.ModelName = tracer, "ollama", s.RequestModel()

	ctx, parent := tracer.Start(context.Background(), "ci job")
	rep, err := r.Run(ctx, "drive to the secret table")
	parent.End()
	if err != nil || rep.Exit != ExitAnswered || rep.Steps != 2 || rep.Calls != 1 {
		t.Fatalf("run: %+v, %v", rep, err)
	}

	var runs, steps, chats []sdktrace.ReadOnlySpan
	var job sdktrace.ReadOnlySpan
	for _, sp := range sr.Ended() {
		switch sp.Name() {
		case "agent run":
			runs = append(runs, sp)
		case "agent step":
			steps = append(steps, sp)
		case "chat llama3.2":
			chats = append(chats, sp)
		case "ci job":
			job = sp
		default:
			t.Errorf("unexpected span %q", sp.Name())
		}
	}
	if len(runs) != 1 || len(steps) != 2 || len(chats) != 2 || job == nil {
		t.Fatalf("spans: %d runs, %d steps, %d chats, job %v; want 1, 2, 2 and the job", len(runs), len(steps), len(chats), job != nil)
	}
	run := runs[0]
	childOf(t, run, job)
	for i, step := range steps {
		childOf(t, step, run)
		childOf(t, chats[i], step)
		if got := attrs(step)[attrStep].AsInt64(); got != int64(i+1) {
			t.Errorf("step span %d has step %d", i+1, got)
		}
		if chats[i].SpanKind() != trace.SpanKindClient {
			t.Errorf("chat span %d is %s, want client", i+1, chats[i].SpanKind())
		}
	}

	// The tool call's span is the gateway's, a child of the first step's.
	if callSpan == nil {
		t.Fatal("the chain's final handler saw no recording SDK span")
	}
	if callParent.SpanID() != steps[0].SpanContext().SpanID() || callSpan.SpanContext().TraceID() != run.SpanContext().TraceID() {
		t.Errorf("call span %q has parent %s in trace %s, want the first step %s in %s", callSpan.Name(),
			callParent.SpanID(), callSpan.SpanContext().TraceID(), steps[0].SpanContext().SpanID(), run.SpanContext().TraceID())
	}
	if got := attrs(callSpan)[telemetry.AttrTransport].AsString(); got != "agent" {
		t.Errorf("call span network.transport = %q, want agent", got)
	}
	if got := attrs(callSpan)[telemetry.AttrPrincipal].AsString(); got != Principal {
		t.Errorf("call span principal = %q, want %q", got, Principal)
	}

	// Each model request carried its chat span's context, as W3C traceparent.
	got := e.received()
	if len(got) != 2 {
		t.Fatalf("%d model requests, want 2", len(got))
	}
	for i, h := range got {
		sc := chats[i].SpanContext()
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if tp := h.Get("traceparent"); tp != want {
			t.Errorf("request %d traceparent %q, want %q (its chat span)", i+1, tp, want)
		}
		if h.Get("baggage") != "" {
			t.Errorf("request %d carried baggage %q", i+1, h.Get("baggage"))
		}
	}

	ca := attrs(chats[0])
	for key, want := range map[attribute.Key]any{
		telemetry.AttrOperation: "chat",
		attrRequestModel:        "llama3.2",
		attrResponseModel:       "llama3.2-0001",
		attrResponseID:          "c1",
		attrProviderName:        "ollama",
		attrInputTokens:         int64(11),
		attrOutputTokens:        int64(4),
	} {
		if got := ca[key].AsInterface(); got != want {
			t.Errorf("chat span %s = %v, want %v", key, got, want)
		}
	}
	if got := ca[attrFinishReasons].AsStringSlice(); len(got) != 1 || got[0] != "tool_calls" {
		t.Errorf("chat span finish reasons = %v", got)
	}
	ra := attrs(run)
	for key, want := range map[attribute.Key]any{
		telemetry.AttrOperation: "invoke_agent",
		attrLLMProvider:         "ollama",
		attrRequestModel:        "llama3.2",
		attrConversationID:      "run-1",
		attrMaxSteps:            int64(5),
		attrExit:                "answered",
		attrSteps:               int64(2),
		attrToolCalls:           int64(1),
		attrInputTokens:         int64(31),
		attrOutputTokens:        int64(6),
	} {
		if got := ra[key].AsInterface(); got != want {
			t.Errorf("run span %s = %v, want %v", key, got, want)
		}
	}
	if run.Status().Code == codes.Error {
		t.Errorf("answered run's span has status %v", run.Status())
	}
	for _, sp := range sr.Ended() {
		for _, kv := range sp.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, "secret") || strings.Contains(v, "done") || strings.Contains(v, "table") {
				t.Errorf("span %q attribute %s = %q holds the task, an argument or the answer", sp.Name(), kv.Key, v)
			}
		}
	}
}

// TestRunTraceModelErrors checks that a model request the provider refuses (HTTP 400, not
// retried) marks its chat span, and the run's, failed with a bounded error.type; that a
// retried request is one span with a retry event and one traceparent; and that a refusal marks
// the chat span model_refusal.
func TestRunTraceModelErrors(t *testing.T) {
	inject := gatewayTelemetry(t).InjectHeader

	t.Run("status", func(t *testing.T) {
		tracer, sr := recorder(t)
		e := newChatEndpoint(t, status(http.StatusBadRequest, `{"error":{"message":"the secret prompt is too long"}}`))
		m, s := httpModel(t, e, inject)
		r, _ := newRunner(m, &fakeCaller{}, Options{})
		r.Tracer, r.Provider, r.ModelName = tracer, "ollama", s.RequestModel()
		if rep, err := r.Run(context.Background(), "anything"); err == nil || rep.Exit != ExitError {
			t.Fatalf("run: %+v, %v", rep, err)
		}
		spans := spansByName(t, sr)
		chat, run := spans["chat llama3.2"], spans["agent run"]
		if chat == nil || run == nil {
			t.Fatalf("spans %v", spans)
		}
		if got := attrs(chat)[telemetry.AttrErrorType].AsString(); got != "400" || chat.Status().Code != codes.Error {
			t.Errorf("chat span error.type %q, status %v; want 400, error", got, chat.Status())
		}
		if got := attrs(run)[telemetry.AttrErrorType].AsString(); got != "error" || run.Status().Code != codes.Error {
			t.Errorf("run span error.type %q, status %v; want error, error", got, run.Status())
		}
		if strings.Contains(chat.Status().Description, "secret") {
			t.Errorf("chat span status %q quotes the provider's message", chat.Status().Description)
		}
	})

	t.Run("retried", func(t *testing.T) {
		tracer, sr := recorder(t)
		e := newChatEndpoint(t, status(http.StatusTooManyRequests, `{}`), answer(doneAnswer))
		m, s := httpModel(t, e, inject)
		r, _ := newRunner(m, &fakeCaller{}, Options{})
		r.Tracer, r.Provider, r.ModelName = tracer, "ollama", s.RequestModel()
		if rep, err := r.Run(context.Background(), "anything"); err != nil || rep.Exit != ExitAnswered {
			t.Fatalf("run: %+v, %v", rep, err)
		}
		chat := spansByName(t, sr)["chat llama3.2"]
		if chat == nil || chat.Status().Code == codes.Error {
			t.Fatalf("chat span %v", chat)
		}
		ev := chat.Events()
		if len(ev) != 1 || ev[0].Name != "retry" {
			t.Fatalf("chat span events %+v, want one retry", ev)
		}
		var errType string
		for _, kv := range ev[0].Attributes {
			if kv.Key == telemetry.AttrErrorType {
				errType = kv.Value.AsString()
			}
		}
		if errType != "429" {
			t.Errorf("retry event error.type %q, want 429", errType)
		}
		h := e.received()
		if len(h) != 2 || h[0].Get("traceparent") == "" || h[0].Get("traceparent") != h[1].Get("traceparent") {
			t.Errorf("traceparents of the attempts: %v", h)
		}
	})

	t.Run("refusal", func(t *testing.T) {
		tracer, sr := recorder(t)
		r, _ := newRunner(scripted(t, model.Reply{FinishReason: string(model.FinishRefusal)}), &fakeCaller{}, Options{})
		r.Tracer, r.Provider = tracer, "scripted"
		if rep, _ := r.Run(context.Background(), "anything"); rep.Exit != ExitRefused {
			t.Fatalf("run: %+v", rep)
		}
		spans := spansByName(t, sr)
		chat := spans["chat"]
		if chat == nil {
			t.Fatalf("spans %v, want an unnamed-model chat span", spans)
		}
		if got := attrs(chat)[telemetry.AttrErrorType].AsString(); got != "model_refusal" {
			t.Errorf("chat span error.type %q, want model_refusal", got)
		}
		if got := attrs(spans["agent run"])[attrExit].AsString(); got != "refused" {
			t.Errorf("run span exit %q, want refused", got)
		}
	})
}

// TestRunTraceRefusedCalls checks that the calls the agent answers itself — the second of a turn
// under one_tool_per_turn, arguments that do not parse — have a failed span under their step,
// naming only tools the catalog lists.
func TestRunTraceRefusedCalls(t *testing.T) {
	tracer, sr := recorder(t)
	m := modelFunc(func(_ context.Context, c *model.Call) (*model.Result, error) {
		if len(c.Messages) > 1 {
			return &model.Result{Blocks: []model.Block{{Kind: model.BlockText, Text: "ok"}}, FinishReason: model.FinishStop}, nil
		}
		return &model.Result{FinishReason: model.FinishToolCalls, Blocks: []model.Block{
			{Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "1", Name: "robot__navigate_to", Arguments: []byte(`{}`)}},
			{Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "2", Name: "robot__pick_object", Arguments: []byte(`{}`)}},
			{Kind: model.BlockToolCall, ToolCall: &model.ToolCall{ID: "3", Name: "made up <name>", Arguments: []byte(`{}`)}},
		}}, nil
	})
	r, _ := newRunner(m, &fakeCaller{}, Options{OneToolPerTurn: true})
	r.Tracer = tracer
	if rep, err := r.Run(context.Background(), "anything"); err != nil || rep.Exit != ExitAnswered {
		t.Fatalf("run: %+v, %v", rep, err)
	}
	var step sdktrace.ReadOnlySpan
	var refused []sdktrace.ReadOnlySpan
	for _, sp := range sr.Ended() {
		switch {
		case sp.Name() == "agent step" && attrs(sp)[attrStep].AsInt64() == 1:
			step = sp
		case strings.HasPrefix(sp.Name(), "tools/call"):
			refused = append(refused, sp)
		}
	}
	if step == nil || len(refused) != 2 {
		t.Fatalf("step %v, %d refused call spans; want 2", step, len(refused))
	}
	if refused[0].Name() != "tools/call robot__pick_object" || refused[1].Name() != "tools/call" {
		t.Errorf("refused call spans %q, %q", refused[0].Name(), refused[1].Name())
	}
	for _, sp := range refused {
		childOf(t, sp, step)
		if got := attrs(sp)[telemetry.AttrErrorType].AsString(); got != string(governor.KindOneToolPerTurn) || sp.Status().Code != codes.Error {
			t.Errorf("span %q error.type %q, status %v", sp.Name(), got, sp.Status())
		}
	}
}

// TestRunUntracedSendsNothing runs with telemetry off, as the command does (no tracer, no
// injection), under a caller's recording span: no span of the agent's is made and no model
// request carries trace context.
func TestRunUntracedSendsNothing(t *testing.T) {
	tracer, sr := recorder(t)
	e := newChatEndpoint(t, answer(twoCalls), answer(doneAnswer))
	m, _ := httpModel(t, e, nil)
	var seen trace.SpanContext
	caller := &fakeCaller{}
	r, _ := newRunner(m, callerFunc(func(ctx context.Context, c *governor.Call) *governor.Outcome {
		seen = trace.SpanContextFromContext(ctx)
		return caller.Call(ctx, c)
	}), Options{OneToolPerTurn: true})
	ctx, parent := tracer.Start(context.Background(), "caller")
	rep, err := r.Run(ctx, "anything")
	parent.End()
	if err != nil || rep.Exit != ExitAnswered || rep.Calls != 1 {
		t.Fatalf("run: %+v, %v", rep, err)
	}
	if n := len(sr.Ended()); n != 1 {
		t.Errorf("%d spans recorded, want only the caller's", n)
	}
	if !seen.Equal(parent.SpanContext()) {
		t.Errorf("the tool call's context holds %v, want the caller's span", seen)
	}
	for i, h := range e.received() {
		for _, k := range []string{"traceparent", "tracestate", "baggage"} {
			if v := h.Get(k); v != "" {
				t.Errorf("request %d carried %s %q with telemetry off", i+1, k, v)
			}
		}
	}
}

type callerFunc func(ctx context.Context, c *governor.Call) *governor.Outcome

func (f callerFunc) Call(ctx context.Context, c *governor.Call) *governor.Outcome { return f(ctx, c) }

func TestProviderName(t *testing.T) {
	for in, want := range map[string]string{"openai.responses": "openai", "openai": "openai", "anthropic": "anthropic", "openrouter": "openrouter"} {
		if got := providerName(in); got != want {
			t.Errorf("providerName(%q) = %q, want %q", in, got, want)
		}
	}
}
