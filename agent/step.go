package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
)

// step makes one model request and runs the tool calls it asks for, appending both to call's
// messages. It returns the report when the run ended in the step, nil when it goes on.
//
// What the answer is decides what is shown of it, in this order: a reported error and a refusal
// end the run and show nothing of the output (a refusal's partial text is dropped); a request
// whose spend passes a budget ends the run with ExitBudget and is neither acted on nor shown, a
// final answer included (it is not the run's answer: it was bought beyond the budget, and the
// output guards never saw it); with guard_reasoning the reasoning passes the output guards; a
// final answer passes the output guards; then the step's tool calls run.
func (rn *run) step(ctx context.Context, call *model.Call, step int) (*Report, error) {
	ctx, span := rn.startStep(ctx, step)
	if span != nil {
		defer span.End()
	}
	rn.setStep(step)
	sink := &chunkSink{rn: rn, step: step, live: rn.OutputGuards.Empty() && !rn.Options.HoldStream}
	invocation := rn.invocationID()
	start := time.Now()
	res, err := rn.generate(model.WithInvocationID(model.WithChunks(ctx, sink.add), invocation), call)
	took := time.Since(start)
	livePrinted := sink.close()
	rn.holdJudgeLines() // the guards' judges print after the step's lines (stepView.show)
	rn.Metrics.request(res, err)
	if err != nil {
		if ctx.Err() != nil {
			return rn.end(ExitError, cancelled(ctx.Err()), err)
		}
		return rn.end(ExitError, err.Error(), err)
	}
	total := rn.addUsage(res.Usage)
	usage, evidence := res.Usage, res.Evidence
	if evidence.InvocationID == "" {
		evidence.InvocationID = invocation
	}
	calls := res.ToolCalls()
	if span != nil {
		span.SetAttributes(attrToolCalls.Int(len(calls)))
	}
	sv := &stepView{rn: rn, sink: sink, livePrinted: livePrinted, took: took, ev: Event{
		Type: "step", Step: step, FinishReason: res.FinishReason, Usage: &usage, Total: &total, Evidence: &evidence,
		Warning: rn.unpriced(usage, evidence.Model), DurationMS: ms(took),
	}}
	switch {
	case res.FinishReason == model.FinishError:
		sv.ev.Reason = res.Error
		sv.show("", "", false)
		return rn.end(ExitError, "the model reported an error: "+res.Error, nil)
	case res.Refusal:
		reason := refusalReason(res)
		sv.ev.Reason, sv.ev.Category = reason, res.RefusalCategory
		sv.show("", "", false)
		return rn.end(ExitRefused, reason, nil)
	}
	if rep, err := rn.budgetStops(sv); rep != nil {
		return rep, err
	}
	reasoning := reasoningShown(res, nil)
	if rn.Options.GuardReasoning && res.Reasoning() != "" {
		gr, screened := rn.OutputGuards.CheckText(ctx, "", "", res.Reasoning())
		if rep, err := rn.budgetStops(sv); rep != nil {
			return rep, err
		}
		if blocked(gr) {
			sv.ev.Reason = gr.Reason
			sv.show("", "", false)
			return rn.end(ExitGuardBlocked, fmt.Sprintf("the model's reasoning is withheld: an output guard %s it (%s)", verb(gr.Action), gr.Reason), nil)
		}
		reasoning = reasoningShown(res, &screened)
	}
	if len(calls) == 0 {
		return rn.final(ctx, res, sv, reasoning)
	}
	sv.show(res.Text(), reasoning, true)
	call.Messages = append(call.Messages, res.AssistantMessage())
	results := make([]model.ToolResult, 0, len(calls))
	for i, tc := range calls {
		out := rn.callTool(ctx, step, i, tc, &evidence)
		results = append(results, model.ToolResult{CallID: tc.ID, Name: tc.Name, Content: resultText(out.Result), IsError: !out.Success})
		if rn.Options.HaltOnUnknownOutcome && out.Kind == governor.KindExecutionStatusUnknown {
			return rn.end(ExitHalted, fmt.Sprintf("%s on %s: %s", out.Kind, tc.Name, out.Reason), nil)
		}
		if why := rn.overBudget(); why != "" {
			// The call's guards asked a model (llm.judge) and spent the budget.
			return rn.end(ExitBudget, why, nil)
		}
	}
	call.Messages = append(call.Messages, model.Message{Role: model.RoleTool, ToolResults: results})
	return nil, nil
}

// final ends the run with a step's final answer (no tool calls): screened by the output guards,
// answered, or guard_blocked without the answer, or answered with nothing to add.
func (rn *run) final(ctx context.Context, res *model.Result, sv *stepView, reasoning string) (*Report, error) {
	text := res.Text()
	if model.Blank(text) {
		// Only white space or invisible characters is no answer either; it is not printed as if
		// the model said something.
		sv.show("", reasoning, false)
		rn.report.Answer = ""
		hint := "a model may end a tool loop with nothing to add"
		if model.TakesBlockEmptyAnswers(rn.Provider) {
			hint += "; set llm.block_empty_answers to count that as declined"
		}
		return rn.end(ExitAnswered, "the model gave no text and no tool calls ("+hint+")", nil)
	}
	gr, screened := rn.OutputGuards.CheckText(ctx, "", "", text)
	if rep, err := rn.budgetStops(sv); rep != nil {
		return rep, err
	}
	switch {
	case blocked(gr):
		sv.ev.Reason = gr.Reason
		sv.show("", reasoning, false)
		return rn.end(ExitGuardBlocked, fmt.Sprintf("the final answer is withheld: an output guard %s it (%s)", verb(gr.Action), gr.Reason), nil)
	case gr.Action == guards.ActionRedact:
		sv.show(screened, reasoning, false)
		rn.printf("answer redacted by the output guards (%s)\n", gr.Reason)
	default:
		sv.show(screened, reasoning, true)
	}
	rn.report.Answer = screened
	return rn.end(ExitAnswered, gr.Reason, nil)
}

// budgetStops ends the run with ExitBudget when its spend has passed a budget: after the step's
// request, or after guards that asked a model (llm.judge) screened its output. The step shows
// nothing of its output then.
func (rn *run) budgetStops(sv *stepView) (*Report, error) {
	why := rn.overBudget()
	if why == "" {
		return nil, nil
	}
	sv.ev.Reason = "not acted on and not shown: " + why
	sv.show("", "", false)
	return rn.end(ExitBudget, why, nil)
}

// refusalReason is the reason a refused run ends with: model_refusal, the category when the
// provider names one, and the provider's explanation.
func refusalReason(res *model.Result) string {
	reason := string(governor.KindModelRefusal)
	if res.RefusalCategory != "" {
		reason += " (category " + res.RefusalCategory + ")"
	}
	why := res.RefusalReason
	if why == "" {
		why = "the model declined the request"
	}
	return reason + ": " + why
}

// stepSummary is the printed summary of a step's request: finish reason, tokens, its cost and
// the run's so far when known, and its duration.
func stepSummary(finish model.FinishReason, u, total model.Usage, took time.Duration) string {
	s := fmt.Sprintf("%s, %d+%d tokens", finish, u.InputTokens, u.OutputTokens)
	if u.CostUSD > 0 || u.CostSource != "" {
		s += fmt.Sprintf(", %s USD", usd(u.CostUSD))
		if u.CostSource != "" {
			s += " (" + u.CostSource + ")"
		}
	}
	if total.CostUSD > 0 {
		s += fmt.Sprintf(", %s USD so far", usd(total.CostUSD))
	}
	return s + ", " + took.Round(time.Millisecond).String()
}
