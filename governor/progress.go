package governor

import (
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressMeter keeps the progress notifications of one call increasing, as MCP requires, across
// the parts of the call that send them: the gateway while the call waits for an operator, the
// upstream while it runs, the gateway again while a tool_result guard holds the result. Each
// part counts from its own zero; the meter moves it past what the client was already sent.
type progressMeter struct {
	send func(*mcp.ProgressNotificationParams)

	mu   sync.Mutex // held while sending: notifications leave in the order they are made
	last float64    // the highest progress sent
	sent bool
}

// progressStage is one part of a call that reports progress.
type progressStage struct {
	m     *progressMeter
	base  float64
	ended atomic.Bool
}

// stage begins the next part: its progress and total are offset to start one past the last
// progress sent (at 0 when none was).
func (m *progressMeter) stage() *progressStage {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &progressStage{m: m}
	if m.sent {
		s.base = m.last + 1
	}
	return s
}

// send sends p, offset; one that would not increase the progress, or comes after end, is
// dropped.
func (s *progressStage) send(p *mcp.ProgressNotificationParams) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	v := s.base + p.Progress
	if s.ended.Load() || (m.sent && v <= m.last) {
		return
	}
	m.last, m.sent = v, true
	q := *p
	q.Progress = v
	if q.Total > 0 {
		q.Total += s.base
	}
	m.send(&q)
}

// end drops whatever the part still sends, at once: it does not wait for a send in progress.
// The next stage begins after that send has left, so the client still gets them in order.
func (s *progressStage) end() { s.ended.Store(true) }

// sender is s.send, or nil for a nil s (a call whose client asked for no progress).
func (s *progressStage) sender() func(*mcp.ProgressNotificationParams) {
	if s == nil {
		return nil
	}
	return s.send
}

// progressStage begins the next part of c that reports progress; nil when the client asked for
// none (c.Progress is nil). Called on the call's own goroutine.
func (c *Call) progressStage() *progressStage {
	if c.Progress == nil {
		return nil
	}
	if c.progress == nil {
		c.progress = &progressMeter{send: c.Progress}
	}
	return c.progress.stage()
}
