package model

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The first turn's answer: a fallback took over, thought (signed; its text has the
// characters a JSON encoder likes to escape, and escapes one would write differently: \/
// and \u00e9), thought in redacted form, said something and called a tool; some blocks
// carry a field the translator does not read.
var replayTurn1 = []string{
	`{"type":"fallback","from":{"model":"claude-opus-5-5"},"to":{"model":"claude-opus-4-8"}}`,
	`{"type":"thinking","thinking":"The cup is on the table & the drawer is < 1 m away, so: open it first (caf\u00e9 cup, left\/right?).","signature":"EqQBCkYIBxgCKkDq8l3yR0k2Xb1mYpTgW7dV4nZ9sL2aQ6cF1hJ8uE5oK3rT0iM7vN4bG2wD9xS6yP1qA5zC8fH3jL0eU7tR","x_future":{"hop":1}}`,
	`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzGAD7vIdz2QaDGQ7i5rZ1v2X8pA0nQ0hR5mL9sT2wK7yF3cB6jE1uD8oN4gV0aH5xZ2lP9qS7tM3kC6e","x_future":true}`,
	`{"type":"text","text":"I'll open the left drawer \u2014 caf\u00e9.","citations":null}`,
	`{"type":"tool_use","id":"toolu_01RP","name":"robot__open_drawer","input":{"drawer":"left\/"},"caller":{"type":"direct"}}`,
}

