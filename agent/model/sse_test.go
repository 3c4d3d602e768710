package model

import (
	"os"
	"testing"
)

// sseEvent is one server-sent event of a recorded stream.
type sseEvent struct {
	name string
	data []byte
}

// readSSE reads a recorded stream's events with the reader the streaming transport uses
// (readEvents), so the recorded files are read as a provider's stream would be.
func readSSE(t *testing.T, path string) []sseEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []sseEvent
	err = readEvents(f, func(name string, data []byte) error {
		events = append(events, sseEvent{name: name, data: append([]byte(nil), data...)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return events
}
