package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The states an action is in when the stop tool ends it, as its record line
// reports them.
const (
	stateRunning = "running"
	stateBraking = "braking" // a navigate_to whose call was cancelled
)

// interruption is one action the stop tool ended, as its record line and its
// envelope list it.
type interruption struct {
	Tool  string `json:"tool"`
	State string `json:"state"`
	what  string // for the stop's observation: "navigate_to to table"
}

// action is a call in progress that the stop tool ends at once: a wait, or a
// navigate_to that is on its way or braking.
type action struct {
	tool, what string
	// ctx is the call's context: done once its cancellation reached the robot.
	ctx context.Context
	// brakes is set for an action that brakes when cancelled, instead of
	// ending at once.
	brakes bool
	state  string // guarded by actions.mu
	// stopped is closed when the stop tool ends the action; stoppedIn is the
	// state it found the action in, to read once stopped is closed.
	stopped   chan struct{}
	stoppedIn string
}

// actions are the actions in progress. Its lock orders a stop against the
// start, the braking and the end of every action, and is only ever held for
// a moment (never for an action's duration), so a stop gets it at once; the
// world changes that go with those steps happen under it, in callbacks.
type actions struct {
	mu      sync.Mutex
	running []*action
}

// begin starts an action of a call of tool. start runs under the lock and
// changes the world as the action begins; it returns what the action is, for
// the stop's answer, and false when there is nothing to begin (begin then
// returns nil). A stop thus sees the action either not begun or begun
// together with its change to the world.
func (a *actions) begin(ctx context.Context, tool string, brakes bool, start func() (what string, ok bool)) *action {
	a.mu.Lock()
	defer a.mu.Unlock()
	what, ok := start()
	if !ok {
		return nil
	}
	x := &action{tool: tool, what: what, ctx: ctx, brakes: brakes, state: stateRunning, stopped: make(chan struct{})}
	a.running = append(a.running, x)
	return x
}

// brake marks x as braking, running then under the lock. It reports false,
// and does not run then, when a stop ended x first.
func (a *actions) brake(x *action, then func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.running, x) {
		return false
	}
	x.state = stateBraking
	then()
	return true
}

// end removes x, running settle (if not nil) under the lock. It reports
// false, and does not run settle, when a stop ended x first: the action must
// then answer as stopped.
func (a *actions) end(x *action, settle func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.Index(a.running, x)
	if i < 0 {
		return false
	}
	a.running = slices.Delete(a.running, i, i+1)
	if settle != nil {
		settle()
	}
	return true
}

// stopAll ends every action in progress, runs halt under the same lock, and
// returns what it ended, in the order the actions began (an empty list, not
// nil, when nothing was running). An action that brakes and whose call is
// cancelled counts as braking even before its handler noticed: the
// cancellation reached the robot before the stop did.
func (a *actions) stopAll(halt func()) []interruption {
	a.mu.Lock()
	defer a.mu.Unlock()
	ended := make([]interruption, 0, len(a.running))
	for _, x := range a.running {
		x.stoppedIn = x.state
		if x.brakes && x.ctx.Err() != nil {
			x.stoppedIn = stateBraking
		}
		close(x.stopped)
		ended = append(ended, interruption{Tool: x.tool, State: x.stoppedIn, what: x.what})
	}
	a.running = nil
	halt()
	return ended
}

// cancelSettle bounds awaitCancellation's wait.
const cancelSettle = 50 * time.Millisecond

// awaitCancellation returns once an action that is running and not cancelled
// now sees its call's cancellation, or after limit (for the cancellation of a
// call that is no action, or no longer running). The SDK applies a
// notifications/cancelled on a goroutine of its own, which may run only after
// the next message is handled; waiting for it before the next message makes
// the robot take its wire in order, so that a stop sent after a cancellation
// always finds the cancelled navigate_to braking.
func (a *actions) awaitCancellation(limit time.Duration) {
	a.mu.Lock()
	var live []*action
	for _, x := range a.running {
		if x.ctx.Err() == nil {
			live = append(live, x)
		}
	}
	a.mu.Unlock()
	if len(live) == 0 {
		return
	}
	landed := make(chan struct{}, 1)
	for _, x := range live {
		unwatch := context.AfterFunc(x.ctx, func() {
			select {
			case landed <- struct{}{}:
			default:
			}
		})
		defer unwatch()
	}
	timeout := time.NewTimer(limit)
	defer timeout.Stop()
	select {
	case <-landed:
	case <-timeout.C:
	}
}

// ending is what ended a timed action.
type ending int

const (
	elapsed   ending = iota // its time passed
	cancelled               // its call was cancelled
	stopped                 // the stop tool ended it
	shutDown                // the robot is shutting down
)

// hold lets d pass for the action x of call req and says what ended it. When
// the caller gave a progress token it reports progress every 100ms, or in ten
// steps when d is under a second, with the message progress makes of the
// time passed.
func (r *robot) hold(ctx context.Context, req *mcp.CallToolRequest, x *action, d time.Duration, progress func(passed time.Duration) string) ending {
	step := max(min(100*time.Millisecond, d/10), time.Millisecond)
	start := time.Now()
	ticker := time.NewTicker(step)
	defer ticker.Stop()
	finished := time.NewTimer(d)
	defer finished.Stop()
	token := req.Params.GetProgressToken()
	for {
		select {
		case <-finished.C:
			return elapsed
		case <-ticker.C:
			if token == nil {
				continue
			}
			passed := min(time.Since(start), d)
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      passed.Seconds(),
				Total:         d.Seconds(),
				Message:       progress(passed),
			})
			if err != nil && ctx.Err() == nil {
				r.log.Warn("cannot send progress", "tool", x.tool, "err", err)
			}
		case <-ctx.Done():
			return cancelled
		case <-x.stopped:
			return stopped
		case <-r.done:
			return shutDown
		}
	}
}

// seconds renders a duration for a reason or an observation: "1.2s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1fs", d.Seconds())
}
