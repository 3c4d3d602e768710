package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/telemetry"
)

// The run's span tree, when Runner.Tracer is set:
//
//	agent run                      the run (INTERNAL), child of the span in Run's context if any
//	└─ agent step                  one per model request and the tool calls it asked for
//	   ├─ chat <model>             the model request (CLIENT); its traceparent goes to the provider
//	   └─ tools/call <tool>        the gateway's call span (governor.Trace) and its step spans
//
// The names and attributes follow the OpenTelemetry GenAI semantic conventions where they have
// one (gen_ai.*); the rest are the gateway's own (mcp_gateway.*). Every value is a name, an id, a
// kind or a count: never the task, a prompt, an answer, a tool's arguments or a reason, which
// may quote them.
const (
	spanRun  = "agent run"
	spanStep = "agent step"
	spanChat = "chat"

	attrProviderName   = attribute.Key("gen_ai.provider.name")
	attrRequestModel   = attribute.Key("gen_ai.request.model")
	attrResponseModel  = attribute.Key("gen_ai.response.model")
	attrResponseID     = attribute.Key("gen_ai.response.id")
	attrFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	attrInputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	attrCacheRead      = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrConversationID = attribute.Key("gen_ai.conversation.id")
	attrAgentName      = attribute.Key("gen_ai.agent.name")

	attrLLMProvider = attribute.Key("mcp_gateway.llm.provider")
	attrMaxSteps    = attribute.Key("mcp_gateway.agent.max_steps")
	attrStep        = attribute.Key("mcp_gateway.agent.step")
	attrSteps       = attribute.Key("mcp_gateway.agent.steps")
	attrToolCalls   = attribute.Key("mcp_gateway.agent.tool_calls")
	attrExit        = attribute.Key("mcp_gateway.agent.exit")
	attrCostUSD     = attribute.Key("mcp_gateway.agent.cost_usd")

	// agentName is gen_ai.agent.name of the run span.
	agentName = "mcp-gateway"

	// Error types of a model request that got an answer it cannot go on with (model.ErrorType
	// covers the requests that got none).
	errModelRefusal = string(governor.KindModelRefusal)
	errModelError   = "model_error"
)

// providerName is gen_ai.provider.name for an llm.provider: the semantic conventions' name where
// they have one (openai for both OpenAI APIs), else the provider as configured.
func providerName(provider string) string {
	if provider == "openai.responses" {
		return "openai"
	}
	return provider
}