// TestAnthropicToolLoopReplaysThinking runs a two-turn tool loop through an httptest
// Messages server: the second request carries the first answer's content blocks unchanged
// and in order, byte for byte (Block.Raw): the signed thinking block, escapes and fields the
// translator does not read included.
func TestAnthropicToolLoopReplaysThinking(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	var mu sync.Mutex
	var bodies [][]byte
	var headers []http.Header
	answers := []string{
		`{"id":"msg_01RP1","type":"message","role":"assistant","model":"claude-opus-4-8","content":[` + strings.Join(replayTurn1, ",") + `],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":412,"output_tokens":120}}`,
		`{"id":"msg_01RP2","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"The cup is in the drawer."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":700,"output_tokens":9}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, body)
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path != "/v1/messages" || n >= len(answers) {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no such turn"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("request-id", "req_turn")
		_, _ = io.WriteString(w, answers[n])
	}))
	defer srv.Close()

	retries := 0
	m, err := New(Settings{Provider: "anthropic", BaseURL: srv.URL, Model: "claude-opus-5-5", MaxRetries: &retries})
	if err != nil {
		t.Fatal(err)
	}
	call := &Call{
		Instructions: []string{"You drive a home robot through its tools."},
		Messages:     []Message{{Role: RoleUser, Text: "Put the red cup in the drawer."}},
		Tools:        []Tool{{Name: "robot__open_drawer", InputSchema: json.RawMessage(`{"type":"object","properties":{"drawer":{"type":"string"}}}`)}},
	}
	res, err := m.Generate(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	calls := res.ToolCalls()
	if len(calls) != 1 || res.Evidence.Model != "claude-opus-4-8" || len(res.Evidence.Warnings) != 1 {
		t.Fatalf("turn 1: %+v", res)
	}
	call.Messages = append(call.Messages, res.AssistantMessage(), Message{
		Role:        RoleTool,
		ToolResults: []ToolResult{{CallID: calls[0].ID, Name: calls[0].Name, Content: `{"success":true,"result":{"opened":"left"}}`}},
	})
	if _, err := m.Generate(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2", len(bodies))
	}
	for i, h := range headers {
		if h.Get("Anthropic-Beta") != FallbackBeta || h.Get("X-Api-Key") != "test-key" || h.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("request %d headers %v", i+1, h)
		}
	}

	var second struct {
		Thinking  map[string]string `json:"thinking"`
		Fallbacks string            `json:"fallbacks"`
		Messages  []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(bodies[1], &second); err != nil {
		t.Fatal(err)
	}
	if second.Thinking["type"] != "adaptive" || second.Fallbacks != "default" || len(second.Messages) != 3 {
		t.Fatalf("turn 2 request: %s", bodies[1])
	}
	replayed := second.Messages[1]
	if replayed.Role != "assistant" || len(replayed.Content) != len(replayTurn1) {
		t.Fatalf("turn 2 replays %d blocks as %s, want the %d of turn 1: %s", len(replayed.Content), replayed.Role, len(replayTurn1), bodies[1])
	}
	for i, want := range replayTurn1 {
		if !bytes.Equal(replayed.Content[i], []byte(want)) {
			t.Errorf("block %d replayed as\n%s\nwant it unchanged:\n%s", i, replayed.Content[i], want)
		}
	}
	if !bytes.Contains(bodies[1], []byte(replayTurn1[1])) {
		t.Error("the signed thinking block is not byte-equal in the second request's body")
	}
	if got := second.Messages[2].Content; len(got) != 1 || !bytes.Contains(got[0], []byte(`"tool_use_id":"toolu_01RP"`)) {
		t.Errorf("turn 2 tool result: %s", got)
	}
}

// TestAnthropicReplaySkipsWhatTheAPIRefuses checks that reasoning without a signature (from
// another provider), redacted reasoning without data and empty text are not replayed, and that a message whose blocks
// leave nothing to send falls back to its text and tool calls.
func TestAnthropicReplaySkipsWhatTheAPIRefuses(t *testing.T) {
	c := validCall()
	c.Messages = append(c.Messages,
		Message{Role: RoleAssistant, Text: "ok", Blocks: []Block{{Kind: BlockReasoning, Text: "unsigned"}, {Kind: BlockReasoning, Redacted: true}, {Kind: BlockText, Text: ""}, {Kind: BlockText, Text: "ok"}}},
		Message{Role: RoleUser, Text: "again"},
		Message{Role: RoleAssistant, Text: "by hand", Blocks: []Block{{Kind: BlockReasoning, Text: "unsigned"}}},
	)
	req := requestContent(t, c)
	if got := req.Messages[1].Content; len(got) != 1 || string(got[0]) != `{"type":"text","text":"ok"}` {
		t.Errorf("replayed %s, want only the text block", got)
	}
	if got := req.Messages[3].Content; len(got) != 1 || string(got[0]) != `{"type":"text","text":"by hand"}` {
		t.Errorf("sent %s, want the message's text", got)
	}
}

// TestAnthropicFallbackAnswerOnly runs a tool loop through an httptest Messages server
// whose first answer holds a declined model's output (text, a tool call) before a fallback
// block and the fallback's answer after it (testdata/anthropic/responses/
// fallback_declined_part.json; streamed: stream/fallback_declined_part.sse). The answer
// shown and run is the fallback's alone; the next request sends the whole turn back
// verbatim, fallback block included, and answers the declined model's tool call as not
// run, ahead of the result of the call that ran. Streamed, the declined text is shown as it
// arrives unless hold_stream holds the chunks until the answer is known.
func TestAnthropicFallbackAnswerOnly(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	var recorded struct {
		Response json.RawMessage `json:"response"`
	}
	decodeLoose(t, filepath.Join("testdata", "anthropic", "responses", "fallback_declined_part.json"), &recorded)
	sse, err := os.ReadFile(filepath.Join("testdata", "anthropic", "stream", "fallback_declined_part.sse"))
	if err != nil {
		t.Fatal(err)
	}
	var turn1 struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(recorded.Response, &turn1); err != nil {
		t.Fatal(err)
	}
	final := `{"id":"msg_01FB4","type":"message","role":"assistant","model":"claude-opus-4-8","content":[{"type":"text","text":"At the table."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":900,"output_tokens":5}}`
	finalSSE := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":" + strings.Replace(final, `"content":[{"type":"text","text":"At the table."}]`, `"content":[]`, 1) + "}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name         string
		stream, hold bool
		shown        string
	}{
		{"unstreamed", false, false, ""},
		// Streamed text is shown as it arrives, before the fallback block says whose it is.
		{"streamed", true, false, "DECLINEDPART Fallback says hi."},
		{"streamed held", true, true, "Fallback says hi."},
	} {
		stream := tc.stream
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies [][]byte
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				n := len(bodies)
				bodies = append(bodies, body)
				mu.Unlock()
				switch {
				case n == 0 && stream:
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write(sse)
				case n == 0:
					_, _ = w.Write(recorded.Response)
				case stream:
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, finalSSE)
				default:
					_, _ = io.WriteString(w, final)
				}
			}))
			defer srv.Close()
			retries := 0
			m, err := New(Settings{Provider: "anthropic", BaseURL: srv.URL, Model: "claude-opus-5-5", MaxRetries: &retries, Stream: stream, HoldStream: tc.hold})
			if err != nil {
				t.Fatal(err)
			}
			call := &Call{
				Messages: []Message{{Role: RoleUser, Text: "Go to the table."}},
				Tools:    []Tool{{Name: "robot__navigate_to"}},
			}
			var shown []string
			res, err := m.Generate(WithChunks(context.Background(), func(c string) { shown = append(shown, c) }), call)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(shown, "") != tc.shown {
				t.Errorf("chunks shown %q, want %q", shown, tc.shown)
			}
			if res.Text() != "Fallback says hi." || res.Reasoning() != "" {
				t.Errorf("text %q reasoning %q, want the fallback's answer alone", res.Text(), res.Reasoning())
			}
			if stream && strings.Join(res.Chunks, "") != "Fallback says hi." {
				t.Errorf("chunks %q, want the fallback's answer alone", res.Chunks)
			}
			calls := res.ToolCalls()
			if len(calls) != 1 || calls[0].ID != "toolu_01ANSW" || string(calls[0].Arguments) != `{"target":"table"}` {
				t.Fatalf("tool calls %+v, want only the fallback's call to the table", calls)
			}
			msg := res.AssistantMessage()
			if msg.Text != "Fallback says hi." || len(msg.ToolCalls) != 1 {
				t.Errorf("assistant message %+v", msg)
			}
			call.Messages = append(call.Messages, msg, Message{
				Role:        RoleTool,
				ToolResults: []ToolResult{{CallID: calls[0].ID, Name: calls[0].Name, Content: `{"success":true}`}},
			})
			if _, err := m.Generate(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			var second struct {
				Messages []struct {
					Role    string            `json:"role"`
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(bodies[1], &second); err != nil || len(second.Messages) != 3 {
				t.Fatalf("turn 2 request (%v): %s", err, bodies[1])
			}
			replayed := second.Messages[1].Content
			if len(replayed) != len(turn1.Content) {
				t.Fatalf("turn 2 replays %d blocks, want the %d of turn 1: %s", len(replayed), len(turn1.Content), bodies[1])
			}
			for i, want := range turn1.Content {
				if !bytes.Equal(replayed[i], compact(want)) {
					t.Errorf("block %d replayed as\n%s\nwant it unchanged:\n%s", i, replayed[i], compact(want))
				}
			}
			results := second.Messages[2].Content
			want := []string{
				`{"type":"tool_result","tool_use_id":"toolu_01DECL","content":"` + notRunResult + `","is_error":true}`,
				`{"type":"tool_result","tool_use_id":"toolu_01ANSW","content":"{\"success\":true}"}`,
			}
			if second.Messages[2].Role != "user" || len(results) != len(want) {
				t.Fatalf("turn 2 user turn %s", results)
			}
			for i := range want {
				if string(results[i]) != want[i] {
					t.Errorf("tool result %d: %s\nwant %s", i, results[i], want[i])
				}
			}
		})
	}
}

