// Package agent is the built-in agent (SPEC.md §12): a tool loop that runs a model against the
// governed catalog in-process. Every call it makes goes through the same governed chain as an
// MCP client's, as principal "agent"; after an unknown outcome (a lockout) it stops instead of
// letting the model retry physical actions blind. With a tracer, a run is a span tree (run →
// step → model request and tool calls, trace.go) whose model requests carry their traceparent.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/guards"
	"github.com/mcp-gateway/mcp-gateway/internal/printable"
)

// Principal is who the agent's calls are made as, in policies and audit records.
const Principal = "agent"

// transport is governor.Call.Transport of the agent's calls: in-process, neither HTTP nor stdio.
const transport = "agent"

// Instructions is the system text every run starts with.
const Instructions = "You drive a robot through governed tools. Call one tool at a time when an action " +
	"depends on the last one's result, and read each result: a failure says why in its kind and reason. " +
	"If a result has kind mcp_execution_status_unknown, what the robot did is unknown: stop and report " +
	"it instead of trying again. When the task is done or cannot be done, answer in plain text without calling tools."

// Exit is how a run ended; its value is the process exit code of `mcp-gateway agent`.
type Exit int

// The ways a run ends.
const (
	// ExitAnswered: the model gave a final answer.
	ExitAnswered Exit = 0
	// ExitError: the model request failed or the model reported an error.
	ExitError Exit = 1
	// ExitRefused: the model declined (model_refusal): a refusal field or stop reason, LiteLLM's
	// provider_specific_fields.refusal, a content filter, or an empty answer under
	// block_empty_answers. Never answered, whatever text came before the signal.
	ExitRefused Exit = 2
	// ExitBudget: max_steps, the token budget or the cost budget ran out: the spend passed
	// max_tokens_total or max_cost_usd (see usage.go), an answer included.
	ExitBudget Exit = 3
	// ExitHalted: a call's outcome was unknown (mcp_execution_status_unknown) and
	// halt_on_unknown_outcome stopped the run.
	ExitHalted Exit = 4
	// ExitGuardBlocked: an input guard blocked (or escalated) the task, or an output guard the
	// final answer.
	ExitGuardBlocked Exit = 5
)

// String names the exit in transcripts.
func (e Exit) String() string {
	switch e {
	case ExitAnswered:
		return "answered"
	case ExitRefused:
		return "refused"
	case ExitBudget:
		return "budget_exhausted"
	case ExitHalted:
		return "halted"
	case ExitGuardBlocked:
		return "guard_blocked"
	default:
		return "error"
	}
}

// Caller runs one call through the governed chain; *gateway.Gateway is one.
type Caller interface {
	Call(ctx context.Context, c *governor.Call) *governor.Outcome
}

// Options are the loop's limits and safety switches (the llm section's agent options).
type Options struct {
	// MaxSteps bounds the model requests of a run; zero or less means one.
	MaxSteps int
	// OneToolPerTurn runs only the first tool call of each model turn; the others are answered
	// with a one_tool_per_turn failure and not executed.
	OneToolPerTurn bool
	// HaltOnUnknownOutcome ends the run at the first mcp_execution_status_unknown outcome.
	HaltOnUnknownOutcome bool
	// MaxTokensTotal and MaxCostUSD are the run's budgets; zero means none. The run stops as
	// soon as its spend passes one (usage.go).
	MaxTokensTotal int
	MaxCostUSD     float64
	// GuardReasoning screens the model's reasoning with the output guards too, at every step:
	// block or escalate ends the run with ExitGuardBlocked, redact shows it redacted. Off, the
	// reasoning is shown in the transcript as the model gave it and no guard sees it.
	GuardReasoning bool
	// HoldStream is the llm section's hold_stream: a streamed answer's chunks are held, in the
	// model until the answer has finished and in the loop until the step shows the answer as the
	// model wrote it, as with output guards (output.go). Off, without output guards, they are
	// shown live.
	HoldStream bool
	// Experience maps a tool's public or upstream name to notes appended to its description.
	Experience map[string]string
}

