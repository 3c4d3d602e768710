package upstream

import (
	"context"
	"testing"
	"time"
)

func TestNotesCatchUp(t *testing.T) {
	var n notes
	n.catchUp(context.Background()) // nothing read: returns at once

	n.read.Add(2)
	done := make(chan struct{})
	go func() {
		n.catchUp(context.Background())
		close(done)
	}()
	n.handledOne()
	select {
	case <-done:
		t.Fatal("catchUp returned with a notification read and not handled")
	case <-time.After(20 * time.Millisecond):
	}
	n.handledOne()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("catchUp did not return once every notification was handled")
	}

	// One the SDK never hands to a handler: the wait is bounded, and the next starts even.
	n.read.Add(1)
	start := time.Now()
	n.catchUp(context.Background())
	if d := time.Since(start); d < orderWait || d > orderWait+time.Second {
		t.Errorf("catchUp with a lost notification took %s, want about %s", d, orderWait)
	}
	start = time.Now()
	n.catchUp(context.Background())
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("catchUp after a lost notification took %s, want at once", d)
	}
}
