package main

import (
	"slices"
	"strings"
	"testing"
)

// step is one action on the world and what it must answer.
type step struct {
	do         func(w *World) Outcome
	ok         bool
	reasonHas  string // a failure's reason must contain this
	location   string // the robot's location afterwards
	holding    string // what the robot holds afterwards
	objectName string // if set, this object must end up at objectAt
	objectAt   string
}

func navigate(target string) func(*World) Outcome {
	return func(w *World) Outcome { return w.Navigate(target) }
}
func pick(object string) func(*World) Outcome {
	return func(w *World) Outcome { return w.Pick(object) }
}
func place(object, target string) func(*World) Outcome {
	return func(w *World) Outcome { return w.Place(object, target) }
}
func openDrawer(w *World) Outcome { return w.OpenDrawer() }

func TestWorldActions(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"pick before navigating fails and says where to go", []step{
			{do: pick("red_cup"), reasonHas: "navigate_to table first", location: "home"},
		}},
		{"navigate, pick, put into the opened drawer", []step{
			{do: navigate("table"), ok: true, location: "table"},
			{do: pick("red_cup"), ok: true, location: "table", holding: "red_cup", objectName: "red_cup", objectAt: gripper},
			{do: navigate("drawer"), ok: true, location: "drawer", holding: "red_cup"},
			{do: place("red_cup", "drawer"), reasonHas: "open_drawer", location: "drawer", holding: "red_cup"},
			{do: openDrawer, ok: true, location: "drawer", holding: "red_cup"},
			{do: place("red_cup", "drawer"), ok: true, location: "drawer", objectName: "red_cup", objectAt: "drawer"},
		}},
		{"navigating to an object goes to its place", []step{
			{do: navigate("sponge"), ok: true, location: "shelf"},
		}},
		{"unknown names are refused with the known ones", []step{
			{do: navigate("garage"), reasonHas: "counter", location: "home"},
			{do: pick("teapot"), reasonHas: "blue_block", location: "home"},
		}},
		{"the gripper holds one object at a time", []step{
			{do: navigate("table"), ok: true, location: "table"},
			{do: pick("red_cup"), ok: true, location: "table", holding: "red_cup"},
			{do: pick("green_apple"), reasonHas: "place_object it somewhere", location: "table", holding: "red_cup"},
			{do: pick("red_cup"), reasonHas: "already holding", location: "table", holding: "red_cup"},
		}},
		{"an object in the closed drawer cannot be picked", []step{
			{do: navigate("spoon"), ok: true, location: "drawer"},
			{do: pick("spoon"), reasonHas: "open_drawer first", location: "drawer"},
			{do: openDrawer, ok: true, location: "drawer"},
			{do: pick("spoon"), ok: true, location: "drawer", holding: "spoon"},
		}},
		{"placing needs the object in hand and the robot at the target", []step{
			{do: place("red_cup", "table"), reasonHas: "gripper is empty", location: "home"},
			{do: navigate("table"), ok: true, location: "table"},
			{do: pick("red_cup"), ok: true, location: "table", holding: "red_cup"},
			{do: place("green_apple", "table"), reasonHas: "holds the red_cup", location: "table", holding: "red_cup"},
			{do: place("red_cup", "shelf"), reasonHas: "navigate_to shelf first", location: "table", holding: "red_cup"},
			{do: navigate("shelf"), ok: true, location: "shelf", holding: "red_cup"},
			{do: place("red_cup", "shelf"), ok: true, location: "shelf", objectName: "red_cup", objectAt: "shelf"},
		}},
		{"the drawer opens only with the robot at it", []step{
			{do: openDrawer, reasonHas: "navigate_to drawer first", location: "home"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWorld()
			for i, s := range tt.steps {
				o := s.do(w)
				if o.OK != s.ok {
					t.Fatalf("step %d: OK = %v, want %v (reason %q)", i, o.OK, s.ok, o.Reason)
				}
				if o.OK && o.Observation == "" {
					t.Errorf("step %d: success without an observation", i)
				}
				if !o.OK && !strings.Contains(o.Reason, s.reasonHas) {
					t.Errorf("step %d: reason %q does not contain %q", i, o.Reason, s.reasonHas)
				}
				if o.Location != s.location || o.Holding != s.holding {
					t.Errorf("step %d: robot at %q holding %q, want at %q holding %q", i, o.Location, o.Holding, s.location, s.holding)
				}
				if s.objectName != "" {
					if got := locationOf(w.Scene(), s.objectName); got != s.objectAt {
						t.Errorf("step %d: %s is at %q, want %q", i, s.objectName, got, s.objectAt)
					}
				}
			}
		})
	}
}

func TestRunIDsIncreaseOnEveryAction(t *testing.T) {
	w := NewWorld()
	ids := []string{
		w.Pick("red_cup").RunID, // a failure consumes a run id too
		w.Navigate("table").RunID,
		w.NewRunID(),
		w.Pick("red_cup").RunID,
	}
	want := []string{"run-1", "run-2", "run-3", "run-4"}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("run ids = %v, want %v", ids, want)
		}
	}
}

