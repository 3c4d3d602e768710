package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordReplayRoundTrip records a scripted session and replays it: the
// replay gives the same Results in the same order, then says it is done.
func TestRecordReplayRoundTrip(t *testing.T) {
	script, err := NewScripted(ScriptedSettings{
		Rules: []ScriptRule{{Role: "tool", Times: 1, Reply: Reply{Text: "The cup is in the drawer.", CostUSD: 0.01}}},
		Replies: []Reply{
			{ToolCalls: []ScriptToolCall{{Name: "robot__navigate_to", Arguments: map[string]any{"target": "table"}}}},
			{Text: "cut", FinishReason: "length", Model: "m-2"},
			{Text: "no", FinishReason: "refusal"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.jsonl")
	rec, err := NewRecorder(script, path)
	if err != nil {
		t.Fatal(err)
	}
	calls := []*Call{userCall("put the cup away"), toolCall(`{"success":true}`), userCall("more"), userCall("again")}
	var recorded []*Result
	for _, c := range calls {
		res, err := rec.Generate(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, res)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Generate(context.Background(), calls[0]); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("want an error after Close, got %v", err)
	}

	t.Setenv(ReplayEnv, path)
	replay, err := New(Settings{Provider: "mock"})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		res, err := replay.Generate(context.Background(), c)
		if err != nil {
			t.Fatalf("decision %d: %v", i+1, err)
		}
		got, _ := json.Marshal(res)
		want, _ := json.Marshal(recorded[i])
		assertSameJSON(t, "replayed result", got, want)
	}
	_, err = replay.Generate(context.Background(), calls[0])
	want := "replay file " + path + " has 4 decisions; the run asked for decision 5"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestReplayFile checks the hand-written forms: comments and blank lines
// skipped, compact decisions read, full Results read as written.
func TestReplayFile(t *testing.T) {
	path := writeReplay(t, `# a hand-written session
// two decisions and a full result

{"text": "", "tool_calls": [{"name": "robot__stop"}, {"id": "x9", "name": "robot__grip", "arguments": {"force": 2}}], "usage": {"input_tokens": 10, "output_tokens": 4}}
   {"text": "Done."}
{"blocks":[{"kind":"reasoning","text":"hm"},{"kind":"text","text":"ok"}],"finish_reason":"stop","usage":{"input_tokens":1,"output_tokens":2},"evidence":{"request_id":"req_1","model":"gpt-4o-mini"}}
`)
	r, err := NewReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 3 {
		t.Fatalf("got %d decisions, want 3", r.Len())
	}
	want := []string{
		`|robot__stop:call_1:{} robot__grip:x9:{"force":2}|tool_calls`,
		"Done.||stop",
		"ok||stop",
	}
	for i, w := range want {
		res, err := r.Generate(context.Background(), userCall("x"))
		if err != nil {
			t.Fatal(err)
		}
		if got := summary(res); got != w {
			t.Errorf("decision %d: %q, want %q", i+1, got, w)
		}
		if i == 0 && res.Usage != (Usage{InputTokens: 10, OutputTokens: 4}) {
			t.Errorf("decision 1: usage %+v", res.Usage)
		}
		if i == 2 && (len(res.Blocks) != 2 || res.Evidence.RequestID != "req_1") {
			t.Errorf("decision 3: %+v", res)
		}
	}
}

func TestReplayFileErrors(t *testing.T) {
	cases := []struct {
		content string
		want    string
	}{
		{"# only\n{\"text\": \"a\"}\nnot json\n", ":3: not a JSON object"},
		{"{\"text\": \"a\", \"thought\": 1}\n", `:1: decision: json: unknown field "thought"`},
		{"{\"blocks\": [], \"usage\": {}}\n", ":1: result has no finish_reason"},
		{"{\"tool_calls\": [{\"arguments\": {}}]}\n", ":1: tool_calls[0].name: tool call 1 has no name"},
		{"{\"finish_reason\": \"done\"}\n", `:1: finish_reason: "done"`},
	}
	for _, tc := range cases {
		path := writeReplay(t, tc.content)
		if _, err := NewReplay(path); err == nil || !strings.Contains(err.Error(), path+tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.content, err, path+tc.want)
		}
	}
	if _, err := NewReplay(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("want an error naming the missing file, got %v", err)
	}
	r, err := NewReplay(writeReplay(t, "# nothing yet\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Generate(context.Background(), userCall("x")); err == nil || !strings.Contains(err.Error(), "has 0 decisions; the run asked for decision 1") {
		t.Errorf("got %v", err)
	}
}

func writeReplay(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replay.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayChunksAndInvocationID checks that a replayed decision recorded from a streamed
// answer delivers its chunks again, and carries the replaying run's invocation id, not the
// recorded one.
func TestReplayChunksAndInvocationID(t *testing.T) {
	path := writeReplay(t, `{"blocks":[{"kind":"text","text":"ab"}],"chunks":["a","b"],"finish_reason":"stop","usage":{"input_tokens":1,"output_tokens":1},"evidence":{"invocation_id":"old-run-step1-req1"}}
`)
	r, err := NewReplay(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	ctx := WithChunks(WithInvocationID(context.Background(), "new-run-step1-req1"), func(c string) { got = append(got, c) })
	res, err := r.Generate(ctx, userCall("x"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "a|b" || res.Evidence.InvocationID != "new-run-step1-req1" {
		t.Errorf("delivered %q, invocation id %q", got, res.Evidence.InvocationID)
	}
	if r.decisions[0].Evidence.InvocationID != "old-run-step1-req1" {
		t.Errorf("the decision itself was changed: %+v", r.decisions[0].Evidence)
	}
}