// Runner runs tasks. Its fields are set once; Run does not change them.
type Runner struct {
	Model  model.Model
	Caller Caller
	// Tools are the tools offered to the model; those without a definition (hidden) are left
	// out.
	Tools   []*governor.Tool
	Options Options
	// InputGuards screen the task before the first model request and OutputGuards the final
	// answer before it is printed (and the reasoning, with Options.GuardReasoning): block or
	// escalate ends the run with ExitGuardBlocked, redact passes the redacted text on. Nil or
	// empty sets pass everything. A streamed answer's chunks are held until the output guards
	// have seen the answer (output.go).
	InputGuards, OutputGuards *guards.Set
	// Out receives the transcript for a person as the run goes, control characters but newline
	// and tab shown as escapes (\x1b); nil discards it.
	Out io.Writer
	// Transcript receives the transcript as JSONL, one Event a line; nil discards it.
	Transcript io.Writer
	// RunID names the run: the session of its calls in audit records.
	RunID string
	// Metrics counts the model requests, tokens, cost and retries; nil counts nothing. Its
	// OnRetry goes in the model's settings (model.Settings.OnRetry) for retries to count.
	Metrics *Metrics
	// Tracer, when set, traces the run (see trace.go): a span for the run, each step and each
	// model request, with the tool calls' spans (the gateway's, when its chain is traced) under
	// their step's. The model's transport sends the model request span as the request's
	// traceparent when its settings carry the injection (model.Settings.InjectHeader). Nil
	// traces nothing and costs nothing.
	Tracer trace.Tracer
	// Provider and ModelName name the model on the spans: the llm section's provider and the
	// model its requests ask for (model.Settings.RequestModel).
	Provider, ModelName string
}

// Report is how a run ended.
type Report struct {
	Exit Exit
	// Answer is the final answer's text when Exit is ExitAnswered, as the output guards left it;
	// empty when the model ended with nothing to add (no text, no tool calls; Reason says so).
	Answer string
	// Reason says why the run ended otherwise; for an answered run, the output guards' reason
	// when they redacted the answer.
	Reason string
	// Steps is the number of model requests made.
	Steps int
	// Calls is the number of tool calls sent to the gateway.
	Calls int
	// Usage is the sum over the run's model requests, refused ones and its guards' included.
	Usage model.Usage
}

// Event is one line of the JSONL transcript.
type Event struct {
	Time time.Time `json:"time"`
	Run  string    `json:"run"`
	// Type is task, step (a model request and its answer), chunk (a piece of a streamed answer,
	// before its step), judge (an llm.judge guard's request and verdict), tool or end.
	Type string `json:"type"`
	Step int    `json:"step,omitempty"`
	// Text is the task, the model's text, a chunk of it, or the final answer.
	Text string `json:"text,omitempty"`
	// Reasoning is the model's reasoning in a step ("[redacted thinking]" for encrypted blocks).
	Reasoning    string             `json:"reasoning,omitempty"`
	FinishReason model.FinishReason `json:"finish_reason,omitempty"`
	// Category is a refusal's policy area, when the provider names one.
	Category string `json:"category,omitempty"`
	// Usage is a request's usage, its cost and where the cost came from (cost_usd,
	// cost_source); on the end event, the run's. Total is the run's so far, this request included.
	Usage *model.Usage `json:"usage,omitempty"`
	Total *model.Usage `json:"total,omitempty"`
	// Evidence identifies a model request: the provider's request id, the model that answered,
	// the run's invocation id, the provider's warnings.
	Evidence *model.Evidence `json:"evidence,omitempty"`
	// Source names who made a model event's request (an llm.judge guard).
	Source string `json:"source,omitempty"`
	// Warning is what the run notes about a step: a cost the cost budget cannot count.
	Warning string `json:"warning,omitempty"`
	// Tool, CallID, Arguments and Raw describe a tool call; Executed says whether it reached
	// the gateway, and Outcome is its outcome (ok, tool_failure or the failure kind).
	Tool      string          `json:"tool,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	Executed  *bool           `json:"executed,omitempty"`
	Success   *bool           `json:"success,omitempty"`
	Kind      governor.Kind   `json:"kind,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Result    string          `json:"result,omitempty"`
	// Guard and Verdict (pass, fail or error) describe an llm.judge guard's verdict (judge.go).
	Guard   string `json:"guard,omitempty"`   // judge (issue 21)
	Verdict string `json:"verdict,omitempty"` // judge (issue 21)
	// Exit and Outcome (answered, refused, …) end the run.
	Exit       *Exit   `json:"exit,omitempty"`
	Outcome    string  `json:"outcome,omitempty"`
	DurationMS float64 `json:"duration_ms,omitempty"`
}

// run is the state of one Run.
type run struct {
	*Runner
	report Report
	// mu guards report.Usage, curStep, requests, err and the writes to Out and Transcript: a
	// streamed answer's chunks and the llm.judge guards' requests (askJudge) come from other
	// goroutines.
	mu       sync.Mutex
	curStep  int   // the step in progress
	requests int   // model requests made for the run, for invocation ids
	err      error // the first transcript write that failed
	// holding says that the judge lines printed now (judged) are held in held until what they
	// judged is printed: the task, or the step whose output they screened (releaseJudgeLines).
	holding bool
	held    []string
	// span is the run's span, nil when the run is not traced; chatName and chatAttrs are the
	// name and fixed attributes of its model request spans.
	span      trace.Span
	chatName  string
	chatAttrs []attribute.KeyValue
}

