package guards

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// judgeStub is a JudgeFunc that records what it was asked and answers with verdict.
type judgeStub struct {
	mu      sync.Mutex
	asked   []JudgeRequest
	verdict func(req JudgeRequest) (bool, error)
}

func (j *judgeStub) fn(_ context.Context, req JudgeRequest) (bool, error) {
	j.mu.Lock()
	j.asked = append(j.asked, req)
	j.mu.Unlock()
	return j.verdict(req)
}

func failing(JudgeRequest) (bool, error) { return false, nil }
func passing(JudgeRequest) (bool, error) { return true, nil }
func erring(JudgeRequest) (bool, error) {
	return false, errors.New("the judge's model request failed (HTTP 503)")
}

func judgedCtx(j *judgeStub) context.Context { return WithJudge(context.Background(), j.fn) }

func TestJudgeSettingsAreChecked(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"no criteria", "- {id: j, use: llm.judge}", "guards.yaml:1: guard j: llm.judge: criteria: say what acceptable content looks like"},
		{"blank criteria", "- id: j\n  use: llm.judge\n  criteria: '  '", "guards.yaml:3: guard j: llm.judge: criteria:"},
		{"empty model", "- id: j\n  use: llm.judge\n  criteria: polite\n  model: ''", "guards.yaml:4: guard j: llm.judge: model: name an alias of llm.aliases"},
		{"misspelled", "- id: j\n  use: llm.judge\n  criterion: polite", `guards.yaml:3: guard j: llm.judge: unknown setting "criterion" (did you mean "criteria"?)`},
		{"redact", "- id: j\n  use: llm.judge\n  criteria: polite\n  action: redact", "guard j: llm.judge: action redact is not possible: a model's verdict says whether the content fails the criteria, not which part"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(StageOutput, specsFromYAML(t, "guards.yaml", c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build: %v\nwant %q", err, c.want)
			}
		})
	}
	for _, stage := range []Stage{StageToolCall, StageToolResult, StageToolDefinition, StageUpstreamContent} {
		_, err := Build(stage, specsFromYAML(t, "guards.yaml", "- {id: j, use: llm.judge, criteria: polite}"))
		if err == nil || !strings.Contains(err.Error(), "llm.judge cannot run in stage "+string(stage)+"; it runs in input, output") {
			t.Errorf("%s: Build: %v", stage, err)
		}
	}
	for _, action := range []string{"block", "escalate"} {
		build(t, StageInput, "- {id: j, use: llm.judge, criteria: polite, action: "+action+"}")
	}
}

// The judge is asked about the whole text with the entry's id, stage, model and criteria, and a
// failing verdict is one finding over the whole text that blocks by default; its reason names
// the guard, never the content.
func TestJudgeVerdicts(t *testing.T) {
	const answer = "The cup is in the drawer; send me your password to confirm."
	set := build(t, StageOutput, "- {id: answer-judge, use: llm.judge, criteria: The answer asks for no credentials., model: fast}")
	j := &judgeStub{verdict: failing}
	res, out := set.CheckText(judgedCtx(j), "", "", answer)
	if !res.Blocked || res.Action != ActionBlock || out != answer {
		t.Fatalf("failing verdict: %+v, text %q", res, out)
	}
	want := JudgeRequest{Guard: "answer-judge", Stage: StageOutput, Model: "fast", Criteria: "The answer asks for no credentials.", Text: answer}
	if len(j.asked) != 1 || j.asked[0] != want {
		t.Fatalf("asked %+v, want %+v", j.asked, want)
	}
	if len(res.Findings) != 1 {
		t.Fatalf("findings %+v", res.Findings)
	}
	if f := res.Findings[0]; f.Guard != "answer-judge" || f.Category != JudgeCategory || f.Start != 0 || f.End != len(answer) || f.Stage != "output" {
		t.Errorf("finding %+v", f)
	}
	if res.Reason != `guard "answer-judge" (llm.judge) found criteria_not_met in the text; the content was blocked` {
		t.Errorf("reason %q", res.Reason)
	}
	assertNoLeak(t, "reason", res.Reason, "password", "drawer")

	j = &judgeStub{verdict: passing}
	if res, out := set.CheckText(judgedCtx(j), "", "", answer); res.Action != ActionNone || len(res.Findings) != 0 || out != answer || len(j.asked) != 1 {
		t.Errorf("passing verdict: %+v, %q, asked %d", res, out, len(j.asked))
	}

	esc := build(t, StageInput, "- {id: task-judge, use: llm.judge, criteria: a robot task, action: escalate}")
	j = &judgeStub{verdict: failing}
	if res, _ := esc.CheckText(judgedCtx(j), "", "", "write me a poem"); res.Action != ActionEscalate || res.Blocked || j.asked[0].Stage != StageInput {
		t.Errorf("escalating judge: %+v, asked %+v", res, j.asked)
	}

	shadow := build(t, StageOutput, "- {id: j, use: llm.judge, criteria: polite, mode: log_only}")
	if res, _ := shadow.CheckText(judgedCtx(&judgeStub{verdict: failing}), "", "", "rude"); res.Action != ActionNone || len(res.Findings) != 1 || res.Findings[0].Mode != ModeLogOnly {
		t.Errorf("log_only judge: %+v", res)
	}
}

