package upstream

import "context"

// A call's class says how a physical server's turn-taking and Options.Admit treat it. The
// caller that knows what a tool is (the governor) marks the call's context; Call reads the mark.
// Upstream knows nothing of why a tool is in a class, only what the class changes here.
type class int

const (
	// classAction is every call that is not marked: it waits for its turn on a physical server
	// and is asked of Options.Admit right before it is sent.
	classAction class = iota
	// classInspection is a read-only call that stays allowed while the server is locked out: it
	// waits for its turn like an action, but Options.Admit is not asked.
	classInspection
	// classStop is the server's stop action: it is sent at once, beside the call in flight and
	// ahead of every call waiting for its turn, and Options.Admit is not asked.
	classStop
)

type classKey struct{}

// WithStop marks the call made with ctx as its server's stop action. Call sends it at once: it
// does not take a physical server's turn (it runs beside the call in flight, and calls waiting
// for their turn keep their places), it is never refused with ErrQueueFull, and Options.Admit is
// not asked. Everything else about the call is as usual: the server must be ready, ctx bounds
// it, and its errors are those of any call.
func WithStop(ctx context.Context) context.Context {
	return context.WithValue(ctx, classKey{}, classStop)
}

// WithInspection marks the call made with ctx as an inspection that stays allowed while its
// server is locked out: Options.Admit is not asked. It still waits for a physical server's turn,
// so it never runs beside an action of a server that expects one call at a time.
func WithInspection(ctx context.Context) context.Context {
	return context.WithValue(ctx, classKey{}, classInspection)
}

// classOf is the class ctx's call is marked with.
func classOf(ctx context.Context) class {
	c, _ := ctx.Value(classKey{}).(class)
	return c
}

// IsStop reports whether ctx's call is marked WithStop, for a dispatcher other than Upstream
// that must treat the classes alike.
func IsStop(ctx context.Context) bool { return classOf(ctx) == classStop }

// IsInspection reports whether ctx's call is marked WithInspection.
func IsInspection(ctx context.Context) bool { return classOf(ctx) == classInspection }