// Run runs task to its end. The report says how it ended; the error is set when the run could
// not go on (a failed model request, a transcript that cannot be written) and then the report's
// Exit is ExitError.
func (r *Runner) Run(ctx context.Context, task string) (*Report, error) {
	rn := &run{Runner: r}
	maxSteps := max(r.Options.MaxSteps, 1)
	ctx = rn.startRun(ctx, maxSteps)
	defer rn.endRun()
	rn.holdJudgeLines()                     // until the task's line
	ctx = guards.WithJudge(ctx, rn.judge()) // judge (issue 21): llm.judge guards ask the run's model
	gr, screened := r.InputGuards.CheckText(ctx, "", "", task)
	if why := rn.overBudget(); why != "" {
		// An input guard that asks a model (llm.judge) spent the budget.
		rn.emit(Event{Type: "task", Reason: why})
		rn.printf("task: not sent to the model: the input guards' model requests passed the budget\n")
		rn.releaseJudgeLines()
		return rn.end(ExitBudget, why, nil)
	}
	if blocked(gr) {
		rn.emit(Event{Type: "task", Reason: gr.Reason})
		rn.printf("task: withheld by the input guards\n")
		rn.releaseJudgeLines()
		return rn.end(ExitGuardBlocked, fmt.Sprintf("the task was not sent to the model: an input guard %s it (%s)", verb(gr.Action), gr.Reason), nil)
	}
	if gr.Action == guards.ActionRedact {
		rn.printf("task redacted by the input guards (%s)\n", gr.Reason)
	}
	task = screened
	call := &model.Call{
		Instructions: []string{Instructions},
		Messages:     []model.Message{{Role: model.RoleUser, Text: task}},
		Tools:        r.modelTools(),
	}
	rn.emit(Event{Type: "task", Text: task, Reason: gr.Reason})
	rn.printf("task: %s\n", task)
	rn.releaseJudgeLines()
	rn.chatSpan()
	for {
		if rn.report.Steps >= maxSteps {
			return rn.end(ExitBudget, fmt.Sprintf("max_steps %d reached", maxSteps), nil)
		}
		if err := ctx.Err(); err != nil {
			return rn.end(ExitError, cancelled(err), err)
		}
		rn.report.Steps++
		if rep, err := rn.step(ctx, call, rn.report.Steps); rep != nil {
			return rep, err
		}
	}
}

// cancelled is the reason of a run stopped by its context (Ctrl-C, SIGTERM, a deadline).
func cancelled(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "the run was stopped: its deadline passed"
	}
	return "the run was cancelled (interrupted)"
}

// blocked says whether a guard result stops the text: block, or escalate (the agent has no
// operator to ask).
func blocked(r guards.Result) bool {
	return r.Action == guards.ActionBlock || r.Action == guards.ActionEscalate
}

func verb(a guards.Action) string {
	if a == guards.ActionEscalate {
		return "escalated"
	}
	return "blocked"
}

// callTool answers one tool call: refused without running it when it is not the first of its
// turn under one_tool_per_turn or its arguments did not parse, else run through the gateway.
// evidence is the model request's that asked for the call; the call's audit record keeps it.
func (rn *run) callTool(ctx context.Context, step, i int, tc model.ToolCall, evidence *model.Evidence) *governor.Outcome {
	ev := Event{Type: "tool", Step: step, Tool: tc.Name, CallID: tc.ID, Arguments: tc.Arguments}
	args := string(tc.Arguments)
	if !tc.ValidArguments() {
		ev.Raw = tc.Raw
		args = tc.Raw
	}
	rn.printf("  → %s %s\n", tc.Name, args)
	start := time.Now()
	var out *governor.Outcome
	executed := false
	switch {
	case rn.Options.OneToolPerTurn && i > 0:
		out = governor.Refuse(governor.KindOneToolPerTurn,
			fmt.Sprintf("only one tool call runs per turn; %s was not executed: call it again after reading the result of the first", tc.Name))
		rn.refusedCall(ctx, tc.Name, out.Kind)
	case !tc.ValidArguments():
		out = governor.Refuse(governor.KindInvalidArguments,
			fmt.Sprintf("the arguments of %s are not a JSON object; %s was not executed", tc.Name, tc.Name))
		rn.refusedCall(ctx, tc.Name, out.Kind)
	default:
		executed = true
		rn.report.Calls++
		// ctx is the step's: the gateway's call span, when its chain is traced, is the step's
		// child.
		out = rn.Caller.Call(ctx, &governor.Call{
			Name: tc.Name, Args: tc.Arguments, Principal: Principal, Session: rn.RunID, Start: start, Transport: transport,
			Model: &governor.ModelEvidence{RequestID: evidence.RequestID, Model: evidence.Model, InvocationID: evidence.InvocationID,
				Warnings: slices.Clone(evidence.Warnings)},
		})
	}
	took := time.Since(start)
	success := out.Success
	ev.Executed, ev.Success, ev.Kind, ev.Reason = &executed, &success, out.Kind, out.Reason
	ev.Result, ev.DurationMS, ev.Outcome = resultText(out.Result), ms(took), out.Label()
	rn.emit(ev)
	switch {
	case success:
		rn.printf("    ok (%s): %s\n", took.Round(time.Millisecond), ev.Result)
	case out.Kind != "":
		rn.printf("    failed (%s): %s: %s\n", took.Round(time.Millisecond), out.Kind, out.Reason)
	default:
		rn.printf("    tool failure (%s): %s\n", took.Round(time.Millisecond), ev.Result)
	}
	return out
}

