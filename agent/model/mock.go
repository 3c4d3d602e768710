package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// maxReplayLine bounds one decision line of a replay file.
const maxReplayLine = 16 << 20

// Replay is the mock Model: it answers each call with the next decision of
// a JSONL file, so a recorded session runs again offline, exactly. It does
// not look at the calls. It is safe for concurrent use.
type Replay struct {
	path      string
	decisions []*Result

	mu   sync.Mutex
	next int
}

// replayCompact is the hand-written form of a decision: a reply's text,
// tool calls, finish reason and usage.
type replayCompact struct {
	Text         string           `json:"text"`
	ToolCalls    []ScriptToolCall `json:"tool_calls"`
	FinishReason string           `json:"finish_reason"`
	Usage        *Usage           `json:"usage"`
}

// NewReplay reads a replay file: one decision a line, either a Result as a
// Recorder writes it (it has "blocks") or the compact form {text,
// tool_calls, finish_reason, usage}; blank lines and lines starting with #
// or // are skipped. A compact decision's tool calls without an id get
// call_1, call_2, … in file order, and its usage is zero when not given.
// Errors name the file and line.
func NewReplay(path string) (*Replay, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer f.Close()
	r := &Replay{path: path}
	ids := 0
	newID := func() string {
		ids++
		return fmt.Sprintf("call_%d", ids)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxReplayLine)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, "//") {
			continue
		}
		res, err := parseDecision([]byte(text), newID)
		if err != nil {
			return nil, fmt.Errorf("replay file %s:%d: %w", path, line, err)
		}
		r.decisions = append(r.decisions, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("replay file %s: %w", path, err)
	}
	return r, nil
}

// parseDecision reads one decision line.
func parseDecision(line []byte, newID func() string) (*Result, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(line, &keys); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if _, ok := keys["blocks"]; ok {
		var res Result
		if err := dec.Decode(&res); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		if res.Blocks == nil {
			res.Blocks = []Block{}
		}
		if res.FinishReason == "" {
			return nil, fmt.Errorf("result has no finish_reason")
		}
		return &res, nil
	}
	var c replayCompact
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decision: %w", err)
	}
	reply := Reply{Text: c.Text, ToolCalls: c.ToolCalls, FinishReason: c.FinishReason, Usage: c.Usage}
	if reply.Usage == nil {
		reply.Usage = &Usage{}
	}
	if errs := reply.check(""); len(errs) > 0 {
		e := errs[0]
		if e.Key == "" {
			return nil, errors.New(e.Msg)
		}
		return nil, fmt.Errorf("%s: %s", strings.TrimPrefix(e.Key, "."), e.Msg)
	}
	res, err := buildResult(nil, reply, "", newID)
	if err != nil {
		return nil, err
	}
	res.Evidence.Model = ""
	return res, nil
}

// Len returns the number of decisions in the file.
func (r *Replay) Len() int { return len(r.decisions) }

// Generate returns the next decision, or an error once the file has none
// left. A decision recorded from a streamed answer delivers its chunks to
// the context's chunk callback again; the result carries the context's
// invocation id, not the recorded one.
func (r *Replay) Generate(ctx context.Context, c *Call) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	r.mu.Lock()
	if r.next >= len(r.decisions) {
		n := r.next
		r.mu.Unlock()
		return nil, fmt.Errorf("replay file %s has %d decisions; the run asked for decision %d", r.path, len(r.decisions), n+1)
	}
	res := *r.decisions[r.next] // a copy: the decision itself is kept as read
	r.next++
	r.mu.Unlock()
	res.Evidence.InvocationID = InvocationID(ctx)
	if fn := chunksOf(ctx); fn != nil && !res.Refusal {
		for _, chunk := range res.Chunks {
			fn(chunk)
		}
	}
	return &res, nil
}

// Recorder wraps a Model and writes each Result it returns to a file as one
// JSON line, the format Replay reads, so a real session can be replayed
// offline. Calls that fail are not recorded. It is safe for concurrent use
// when the wrapped Model is.
type Recorder struct {
	model Model
	path  string

	mu   sync.Mutex
	file *os.File
}

// NewRecorder creates (or truncates) the file at path and returns a
// Recorder writing m's results to it. Close it when the run ends.
func NewRecorder(m Model, path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	return &Recorder{model: m, path: path, file: f}, nil
}

// Generate calls the wrapped model and records its result before returning
// it. A result that cannot be written is an error: a recording with a gap
// would replay a different run.
func (r *Recorder) Generate(ctx context.Context, c *Call) (*Result, error) {
	res, err := r.model.Generate(ctx, c)
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil, fmt.Errorf("recorder: %s is closed", r.path)
	}
	if _, err := r.file.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("recorder: writing %s: %w", r.path, err)
	}
	return res, nil
}

// Close closes the file; later calls fail.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	if err != nil {
		return fmt.Errorf("recorder: closing %s: %w", r.path, err)
	}
	return nil
}
