package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"sync"
)

// callStats counts what reached the robot, so tests can prove a call never
// got here or that a cancellation did.
type callStats struct {
	mu        sync.Mutex
	calls     map[string]int
	total     int
	cancelled int
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

// snapshot returns a copy of the per-tool counts and the cancellation count.
func (s *callStats) snapshot() (calls map[string]int, total, cancelled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls), s.total, s.cancelled
}

// recorder appends one JSON line per call to a file that tests in other
// processes read while the robot runs. Each line goes out in a single
// unbuffered write, so a reader never sees half a line and a crash loses
// nothing already recorded.
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

// record writes {"tool": tool, "args": args}; args nil is recorded as {}.
func (r *recorder) record(tool string, args json.RawMessage) error {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	line, err := json.Marshal(struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}{tool, args})
	if err != nil {
		return fmt.Errorf("recording a %s call: %w", tool, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("recording a %s call: %w", tool, err)
	}
	return nil
}

func (r *recorder) Close() error {
	return r.file.Close()
}
