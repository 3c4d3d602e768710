package main

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// drive is navigate_to under -travel-time: the robot takes that long to get
// there, reporting progress when the client asked for it. Cancelled on the
// way, it brakes for -brake-time and answers where it stopped; the stop tool
// ends it at once, on the way or while braking. Either way it is left between
// two places (World).
func (r *robot) drive(ctx context.Context, req *mcp.CallToolRequest, target string) envelope {
	var trip Trip
	var done Outcome
	x := r.actions.begin(ctx, "navigate_to", true, func() (string, bool) {
		var moving bool
		trip, done, moving = r.world.Depart(target)
		return "navigate_to to " + trip.To, moving
	})
	if x == nil {
		return fromOutcome(done)
	}
	start := time.Now()
	ended := r.hold(ctx, req, x, r.cfg.travelTime, func(passed time.Duration) string {
		return fmt.Sprintf("driving to %s: %s of %s", spot(trip.To), seconds(passed), seconds(r.cfg.travelTime))
	})
	if ended == stopped && ctx.Err() != nil {
		// The cancellation and the stop both came before the robot noticed
		// either: it saw the cancellation too, and actions.brake finds it
		// stopped.
		ended = cancelled
	}
	switch ended {
	case elapsed:
		var arrived Outcome
		if r.actions.end(x, func() { arrived = r.world.Arrive(trip) }) {
			return fromOutcome(arrived)
		}
		// A stop came just as the robot arrived: it wins, and the robot
		// stands short of the place.
	case cancelled:
		after := time.Since(start)
		r.sawCancel("navigate_to", start)
		if r.actions.brake(x, r.world.Brake) {
			r.log.Info("navigate_to braking", "target", trip.To, "for", r.cfg.brakeTime)
			return r.brake(x, trip, start, after)
		}
	case shutDown:
		r.actions.end(x, r.world.Halt)
		return failure("the robot is shutting down").with("run_id", trip.RunID)
	}
	return r.stoppedOnTheWay(x, trip, start)
}

// brake waits out -brake-time after a drive was cancelled, after the time
// given on the way, unless the stop tool ends it first.
func (r *robot) brake(x *action, trip Trip, start time.Time, after time.Duration) envelope {
	braked := time.NewTimer(r.cfg.brakeTime)
	defer braked.Stop()
	select {
	case <-braked.C:
		if r.actions.end(x, r.world.Halt) {
			r.log.Info("navigate_to braked to a halt", "target", trip.To)
			return failure(fmt.Sprintf("navigate_to %s was cancelled after %s on the way; the robot braked for %s and stopped %s: "+
				"navigate_to a place before picking or placing", trip.To, seconds(after),
				seconds(r.cfg.brakeTime), r.world.Position())).with("run_id", trip.RunID)
		}
	case <-x.stopped:
	case <-r.done:
		r.actions.end(x, r.world.Halt)
		return failure("the robot is shutting down").with("run_id", trip.RunID)
	}
	return r.stoppedOnTheWay(x, trip, start)
}

// stoppedOnTheWay is the answer of a drive the stop tool ended.
func (r *robot) stoppedOnTheWay(x *action, trip Trip, start time.Time) envelope {
	when := "after " + seconds(time.Since(start)) + " on the way"
	if x.stoppedIn == stateBraking {
		when = "while it braked after a cancellation"
	}
	r.log.Info("navigate_to stopped by the stop tool", "target", trip.To, "state", x.stoppedIn)
	return failure(fmt.Sprintf("navigate_to %s was stopped by the stop tool %s; the robot stands %s: "+
		"navigate_to a place before picking or placing", trip.To, when, r.world.Position())).with("run_id", trip.RunID)
}
