package main

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addStop registers the stop tool. Unlike every other tool it acts as it
// arrives: it ends the actions in progress, then it is recorded with what it
// ended, and only then do the flags' faults get their chance, so a stop that
// hangs or crashes (-hang-on stop, -crash-on stop) has still stopped the
// robot, as an emergency stop acts on the motors before its driver answers.
// For the same reason it is never refused: arguments it does not take are
// ignored rather than failing the stop.
func (r *robot) addStop(srv *mcp.Server) {
	t := &mcp.Tool{
		Name: "stop",
		Description: "Stop whatever the robot is doing, at once: a navigate_to on its way (or braking after a " +
			"cancellation) or a wait ends with a failure that says it was stopped. The robot stays where it is; " +
			"stopped on the way it stands between two places, so navigate_to a place before picking or placing. " +
			"Callable at any time, also while another call runs; with nothing moving it changes nothing.",
		InputSchema: objectSchema(nil),
		Annotations: physical("Stop the robot", true),
	}
	r.define(t)
	srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		total := r.stats.count(t.Name)
		ended := r.actions.stopAll(r.world.Halt)
		r.stats.stop(len(ended))
		r.log.Info("stop", "interrupted", describeInterruptions(ended))
		if r.rec != nil {
			if err := r.rec.recordStop(req.Params.Arguments, ended); err != nil {
				r.log.Error("cannot record call", "err", err)
			}
		}
		if res := r.injected(ctx, t.Name, total, true); res != nil {
			return res, nil
		}
		return r.stopEnvelope(ended).result(), nil
	})
}

// stopEnvelope is the stop tool's envelope: what it interrupted and where the
// robot now stands.
func (r *robot) stopEnvelope(ended []interruption) envelope {
	obs := "nothing was moving; the robot is " + r.world.Position()
	if len(ended) > 0 {
		obs = "stopped: " + describeInterruptions(ended) + "; the robot stands " + r.world.Position()
	}
	location, held := r.world.Location()
	var holding any // null when the gripper is empty
	if held != "" {
		holding = held
	}
	return success(obs).
		with("run_id", r.world.NewRunID()).
		with("interrupted", ended).
		with("location", location).
		with("holding", holding)
}

// describeInterruptions renders what a stop ended: "navigate_to to table
// (was braking after a cancellation); wait of 30s (was running)".
func describeInterruptions(ended []interruption) string {
	if len(ended) == 0 {
		return "nothing"
	}
	parts := make([]string, len(ended))
	for i, e := range ended {
		was := "was running"
		if e.State == stateBraking {
			was = "was braking after a cancellation"
		}
		parts[i] = e.what + " (" + was + ")"
	}
	return strings.Join(parts, "; ")
}
