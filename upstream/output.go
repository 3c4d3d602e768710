package upstream

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// What a server wrote that the gateway refused, as the fixed reason labels of
// OutputError.Reason and of [Upstream.OutputErrors].
const (
	// OutputTooLarge: a message over the server's max_result_bytes, discarded while it was read.
	OutputTooLarge = "too_large"
	// OutputInvalidUTF8: a JSON message that is not valid UTF-8.
	OutputInvalidUTF8 = "invalid_utf8"
	// OutputNotJSONRPC: a line that looks like JSON but is not a valid JSON-RPC message.
	OutputNotJSONRPC = "not_jsonrpc"
	// OutputNotJSON: a line on a stdio server's stdout that is not JSON at all (a banner, a
	// log line). It is skipped; the session goes on.
	OutputNotJSON = "not_json"
)

// OutputReasons are every OutputError reason, in a fixed order.
var OutputReasons = []string{OutputTooLarge, OutputInvalidUTF8, OutputNotJSONRPC, OutputNotJSON}

// quoteBytes bounds how much of an offending line a message quotes.
const quoteBytes = 200

// OutputError is a message from the server that the gateway refused while reading it: too
// large, not valid UTF-8, or not JSON-RPC. When the message answered a call (its JSON-RPC id
// could be read), only that call fails, with this error; the session stays up. When it could
// not be tied to a call, the connection fails with it (Fatal), and every call in flight on it
// fails with it. Either way the call was sent and its answer is lost.
type OutputError struct {
	Server string
	// Reason is one of OutputTooLarge, OutputInvalidUTF8, OutputNotJSONRPC.
	Reason string
	// Size is the message's length in bytes; with Truncated, the bytes read before the stream
	// ended, so the message was at least that long.
	Size      int64
	Truncated bool
	// Limit is the server's max_result_bytes.
	Limit int64
	// Quote is the start of the message, escaped, at most about 200 characters.
	Quote string
	// Detail says what is wrong with a message that is not JSON-RPC, or where the invalid
	// UTF-8 is.
	Detail string
	// Fatal: the message could not be tied to one call, so the connection was failed.
	Fatal bool
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("server %s sent %s", e.Server, e.what())
}

// Explain says, for the caller of call (the tool's public name), what the server answered
// and what to do about it.
func (e *OutputError) Explain(call string) string {
	s := fmt.Sprintf("server %s answered the call to %s with %s; the result was discarded.", e.Server, call, e.what())
	if e.Fatal {
		s += " The answer could not be tied to one call, so the server's connection was closed and it is being restarted."
	}
	switch e.Reason {
	case OutputTooLarge:
		return s + " Ask for less, or raise servers[].max_result_bytes."
	case OutputInvalidUTF8:
		return s + " The server must write its messages in UTF-8; tell its maintainer."
	}
	return s + " The server broke the protocol; tell its maintainer."
}

func (e *OutputError) what() string {
	switch e.Reason {
	case OutputTooLarge:
		least := ""
		if e.Truncated {
			least = "at least "
		}
		return fmt.Sprintf("a message of %s%d bytes, over its max_result_bytes of %d", least, e.Size, e.Limit)
	case OutputInvalidUTF8:
		return fmt.Sprintf("a message that is not valid UTF-8 (%s): %s", e.Detail, e.Quote)
	}
	return fmt.Sprintf("a message that is not valid JSON-RPC (%s): %s", e.Detail, e.Quote)
}

// quote is the start of a line for a message: at most quoteBytes of it, escaped (so control
// bytes and invalid UTF-8 show as escapes), in single quotes, with … when cut.
func quote(line []byte) string {
	cut := len(line) > quoteBytes
	if cut {
		line = line[:quoteBytes]
		for i := 0; i < utf8.UTFMax && len(line) > 0 && !utf8.Valid(line); i++ {
			line = line[:len(line)-1] // do not split the last character
		}
	}
	q := strconv.Quote(string(line))
	q = "'" + q[1:len(q)-1] + "'"
	if cut {
		q += "…"
	}
	return q
}

// invalidUTF8 describes the first invalid UTF-8 byte of b, and quotes b from a little before it.
func invalidUTF8(b []byte) (detail, quoted string) {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			from := max(0, i-40)
			for from > 0 && !utf8.RuneStart(b[from]) {
				from--
			}
			quoted = quote(b[from:])
			if from > 0 {
				quoted = "…" + quoted
			}
			return fmt.Sprintf("byte 0x%02x at offset %d", b[i], i), quoted
		}
		i += n
	}
	return "no invalid byte", quote(b)
}

// outputStats counts what a server wrote that the gateway refused, over all its sessions, and
// keeps the last line it skipped, to explain a session that then failed.
type outputStats struct {
	counts [4]atomic.Uint64 // by the index of the reason in OutputReasons

	mu          sync.Mutex
	lastSkipped string // quoted
	skipped     uint64 // lines skipped in the current session
}

func (s *outputStats) count(reason string) {
	for i, r := range OutputReasons {
		if r == reason {
			s.counts[i].Add(1)
			return
		}
	}
}

func (s *outputStats) skippedLine(q string) {
	s.count(OutputNotJSON)
	s.mu.Lock()
	s.lastSkipped = q
	s.skipped++
	s.mu.Unlock()
}

// sessionNote says what the current session skipped, for the report of its failure, or "".
func (s *outputStats) sessionNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.skipped == 0 {
		return ""
	}
	return fmt.Sprintf("; it wrote %d line(s) to stdout that are not JSON-RPC (servers must log to stderr), the last: %s", s.skipped, s.lastSkipped)
}

func (s *outputStats) newSession() {
	s.mu.Lock()
	s.lastSkipped, s.skipped = "", 0
	s.mu.Unlock()
}

// OutputErrors counts, by reason (OutputReasons), the messages and lines this server wrote that
// the gateway refused or skipped since the gateway started.
func (u *Upstream) OutputErrors() map[string]uint64 {
	m := make(map[string]uint64, len(OutputReasons))
	for i, r := range OutputReasons {
		m[r] = u.output.counts[i].Load()
	}
	return m
}