// startRun starts the run's span when the runner traces, and returns the context the run's
// steps start from.
func (rn *run) startRun(ctx context.Context, maxSteps int) context.Context {
	if rn.Tracer == nil {
		return ctx
	}
	attrs := []attribute.KeyValue{
		telemetry.AttrOperation.String("invoke_agent"),
		attrAgentName.String(agentName),
		attrMaxSteps.Int(maxSteps),
	}
	if rn.Provider != "" {
		attrs = append(attrs, attrLLMProvider.String(rn.Provider), attrProviderName.String(providerName(rn.Provider)))
	}
	if rn.ModelName != "" {
		attrs = append(attrs, attrRequestModel.String(rn.ModelName))
	}
	if rn.RunID != "" {
		attrs = append(attrs, attrConversationID.String(rn.RunID))
	}
	ctx, rn.span = rn.Tracer.Start(ctx, spanRun, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx
}

// endRun puts how the run ended on its span and ends it: the exit, the counts and the token
// totals. A run that did not answer is marked failed with its exit (budget_exhausted, halted…).
func (rn *run) endRun() {
	span := rn.span
	if span == nil {
		return
	}
	defer span.End()
	if !span.IsRecording() {
		return
	}
	rep := &rn.report
	span.SetAttributes(
		attrExit.String(rep.Exit.String()),
		attrSteps.Int(rep.Steps),
		attrToolCalls.Int(rep.Calls),
		attrInputTokens.Int(rep.Usage.InputTokens),
		attrOutputTokens.Int(rep.Usage.OutputTokens),
	)
	if rep.Usage.CostUSD > 0 {
		span.SetAttributes(attrCostUSD.Float64(rep.Usage.CostUSD))
	}
	if rep.Exit != ExitAnswered {
		telemetry.Fail(span, rep.Exit.String())
	}
}

// startStep starts step's span under the run's; ended by the caller. Without a traced run it
// returns ctx and a nil span.
func (rn *run) startStep(ctx context.Context, step int) (context.Context, trace.Span) {
	if rn.span == nil {
		return ctx, nil
	}
	return rn.Tracer.Start(ctx, spanStep, trace.WithAttributes(attrStep.Int(step)))
}

// generate makes one model request, in its own CLIENT span when the run is traced: the span the
// provider's transport sends as the request's traceparent.
func (rn *run) generate(ctx context.Context, call *model.Call) (*model.Result, error) {
	if rn.span == nil {
		return rn.Model.Generate(ctx, call)
	}
	ctx, span := rn.Tracer.Start(ctx, rn.chatName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(rn.chatAttrs...))
	defer span.End()
	res, err := rn.Model.Generate(ctx, call)
	if !span.IsRecording() {
		return res, err
	}
	if err != nil {
		telemetry.Fail(span, model.ErrorType(err))
		return res, err
	}
	answered(span, res)
	if !res.Refusal && res.FinishReason == model.FinishError {
		telemetry.Fail(span, errModelError)
	}
	return res, err
}

// answered puts a model request's answer on its span: finish reason, tokens, cost, the model
// that answered and the provider's request id; a refusal marks the span failed.
func answered(span trace.Span, res *model.Result) {
	u := res.Usage
	span.SetAttributes(
		attrFinishReasons.StringSlice([]string{string(res.FinishReason)}),
		attrInputTokens.Int(u.InputTokens),
		attrOutputTokens.Int(u.OutputTokens),
	)
	if u.CacheReadTokens > 0 {
		span.SetAttributes(attrCacheRead.Int(u.CacheReadTokens))
	}
	if u.CostUSD > 0 {
		span.SetAttributes(attrCostUSD.Float64(u.CostUSD))
	}
	if ev := res.Evidence; ev.Model != "" {
		span.SetAttributes(attrResponseModel.String(ev.Model))
	}
	if ev := res.Evidence; ev.RequestID != "" {
		span.SetAttributes(attrResponseID.String(ev.RequestID))
	}
	if res.Refusal {
		telemetry.Fail(span, errModelRefusal)
	}
}

// chatSpan sets the name and the fixed attributes of the run's model request spans: "chat
// <model>" and gen_ai.operation.name chat, as the semantic conventions name an inference call.
func (rn *run) chatSpan() {
	rn.chatName = spanChat
	rn.chatAttrs = []attribute.KeyValue{telemetry.AttrOperation.String("chat")}
	if rn.ModelName != "" {
		rn.chatName += " " + rn.ModelName
		rn.chatAttrs = append(rn.chatAttrs, attrRequestModel.String(rn.ModelName))
	}
	if rn.Provider != "" {
		rn.chatAttrs = append(rn.chatAttrs, attrProviderName.String(providerName(rn.Provider)))
	}
}

// refusedCall records a tool call the agent answered itself, without the gateway (a second call
// under one_tool_per_turn, arguments that do not parse): a span like the gateway's call span,
// marked failed with kind, under the step's. Only a tool the catalog lists is named; any other
// name is the model's text and stays off the span.
func (rn *run) refusedCall(ctx context.Context, name string, kind governor.Kind) {
	if rn.span == nil || !telemetry.Traced(ctx) {
		return
	}
	spanName, attrs := "tools/call", []attribute.KeyValue{
		telemetry.AttrMethod.String("tools/call"),
		telemetry.AttrOperation.String("execute_tool"),
		telemetry.AttrPrincipal.String(Principal),
		telemetry.AttrTransport.String(transport),
		telemetry.AttrOutcome.String(string(kind)),
	}
	for _, t := range rn.Tools {
		if t.Public == name && t.Definition != nil {
			spanName += " " + name
			attrs = append(attrs, telemetry.AttrToolName.String(name))
			break
		}
	}
	_, span := telemetry.Child(ctx, spanName, trace.WithAttributes(attrs...))
	telemetry.Fail(span, string(kind))
	span.End()
}
