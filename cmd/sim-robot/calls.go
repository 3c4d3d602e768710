package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sync"
	"time"
)

// callStats counts what reached the robot, so tests can prove a call never
// got here or that a cancellation or a stop did.
type callStats struct {
	mu        sync.Mutex
	calls     map[string]int
	total     int
	cancelled int
	stopped   int
}

func newCallStats() *callStats {
	return &callStats{calls: make(map[string]int)}
}

// count records one call of tool and returns how many calls of any tool
// there have been, this one included.
func (s *callStats) count(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[tool]++
	s.total++
	return s.total
}

// cancel records that a call saw its cancellation.
func (s *callStats) cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelled++
}

// stop records that a stop ended n actions.
func (s *callStats) stop(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped += n
}

// statsSnapshot is a copy of the counts.
type statsSnapshot struct {
	calls                     map[string]int
	total, cancelled, stopped int
}

// snapshot returns a copy of the counts.
func (s *callStats) snapshot() statsSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return statsSnapshot{calls: maps.Clone(s.calls), total: s.total, cancelled: s.cancelled, stopped: s.stopped}
}

// recorder appends one JSON line per call to a file that tests in other
// processes read while the robot runs. Each line goes out in a single
// unbuffered write, so a reader never sees half a line and a crash loses
// nothing already recorded. Lines are written in the order of their "at".
type recorder struct {
	mu   sync.Mutex
	file *os.File
}

func openRecorder(path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("-record: %w", err)
	}
	return &recorder{file: f}, nil
}

// recordTimeFormat is RFC 3339 in UTC with all nine digits of nanoseconds,
// so that lines also sort as text.
const recordTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// recordLine is one line of the record file.
type recordLine struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
	At   string          `json:"at"` // when the line was written
	// Interrupted is on stop lines only, an empty list when nothing moved.
	Interrupted []interruption `json:"interrupted,omitzero"`
}

// record writes {"tool": tool, "args": args, "at": now}; args nil is
// recorded as {}.
func (r *recorder) record(tool string, args json.RawMessage) error {
	return r.write(recordLine{Tool: tool, Args: args})
}

// recordStop writes the line of a stop call, which also says what it ended.
func (r *recorder) recordStop(args json.RawMessage, ended []interruption) error {
	if ended == nil {
		ended = []interruption{}
	}
	return r.write(recordLine{Tool: "stop", Args: args, Interrupted: ended})
}

func (r *recorder) write(l recordLine) error {
	if len(l.Args) == 0 || string(l.Args) == "null" {
		l.Args = json.RawMessage("{}")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// The time is taken under the lock, so that the file's order is the
	// order of its times.
	l.At = time.Now().UTC().Format(recordTimeFormat)
	line, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("recording a %s call: %w", l.Tool, err)
	}
	if _, err := r.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("recording a %s call: %w", l.Tool, err)
	}
	return nil
}

func (r *recorder) Close() error {
	return r.file.Close()
}