// end records how the run ended and returns its report.
func (rn *run) end(exit Exit, reason string, err error) (*Report, error) {
	rn.report.Exit, rn.report.Reason = exit, reason
	rn.releaseJudgeLines()
	total := rn.total()
	rn.emit(Event{Type: "end", Step: rn.report.Steps, Text: rn.report.Answer, Reason: reason, Exit: &exit, Outcome: exit.String(), Usage: &total})
	switch {
	case exit == ExitAnswered && rn.report.Answer == "":
		rn.printf("ended without an answer: %s\n", reason)
	case exit == ExitAnswered:
		rn.printf("answer: %s\n", rn.report.Answer)
	default:
		rn.printf("stopped (%s): %s\n", exit, reason)
	}
	rn.mu.Lock()
	failed := rn.err
	rn.mu.Unlock()
	if err == nil && failed != nil {
		rn.report.Exit, rn.report.Reason, err = ExitError, failed.Error(), failed
	}
	return &rn.report, err
}

// modelTools is the catalog as the model sees it, with Tool Experience appended to the
// descriptions it names.
func (r *Runner) modelTools() []model.Tool {
	tools := make([]model.Tool, 0, len(r.Tools))
	for _, t := range r.Tools {
		if t.Definition == nil {
			continue
		}
		desc := t.Definition.Description
		text, ok := r.Options.Experience[t.Public]
		if !ok {
			text, ok = r.Options.Experience[t.Upstream]
		}
		if ok {
			desc += "\n\nTool Experience:\n" + text
		}
		mt := model.Tool{Name: t.Public, Description: desc}
		if t.Definition.InputSchema != nil {
			if schema, err := json.Marshal(t.Definition.InputSchema); err == nil {
				mt.InputSchema = schema
			}
		}
		tools = append(tools, mt)
	}
	return tools
}

// resultText is what the model reads of a result: its structured content as JSON (the
// envelope), else its text content.
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// emit writes one JSONL event; the first failure is kept and ends the run as an error. It is
// safe for concurrent use.
func (rn *run) emit(ev Event) {
	if rn.Transcript == nil {
		return
	}
	ev.Time, ev.Run = time.Now().UTC(), rn.RunID
	line, err := json.Marshal(ev)
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.err != nil {
		return
	}
	if err == nil {
		_, err = rn.Transcript.Write(append(line, '\n'))
	}
	if err != nil {
		rn.err = fmt.Errorf("writing the transcript: %w", err)
	}
}

// printf writes to Out, the printout for a person; it is safe for concurrent use. What it
// prints is mostly the model's and the tools' text, so every control character but newline and
// tab is shown as an escape (printable.Lines): an answer cannot recolour, clear or retitle the
// operator's terminal, or overwrite a line it printed. The transcript keeps the text exactly.
func (rn *run) printf(format string, args ...any) {
	if rn.Out == nil {
		return
	}
	line := printable.Lines(fmt.Sprintf(format, args...))
	rn.mu.Lock()
	defer rn.mu.Unlock()
	_, _ = io.WriteString(rn.Out, line)
}

// holdJudgeLines holds the judge lines printed from now on until releaseJudgeLines, so that
// they follow the line of what they judged: a judge screens the task before it is printed, and a
// step's output before the step's lines.
func (rn *run) holdJudgeLines() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.holding = true
}

// printJudgeLine prints a judge's line, or holds it (holdJudgeLines).
func (rn *run) printJudgeLine(line string) {
	rn.mu.Lock()
	if rn.holding {
		rn.held = append(rn.held, line)
		rn.mu.Unlock()
		return
	}
	rn.mu.Unlock()
	rn.printf("%s\n", line)
}

// releaseJudgeLines prints the held judge lines, in order, and prints judge lines at once again.
func (rn *run) releaseJudgeLines() {
	rn.mu.Lock()
	held := rn.held
	rn.holding, rn.held = false, nil
	rn.mu.Unlock()
	for _, line := range held {
		rn.printf("%s\n", line)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