func decodeLoose(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestAnthropicReplayRawOrFields checks where a replayed block's JSON comes from: the block
// as received (Block.Raw) when it has one; its fields for a block without one (a streamed
// answer's) and for a tool call whose arguments did not parse, since the API takes only an
// object back.
func TestAnthropicReplayRawOrFields(t *testing.T) {
	c := validCall()
	c.Messages = append(c.Messages, Message{Role: RoleAssistant, Text: "caf\u00e9", ToolCalls: []ToolCall{{ID: "t1", Name: "robot__stop", Arguments: json.RawMessage(`{}`)}}, Blocks: []Block{
		{Kind: BlockReasoning, Text: "th/é", Signature: "sig", Raw: json.RawMessage(`{"type":"thinking", "thinking":"th\/\u00e9","signature":"sig","extra":1}`)},
		{Kind: BlockReasoning, Text: "th/é", Signature: "sig"},
		{Kind: BlockText, Text: "café", Raw: json.RawMessage(`{"type":"text","text":"caf\u00e9"}`)},
		{Kind: BlockToolCall, ToolCall: &ToolCall{ID: "t0", Name: "robot__grip", Raw: `"oops"`}, Raw: json.RawMessage(`{"type":"tool_use","id":"t0","name":"robot__grip","input":"oops"}`)},
		{Kind: BlockToolCall, ToolCall: &ToolCall{ID: "t1", Name: "robot__stop", Arguments: json.RawMessage(`{}`)}, Raw: json.RawMessage(`{"type":"tool_use","id":"t1","name":"robot__stop","input":{},"caller":{"type":"direct"}}`)},
	}})
	c.Messages = append(c.Messages, Message{Role: RoleTool, ToolResults: []ToolResult{{CallID: "t0", Content: "invalid"}, {CallID: "t1", Content: "ok"}}})
	req := requestContent(t, c)
	want := []string{
		`{"type":"thinking","thinking":"th\/\u00e9","signature":"sig","extra":1}`,
		`{"type":"thinking","thinking":"th/é","signature":"sig"}`,
		`{"type":"text","text":"caf\u00e9"}`,
		`{"type":"tool_use","id":"t0","name":"robot__grip","input":{}}`,
		`{"type":"tool_use","id":"t1","name":"robot__stop","input":{},"caller":{"type":"direct"}}`,
	}
	got := req.Messages[1].Content
	if len(got) != len(want) {
		t.Fatalf("replayed %s", got)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("block %d replayed as %s, want %s", i, got[i], want[i])
		}
	}
	// Transcripts and --record files write Results as JSON: the block as received stays out.
	if out, _ := json.Marshal(c.Messages[1].Blocks[0]); bytes.Contains(out, []byte("extra")) {
		t.Errorf("a block's JSON carries its raw form: %s", out)
	}
}

// requestContent is the Messages request for c, with the content blocks of each message as
// they are sent.
func requestContent(t *testing.T, c *Call) (req struct {
	Messages []struct {
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
}) {
	t.Helper()
	body, err := AnthropicRequest(c, Settings{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return req
}
