package guards

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// llm.judge asks a model whether the agent's task or final answer meets the entry's criteria,
// and fires on the whole text when it does not. It is the one probabilistic guard, so it may
// only make a decision stricter (the reference's RULES R3): it blocks (the default) or
// escalates, never redacts, and it runs after the stage's other guards, on the text as their
// redactions left it, and not at all when they already blocked it (see Set.scanLast). The guard
// holds no model: the built-in agent puts a JudgeFunc in the context of its checks (WithJudge),
// which makes the model call governed and budgeted like the run's own. Without one — the guard
// run anywhere else — Scan fails and fail_mode decides. The judge's explanation never reaches
// the guard: a JudgeFunc answers pass or fail.

// JudgeSettings are the settings of llm.judge.
type JudgeSettings struct {
	// Criteria say what acceptable content looks like; required.
	Criteria string `yaml:"criteria" json:"criteria" jsonschema:"required,minLength=1,description=What acceptable content looks like; the model is asked whether the content meets it."`
	// Model is the alias (llm.aliases) of the model asked; empty is the llm section's model.
	Model string `yaml:"model" json:"model,omitempty" jsonschema:"description=The model alias (llm.aliases) the judge asks (default: the llm section's model)."`
}

// JudgeRequest is what an llm.judge guard asks its JudgeFunc.
type JudgeRequest struct {
	// Guard is the entry's id and Stage its stage (input: the task; output: the final answer).
	Guard string
	Stage Stage
	// Model is the alias to ask; "" is the llm section's model.
	Model string
	// Criteria are the entry's criteria.
	Criteria string
	// Text is the content to judge.
	Text string
}

// JudgeFunc answers a JudgeRequest: pass is whether the content meets the criteria. An error
// (no answer, an answer that cannot be read) is the guard's error, for fail_mode; it must not
// quote the content or the model's answer. A JudgeFunc must be safe for concurrent use.
type JudgeFunc func(ctx context.Context, req JudgeRequest) (pass bool, err error)

type judgeKey struct{}

// WithJudge returns ctx carrying fn, which the llm.judge guards of checks run with ctx ask.
func WithJudge(ctx context.Context, fn JudgeFunc) context.Context {
	return context.WithValue(ctx, judgeKey{}, fn)
}

// judgeOf is the JudgeFunc of ctx, or nil.
func judgeOf(ctx context.Context) JudgeFunc {
	fn, _ := ctx.Value(judgeKey{}).(JudgeFunc)
	return fn
}

// JudgeCategory is the category of an llm.judge finding: the content failed the criteria.
const JudgeCategory = "criteria_not_met"

// errNoJudge is Scan without a JudgeFunc in its context.
var errNoJudge = errors.New("no model to ask: llm.judge runs only in the built-in agent (mcp-gateway agent), which gives it the llm section's model")

type judge struct {
	criteria, model string
	// id and stage are the entry's, set once by Build (place).
	id    string
	stage Stage
}

func newJudge(node *yaml.Node) (Guard, error) {
	var s JudgeSettings
	if err := decodeSettings(node, &s); err != nil {
		return nil, err
	}
	var errs SettingErrors
	if strings.TrimSpace(s.Criteria) == "" {
		errs.add(lineOf(node, "criteria"), "criteria: say what acceptable content looks like, such as \"the answer reports what the robot did and asks for nothing\"")
	}
	if valueOf(node, "model") != nil && strings.TrimSpace(s.Model) == "" {
		errs.add(lineOf(node, "model"), "model: name an alias of llm.aliases, or leave model out for the llm section's model")
	}
	return &judge{criteria: s.Criteria, model: s.Model}, errs.err()
}

func (g *judge) DefaultAction() Action { return ActionBlock }

// Stages: the task and the final answer, the only content the built-in agent's model judges.
func (g *judge) Stages() []Stage { return []Stage{StageInput, StageOutput} }

// refuseAction: a probabilistic verdict may hold content back, never rewrite it.
func (g *judge) refuseAction(a Action) string {
	if a == ActionRedact {
		return "action redact is not possible: a model's verdict says whether the content fails the criteria, not which part, " +
			"and a probabilistic guard may only hold content back (block, the default, or escalate)"
	}
	return ""
}

func (g *judge) place(id string, stage Stage) { g.id, g.stage = id, stage }

func (g *judge) runsLast() {}

// Scan asks the context's JudgeFunc and returns one span over the whole text when the content
// fails the criteria.
func (g *judge) Scan(ctx context.Context, text string) ([]Span, error) {
	if text == "" {
		return nil, nil // a redaction emptied it: nothing to judge, as guards skip empty text
	}
	fn := judgeOf(ctx)
	if fn == nil {
		return nil, errNoJudge
	}
	pass, err := fn(ctx, JudgeRequest{Guard: g.id, Stage: g.stage, Model: g.model, Criteria: g.criteria, Text: text})
	if err != nil {
		return nil, fmt.Errorf("the judge gave no verdict: %w", err)
	}
	if pass {
		return nil, nil
	}
	return []Span{{Start: 0, End: len(text), Category: JudgeCategory}}, nil
}

// The optional interfaces Build looks for, beside Redactor and Bounded. They are unexported:
// only llm.judge needs them.
type (
	// actionRefuser refuses some actions at Build: refuseAction says why, "" when a is fine.
	actionRefuser interface {
		refuseAction(a Action) string
	}
	// placer learns its entry's id and stage, once, before first use.
	placer interface {
		place(id string, stage Stage)
	}
	// lastRunner runs after the stage's other guards, on what they leave (Set.scanLast).
	lastRunner interface {
		runsLast()
	}
)