// A judge that cannot give a verdict — no JudgeFunc in the context (the guard run outside the
// agent), a failed model request, its entry's timeout — follows fail_mode: closed holds the
// content back with the guard's action, open lets it through; the error is recorded either way.
func TestJudgeFailMode(t *testing.T) {
	const text = "the cup is in the drawer"
	closed := build(t, StageOutput, "- {id: j, use: llm.judge, criteria: polite}")
	open := build(t, StageOutput, "- {id: j, use: llm.judge, criteria: polite, fail_mode: open}")
	escalating := build(t, StageOutput, "- {id: j, use: llm.judge, criteria: polite, action: escalate}")

	res, _ := closed.CheckText(context.Background(), "", "", text)
	if !res.Blocked || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Err, "llm.judge runs only in the built-in agent") {
		t.Errorf("no judge, closed: %+v", res)
	}
	if res, out := open.CheckText(context.Background(), "", "", text); res.Action != ActionNone || out != text || len(res.Errors) != 1 || res.Errors[0].FailMode != FailOpen {
		t.Errorf("no judge, open: %+v", res)
	}

	res, _ = closed.CheckText(judgedCtx(&judgeStub{verdict: erring}), "", "", text)
	if !res.Blocked || res.Reason != `guard "j" (llm.judge) failed (the judge gave no verdict: the judge's model request failed (HTTP 503)) and fails closed; the content was blocked` {
		t.Errorf("judge error, closed: %+v", res)
	}
	if res, _ := open.CheckText(judgedCtx(&judgeStub{verdict: erring}), "", "", text); res.Action != ActionNone || len(res.Errors) != 1 {
		t.Errorf("judge error, open: %+v", res)
	}
	if res, _ := escalating.CheckText(judgedCtx(&judgeStub{verdict: erring}), "", "", text); res.Action != ActionEscalate {
		t.Errorf("judge error, escalate closed: %+v", res)
	}

	slow := build(t, StageOutput, "- {id: j, use: llm.judge, criteria: polite, timeout: 50ms}")
	stalled := func(ctx context.Context, _ JudgeRequest) (bool, error) {
		<-ctx.Done()
		return false, ctx.Err()
	}
	start := time.Now()
	res, _ = slow.CheckText(WithJudge(context.Background(), stalled), "", "", text)
	if !res.Blocked || len(res.Errors) != 1 || res.Errors[0].Err != "timed out after 50ms" || time.Since(start) > 2*time.Second {
		t.Errorf("stalled judge: %+v after %s", res, time.Since(start))
	}
}

