package agent

import (
	"strings"
	"sync"
	"time"

	"github.com/mcp-gateway/mcp-gateway/agent/model"
)

// chunkSink receives the text a step's model request streams (model.WithChunks): each chunk is
// a {"type":"chunk"} transcript event and is printed to Out.
//
// Without output guards and without hold_stream the chunks go out as they arrive: live, like the
// stream. With output guards or hold_stream (Options.HoldStream) they are held until the step's
// answer is known and screened, and go out only when its text is shown as the model wrote it: a
// final answer the guards passed untouched, or the text of a step that calls tools (which the
// output guards do not screen). A declined answer's, a blocked or redacted answer's, and an answer
// withheld by a budget are dropped. A model that declines after streaming (the signal comes last)
// has its live chunks shown already; hold_stream keeps them back in the model until the answer
// has finished, and then here until the step decides.
type chunkSink struct {
	rn   *run
	step int
	live bool

	mu      sync.Mutex
	held    []string
	printed bool // live chunks were printed: their line is open
}

// add takes one chunk; it is the step's chunk callback.
func (s *chunkSink) add(chunk string) {
	if chunk == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live {
		s.held = append(s.held, chunk)
		return
	}
	s.rn.emit(Event{Type: "chunk", Step: s.step, Text: chunk})
	if !s.printed {
		s.printed = true
		s.rn.printf("  model: ")
	}
	s.rn.printf("%s", chunk)
}

// close ends the line of live chunks once the request has returned, and reports whether the
// step's text was printed that way.
func (s *chunkSink) close() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.printed {
		s.rn.printf("\n")
	}
	return s.printed
}

// release writes the held chunks' events: the step's text is shown as the model streamed it.
func (s *chunkSink) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, chunk := range s.held {
		s.rn.emit(Event{Type: "chunk", Step: s.step, Text: chunk})
	}
	s.held = nil
}

// stepView writes a step's event and printout once what is shown of its answer is decided.
type stepView struct {
	rn          *run
	sink        *chunkSink
	livePrinted bool
	took        time.Duration
	// ev is the step event; its Usage, Total and DurationMS are set, Reason and Category are
	// set by the caller before show.
	ev Event
}

// show writes the step event and prints the step with text and reasoning as shown, then the
// verdicts of the judges that screened it; chunks says whether the held chunks go out (the text
// is shown as the model streamed it).
func (v *stepView) show(text, reasoning string, chunks bool) {
	if chunks {
		v.sink.release()
	}
	ev := v.ev
	ev.Text, ev.Reasoning = text, reasoning
	v.rn.emit(ev)
	v.rn.printf("step %d (%s)\n", ev.Step, stepSummary(ev.FinishReason, *ev.Usage, *ev.Total, v.took))
	for _, w := range ev.Evidence.Warnings {
		v.rn.printf("  provider: %s\n", w)
	}
	if ev.Warning != "" {
		v.rn.printf("  warning: %s\n", ev.Warning)
	}
	if reasoning != "" {
		v.rn.printf("%s", indented("  thinking: ", reasoning))
	}
	if text != "" && !v.livePrinted {
		v.rn.printf("  model: %s\n", text)
	}
	v.rn.releaseJudgeLines()
}

// redactedThinking stands for reasoning the provider encrypted, in the transcript and the
// printout.
const redactedThinking = "[redacted thinking]"

// reasoningShown is a result's reasoning as the transcript shows it: the readable reasoning
// blocks' text (text, screened by the output guards with guard_reasoning, replaces it when set)
// and "[redacted thinking]" for each encrypted block, joined by blank lines.
func reasoningShown(res *model.Result, text *string) string {
	var parts []string
	readable := false
	for _, b := range res.Blocks {
		switch {
		case b.Kind != model.BlockReasoning:
		case b.Redacted:
			parts = append(parts, redactedThinking)
		case b.Text != "" && text == nil:
			parts = append(parts, b.Text)
		case b.Text != "" && !readable:
			readable = true
			if *text != "" {
				parts = append(parts, *text)
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// indented prints text after label, its further lines indented to line up (blank lines stay
// blank).
func indented(label, text string) string {
	pad := strings.Repeat(" ", len(label))
	lines := strings.Split(text, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = pad + lines[i]
		}
	}
	return label + strings.Join(lines, "\n") + "\n"
}
