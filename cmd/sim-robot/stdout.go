package main

import (
	"bytes"
	"io"
	"sync"
)

// invalidUTF8Marker is text the invalid_utf8 fault puts in its answer; stdout replaces it with
// bytes that are not UTF-8, as a driver writing Latin-1 would. The SDK could not encode them.
const invalidUTF8Marker = "@@sim-robot-invalid-utf8@@"

// stdoutBanner is the line fault stdout_banner prints, as a driver would when it starts.
const stdoutBanner = "Starting driver… serial /dev/ttyUSB0 at 115200 baud"

// stdout carries the protocol messages and the lines the stdout faults print between them, one
// write at a time, so a fault's line never lands inside a message.
type stdout struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (s *stdout) Write(p []byte) (int, error) {
	out := bytes.ReplaceAll(p, []byte(invalidUTF8Marker), []byte("caf\xe9 \xff"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// println writes line and a newline, between two messages.
func (s *stdout) println(line string) error {
	_, err := s.Write([]byte(line + "\n"))
	return err
}

func (s *stdout) Close() error { return s.w.Close() }
