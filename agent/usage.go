package agent

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// The run's spend. Every model request's usage is added as soon as it is known: the loop's own
// requests, and those its llm.judge guards make (askJudge). A refused request's tokens and cost count like any other's.
//
// The budgets (max_tokens_total, max_cost_usd) stop the run as soon as the spend passes them:
// strictly more than the budget, so that a run may spend exactly its budget. They are checked
// after every model request, before its answer is acted on or shown (see step), after the input
// and output guards (whose llm.judge guards may have asked a model), and after every tool call. A request's cost is known only once it has answered, so the run may pass a budget by
// the cost of one request: the budget bounds what the run goes on to spend, not the last request.

// addUsage adds one request's usage to the run's and returns the run's total so far. It is safe
// for concurrent use. The sums saturate instead of wrapping, and a negative count or cost (which
// the model layer refuses) adds nothing, so that no report lowers the spend the budgets see.
func (rn *run) addUsage(u model.Usage) model.Usage {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	t := &rn.report.Usage
	t.InputTokens = addTokens(t.InputTokens, u.InputTokens)
	t.OutputTokens = addTokens(t.OutputTokens, u.OutputTokens)
	t.CacheReadTokens = addTokens(t.CacheReadTokens, u.CacheReadTokens)
	t.CacheWriteTokens = addTokens(t.CacheWriteTokens, u.CacheWriteTokens)
	if u.CostUSD > 0 { // NaN and negatives add nothing; a sum past the largest float is +Inf
		t.CostUSD += u.CostUSD
	}
	return *t
}

// addTokens is a+b for a token count: b below 0 adds nothing, and the sum stops at the largest
// int instead of wrapping to a negative one.
func addTokens(a, b int) int {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// total returns the run's usage so far.
func (rn *run) total() model.Usage {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.report.Usage
}

// overBudget says which budget the run's spend has passed, or "".
func (rn *run) overBudget() string {
	u, o := rn.total(), rn.Options
	if tokens := addTokens(u.InputTokens, u.OutputTokens); o.MaxTokensTotal > 0 && tokens > o.MaxTokensTotal {
		return fmt.Sprintf("token budget max_tokens_total %d passed: the run has used %d tokens (raise llm.max_tokens_total for runs that need more)",
			o.MaxTokensTotal, tokens)
	}
	if o.MaxCostUSD > 0 && u.CostUSD > o.MaxCostUSD {
		return fmt.Sprintf("cost budget max_cost_usd %g passed: the run has spent %s USD (raise llm.max_cost_usd for runs that need more)",
			o.MaxCostUSD, usd(u.CostUSD))
	}
	return ""
}

// unpriced says why max_cost_usd cannot count a request that used tokens but whose cost nobody
// reported, or "" when it can (or no cost budget is set).
func (rn *run) unpriced(u model.Usage, answeredBy string) string {
	if rn.Options.MaxCostUSD <= 0 || u.CostSource != "" || u.CostUSD != 0 || u.InputTokens+u.OutputTokens == 0 {
		return ""
	}
	if answeredBy == "" {
		answeredBy = rn.ModelName
	}
	return fmt.Sprintf("the cost of this request is unknown, so max_cost_usd does not count it: set llm.prices for model %q, or cost_header to the header your gateway reports the cost in",
		answeredBy)
}

// setStep records the step the loop is in, for the events of requests made for it.
func (rn *run) setStep(step int) {
	rn.mu.Lock()
	rn.curStep = step
	rn.mu.Unlock()
}

// invocationID returns the id of the run's next model request: the run id, the step and the
// request's number in the run ("agent-1a2b3c-step2-req3"), so it is unique within the run, and
// across runs with the run id. HTTP providers send it as the X-Invocation-Id header; it is in
// the step event's evidence and in the audit record of each tool call the request asked for.
func (rn *run) invocationID() string {
	rn.mu.Lock()
	rn.requests++
	step, n := rn.curStep, rn.requests
	rn.mu.Unlock()
	id := rn.RunID
	if id == "" {
		id = "run"
	}
	return id + "-step" + strconv.Itoa(step) + "-req" + strconv.Itoa(n)
}

// usd formats a cost in USD: below a dollar with four significant digits (0.00042, 0.01235),
// else to the cent (12.5), without trailing zeros.
func usd(v float64) string {
	if v <= 0 {
		return "0"
	}
	decimals := 2
	if v < 1 {
		decimals = 3 - int(math.Floor(math.Log10(v)))
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".")
}
