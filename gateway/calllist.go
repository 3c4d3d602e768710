package gateway

import "context"

// callList holds calls in flight by their cancel functions, newest first, so that they can be
// cancelled together: adding or removing one allocates only its element and touches no map
// nor any context but the call's own. Its zero value is empty; its owner guards it.
type callList struct{ head *listedCall }

// listedCall is a call in a callList.
type listedCall struct {
	cancel     context.CancelCauseFunc
	prev, next *listedCall
	off        bool // removed
}

// push adds the call cancel cancels, and returns its element for remove.
func (l *callList) push(cancel context.CancelCauseFunc) *listedCall {
	c := &listedCall{cancel: cancel, next: l.head}
	if l.head != nil {
		l.head.prev = c
	}
	l.head = c
	return c
}

// remove takes c, pushed on l, off it; once: a second remove of c leaves l as it is.
func (l *callList) remove(c *listedCall) {
	if c.off {
		return
	}
	c.off = true
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
}

// cancelAll cancels every call on l with cause.
func (l *callList) cancelAll(cause error) {
	for c := l.head; c != nil; c = c.next {
		c.cancel(cause)
	}
}