func TestSceneIsASnapshot(t *testing.T) {
	w := NewWorld()
	before := w.Scene()
	w.Navigate("table")
	w.Pick("red_cup")
	if before.RobotLocation != "home" || before.Holding != nil || locationOf(before, "red_cup") != "table" {
		t.Fatalf("an earlier scene changed with the world: %+v", before)
	}
	after := w.Scene()
	if after.Holding == nil || *after.Holding != "red_cup" {
		t.Fatalf("holding = %v, want red_cup", after.Holding)
	}
	desc := after.Describe()
	for _, want := range []string{"at the table holding the red_cup", "drawer (closed): spoon", "table: green_apple."} {
		if !strings.Contains(desc, want) {
			t.Errorf("description %q lacks %q", desc, want)
		}
	}
}

func locationOf(s Scene, object string) string {
	for _, o := range s.Objects {
		if o.Name == object {
			return o.Location
		}
	}
	return ""
}

func TestWorldTripLeavesTheRobotBetweenPlaces(t *testing.T) {
	w := NewWorld()
	if _, done, moving := w.Depart("home"); moving || !done.OK || !strings.Contains(done.Observation, "already at home") {
		t.Fatalf("Depart to where the robot is = %+v moving %v, want an answer at once", done, moving)
	}
	if _, done, moving := w.Depart("garage"); moving || done.OK || !strings.Contains(done.Reason, "unknown target") {
		t.Fatalf("Depart to an unknown place = %+v moving %v, want a refusal", done, moving)
	}
	trip, _, moving := w.Depart("red_cup")
	if !moving || trip != (Trip{From: "home", To: "table", RunID: "run-3"}) {
		t.Fatalf("Depart to the red_cup = %+v moving %v, want a trip from home to the table with run-3", trip, moving)
	}
	wantScene(t, w, "between home and table", motionDriving, "The robot is driving from home to the table")
	for _, s := range []step{
		{do: pick("red_cup"), reasonHas: "still driving from home to the table", location: "between home and table"},
		{do: navigate("counter"), reasonHas: "already driving from home to the table", location: "between home and table"},
	} {
		if o := s.do(w); o.OK || !strings.Contains(o.Reason, s.reasonHas) || o.Location != s.location {
			t.Errorf("while driving: %+v, want a failure with %q at %q", o, s.reasonHas, s.location)
		}
	}

	w.Brake()
	wantScene(t, w, "between home and table", motionBraking, "The robot is braking between home and the table")
	if o := w.Pick("red_cup"); o.OK || !strings.Contains(o.Reason, "wait until it stands still, then navigate_to table") {
		t.Errorf("pick while braking = %+v", o)
	}

	w.Halt()
	wantScene(t, w, "between home and table", motionStill, "The robot stands between home and the table with an empty gripper; navigate_to a place")
	if p := w.Position(); p != "between home and the table" {
		t.Errorf("Position() = %q", p)
	}
	for _, s := range []step{
		{do: pick("red_cup"), reasonHas: "stands between home and the table, not at a place: navigate_to table first"},
		{do: openDrawer, reasonHas: "not at a place: navigate_to drawer first"},
	} {
		if o := s.do(w); o.OK || !strings.Contains(o.Reason, s.reasonHas) {
			t.Errorf("stopped between places: %+v, want a failure with %q", o, s.reasonHas)
		}
	}

	// From between two places the robot can drive on; the leg counts from
	// the last place it stood at.
	trip, _, moving = w.Depart("counter")
	if !moving || trip.From != "home" || trip.To != "counter" {
		t.Fatalf("Depart from between places = %+v moving %v", trip, moving)
	}
	if o := w.Arrive(trip); !o.OK || o.RunID != trip.RunID || o.Location != "counter" || o.Observation != "the robot drove to the counter" {
		t.Fatalf("Arrive = %+v, want success at the counter with the trip's run id", o)
	}
	wantScene(t, w, "counter", motionStill, "The robot is at the counter with an empty gripper.")
	if s := w.Scene(); s.Between != nil {
		t.Errorf("at a place, between = %v, want nil", s.Between)
	}
	if o := w.Pick("blue_block"); !o.OK {
		t.Errorf("pick after arriving: %+v", o)
	}
}

func TestWorldSceneBetweenIsASnapshot(t *testing.T) {
	w := NewWorld()
	trip, _, _ := w.Depart("table")
	before := w.Scene()
	w.Arrive(trip)
	trip, _, _ = w.Depart("shelf")
	if !slices.Equal(before.Between, []string{"home", "table"}) {
		t.Fatalf("an earlier scene's between changed with the world: %v", before.Between)
	}
	if now := w.Scene().Between; !slices.Equal(now, []string{"table", "shelf"}) {
		t.Fatalf("between = %v on the way from the table to the shelf (%+v)", now, trip)
	}
}

func wantScene(t *testing.T, w *World, location, motion, describes string) {
	t.Helper()
	s := w.Scene()
	if s.RobotLocation != location || s.Motion != motion {
		t.Errorf("scene robot_location %q motion %q, want %q %q", s.RobotLocation, s.Motion, location, motion)
	}
	if d := s.Describe(); !strings.Contains(d, describes) {
		t.Errorf("description %q lacks %q", d, describes)
	}
}