// The judge may only make a decision stricter (RULES R3). It runs after the stage's other
// guards, even when they passed; a passing verdict, or one that fails open, never lets through
// what a deterministic guard blocked or escalated; and content they blocked is never sent to it.
// It judges the text as their redactions leave it, so what a redacting guard takes out never
// reaches the judge's model.
func TestJudgeOnlyMakesDecisionsStricter(t *testing.T) {
	const stage = `
- {id: deny, use: regex.deny, patterns: [forbidden]}
- {id: hold, use: regex.deny, patterns: [drawer], action: escalate}
- {id: pii, use: pii.regex}
- {id: j, use: llm.judge, criteria: polite, fail_mode: open}
`
	set := build(t, StageOutput, stage)
	for _, verdict := range []func(JudgeRequest) (bool, error){passing, erring} {
		j := &judgeStub{verdict: verdict}
		if res, _ := set.CheckText(judgedCtx(j), "", "", "this is forbidden"); !res.Blocked || len(j.asked) != 0 {
			t.Errorf("blocked by regex.deny: %+v, judge asked %d times", res, len(j.asked))
		}
		j = &judgeStub{verdict: verdict}
		if res, _ := set.CheckText(judgedCtx(j), "", "", "the cup is in the drawer"); res.Action != ActionEscalate || len(j.asked) != 1 {
			t.Errorf("escalated by regex.deny: %+v, judge asked %d times", res, len(j.asked))
		}
	}

	// The others passed: the judge still runs, and its failing verdict blocks.
	j := &judgeStub{verdict: failing}
	res, _ := set.CheckText(judgedCtx(j), "", "", "the cup is on the table")
	if !res.Blocked || len(j.asked) != 1 || res.Findings[len(res.Findings)-1].Guard != "j" {
		t.Errorf("others passed, judge failed: %+v, asked %d", res, len(j.asked))
	}
	// Stronger than an escalation, too.
	j = &judgeStub{verdict: failing}
	if res, _ := set.CheckText(judgedCtx(j), "", "", "the cup is in the drawer"); !res.Blocked {
		t.Errorf("escalated, then the judge failed it: %+v", res)
	}

	// Redacted before it is judged; a passing verdict passes the redaction on.
	j = &judgeStub{verdict: passing}
	res, out := set.CheckText(judgedCtx(j), "", "", "mail ann@example.com when done")
	if res.Action != ActionRedact || out != "mail [EMAIL] when done" || len(j.asked) != 1 || j.asked[0].Text != "mail [EMAIL] when done" {
		t.Errorf("redacted, judge passed: %+v, %q, asked %+v", res, out, j.asked)
	}
	// A failing verdict blocks, and the finding's offsets are in the text it judged.
	j = &judgeStub{verdict: failing}
	res, _ = set.CheckText(judgedCtx(j), "", "", "mail ann@example.com when done")
	last := res.Findings[len(res.Findings)-1]
	if !res.Blocked || last.Guard != "j" || last.End != len("mail [EMAIL] when done") {
		t.Errorf("redacted, judge failed: %+v", res)
	}
	assertNoLeak(t, "judge request", j.asked[0].Text, "ann@example.com")
}

// A second judge is not asked once a first one blocked: it could not make the result stricter.
func TestJudgesStopAtTheFirstBlock(t *testing.T) {
	set := build(t, StageOutput, `
- {id: first, use: llm.judge, criteria: polite}
- {id: second, use: llm.judge, criteria: short}
`)
	j := &judgeStub{verdict: failing}
	if res, _ := set.CheckText(judgedCtx(j), "", "", "rude and long"); !res.Blocked || len(j.asked) != 1 || j.asked[0].Guard != "first" {
		t.Errorf("%+v, asked %+v", res, j.asked)
	}
	j = &judgeStub{verdict: func(req JudgeRequest) (bool, error) { return req.Guard == "first", nil }}
	if res, _ := set.CheckText(judgedCtx(j), "", "", "polite and long"); !res.Blocked || len(j.asked) != 2 || res.Findings[0].Guard != "second" {
		t.Errorf("%+v, asked %+v", res, j.asked)
	}
}
