package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// gripper is the location of the object the robot holds.
const gripper = "gripper"

// drawer is the one openable place; open_drawer acts on it.
const drawer = "drawer"

// How the robot moves: it stands still, drives to a place (navigate_to with
// -travel-time) or brakes after that drive was cancelled.
const (
	motionStill   = "still"
	motionDriving = "driving"
	motionBraking = "braking"
)

// Place is a named spot the robot can drive to and put objects on (or in).
type Place struct {
	Name     string `json:"name"`
	Openable bool   `json:"openable"`
	// Open is meaningful only for an openable place; objects inside a closed
	// place can be neither picked nor placed.
	Open bool `json:"open"`
}

// Object is a named thing in the cell and where it is: a place name, or
// "gripper" while the robot holds it.
type Object struct {
	Name     string `json:"name"`
	Location string `json:"location"`
}

// Scene is a snapshot of the whole cell, safe to keep after the world changes.
type Scene struct {
	// RobotLocation is the place the robot is at, or "between home and
	// table" while it is on its way or was stopped on the way.
	RobotLocation string `json:"robot_location"`
	// Between is null at a place, else the last place the robot stood at and
	// the place it headed for.
	Between []string `json:"between"`
	Motion  string   `json:"motion"`  // still, driving or braking
	Holding *string  `json:"holding"` // null when the gripper is empty
	Places  []Place  `json:"places"`
	Objects []Object `json:"objects"`
}

// Outcome is the result of one physical action. Every action, successful or
// not, consumes a run id, as a real controller would log every command it got.
type Outcome struct {
	OK          bool
	Observation string // what happened, when OK
	Reason      string // what went wrong and what to do instead, when not OK
	RunID       string
	Location    string // the robot's location after the action
	Holding     string // what the robot holds after the action, "" for nothing
}

// Trip is a drive under way: Depart starts it, Arrive or Halt ends it.
type Trip struct {
	From, To string // places
	RunID    string
}

// World is the simulated robot cell. All methods are safe for concurrent use;
// the state changes only through them, so a run is deterministic for a given
// sequence of calls.
//
// A drive that takes time leaves the robot between two places until it
// arrives. Stopped or cancelled on the way, it stays between them: it can
// pick, place or open nothing until navigate_to brings it to a place again.
type World struct {
	mu      sync.Mutex
	places  []Place  // in a fixed order, so scenes read the same every time
	objects []Object // likewise
	// location is the place the robot stands at, "" while it is between the
	// two places of leg: the last one it stood at and the one it headed for.
	location string
	leg      [2]string
	motion   string
	holding  string
	lastRun  int
}

// NewWorld returns the cell in its starting state: the robot at home with an
// empty gripper and the drawer closed.
func NewWorld() *World {
	return &World{
		places: []Place{
			{Name: "home"},
			{Name: "table"},
			{Name: "counter"},
			{Name: "shelf"},
			{Name: drawer, Openable: true},
		},
		objects: []Object{
			{Name: "red_cup", Location: "table"},
			{Name: "green_apple", Location: "table"},
			{Name: "blue_block", Location: "counter"},
			{Name: "sponge", Location: "shelf"},
			{Name: "spoon", Location: drawer},
		},
		location: "home",
		motion:   motionStill,
	}
}

// Scene returns a snapshot of the cell.
func (w *World) Scene() Scene {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Scene{
		RobotLocation: w.locationLocked(),
		Motion:        w.motion,
		Places:        slices.Clone(w.places),
		Objects:       slices.Clone(w.objects),
	}
	if w.location == "" {
		s.Between = []string{w.leg[0], w.leg[1]}
	}
	if w.holding != "" {
		held := w.holding
		s.Holding = &held
	}
	return s
}

// Describe renders the scene as the sentences a model reads.
func (s Scene) Describe() string {
	var b strings.Builder
	gripped := "with an empty gripper"
	if s.Holding != nil {
		gripped = "holding the " + *s.Holding
	}
	switch {
	case s.Between == nil:
		fmt.Fprintf(&b, "The robot is at %s %s.", spot(s.RobotLocation), gripped)
	case s.Motion == motionDriving:
		fmt.Fprintf(&b, "The robot is driving from %s to %s %s.", spot(s.Between[0]), spot(s.Between[1]), gripped)
	case s.Motion == motionBraking:
		fmt.Fprintf(&b, "The robot is braking between %s and %s %s.", spot(s.Between[0]), spot(s.Between[1]), gripped)
	default:
		fmt.Fprintf(&b, "The robot stands between %s and %s %s; navigate_to a place before picking or placing.",
			spot(s.Between[0]), spot(s.Between[1]), gripped)
	}
	for _, p := range s.Places {
		var here []string
		for _, o := range s.Objects {
			if o.Location == p.Name {
				here = append(here, o.Name)
			}
		}
		name := p.Name
		switch {
		case p.Openable && p.Open:
			name += " (open)"
		case p.Openable:
			name += " (closed)"
		}
		if len(here) == 0 {
			fmt.Fprintf(&b, " %s: nothing.", name)
		} else {
			fmt.Fprintf(&b, " %s: %s.", name, strings.Join(here, ", "))
		}
	}
	return b.String()
}

// NewRunID returns the next run id for an action that does not change the
// scene (waiting, calibrating).
func (w *World) NewRunID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newRunLocked()
}

// Navigate drives the robot to a place, or to the place where an object is,
// at once.
func (w *World) Navigate(target string) Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	dest, refusal, ok := w.destinationLocked(target)
	switch {
	case !ok:
		return refusal
	case dest == w.location:
		return w.ok("the robot is already at %s", spot(dest))
	}
	w.location, w.leg = dest, [2]string{}
	return w.ok("the robot drove to %s", spot(dest))
}

// Depart starts a drive to a place, or to the place where an object is: the
// robot leaves and is driving between places until Arrive or Halt. When there
// is nothing to drive (the robot is there already, the target is unknown, it
// is moving) moving is false and done is the whole answer.
func (w *World) Depart(target string) (trip Trip, done Outcome, moving bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dest, refusal, ok := w.destinationLocked(target)
	switch {
	case !ok:
		return Trip{}, refusal, false
	case dest == w.location:
		return Trip{}, w.ok("the robot is already at %s", spot(dest)), false
	}
	// From between two places, the leg counts from the last place the robot
	// stood at: the simulation keeps no finer position.
	from := w.location
	if from == "" {
		from = w.leg[0]
	}
	w.location, w.leg, w.motion = "", [2]string{from, dest}, motionDriving
	return Trip{From: from, To: dest, RunID: w.newRunLocked()}, Outcome{}, true
}

// Arrive ends a trip at its destination.
func (w *World) Arrive(t Trip) Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.location, w.leg, w.motion = t.To, [2]string{}, motionStill
	return Outcome{OK: true, Observation: fmt.Sprintf("the robot drove to %s", spot(t.To)), RunID: t.RunID,
		Location: w.location, Holding: w.holding}
}

// Brake marks a driving robot as braking; it stays between its places.
func (w *World) Brake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.motion == motionDriving {
		w.motion = motionBraking
	}
}

// Halt makes the robot stand still where it is, between places if it was on
// its way.
func (w *World) Halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.motion = motionStill
}

// Position says where the robot is, as a sentence needs it: "at the table",
// "between home and the table".
func (w *World) Position() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.location != "" {
		return "at " + spot(w.location)
	}
	return fmt.Sprintf("between %s and %s", spot(w.leg[0]), spot(w.leg[1]))
}

// Location is the robot's location as robot_location reports it.
func (w *World) Location() (location, holding string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.locationLocked(), w.holding
}

// destinationLocked resolves a navigation target to a place. When the robot
// cannot go there, ok is false and refusal says why.
func (w *World) destinationLocked(target string) (dest string, refusal Outcome, ok bool) {
	switch w.motion {
	case motionDriving:
		return "", w.fail("the robot is already driving from %s to %s: wait until it arrives, or stop it",
			spot(w.leg[0]), spot(w.leg[1])), false
	case motionBraking:
		return "", w.fail("the robot is braking between %s and %s: wait until it stands still",
			spot(w.leg[0]), spot(w.leg[1])), false
	}
	if _, ok := w.place(target); ok {
		return target, Outcome{}, true
	}
	o, ok := w.object(target)
	switch {
	case !ok:
		return "", w.fail("unknown target %q: navigate to a place (%s) or to an object's name (%s); call get_scene to see the cell",
			target, w.placeNames(), w.objectNames()), false
	case o.Location == gripper:
		return "", w.fail("the robot is holding the %s, so it is already with it; navigate to a place instead", target), false
	}
	return o.Location, Outcome{}, true
}

// Pick grasps an object at the robot's place.
func (w *World) Pick(object string) Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.object(object)
	switch {
	case !ok:
		return w.fail("unknown object %q: objects in the cell are %s", object, w.objectNames())
	case o.Location == gripper:
		return w.fail("the robot is already holding the %s", object)
	case w.holding != "":
		return w.fail("the gripper already holds the %s: place_object it somewhere before picking the %s", w.holding, object)
	case w.location == "":
		return w.fail("%s", w.awayLocked("navigate_to "+o.Location))
	case o.Location != w.location:
		return w.fail("the %s is at %s but the robot is at %s: navigate_to %s first", object, spot(o.Location), spot(w.location), o.Location)
	}
	if p, _ := w.place(o.Location); p.Openable && !p.Open {
		return w.fail("the %s is inside the closed %s: open_drawer first", object, p.Name)
	}
	w.setLocation(object, gripper)
	w.holding = object
	return w.ok("the robot picked up the %s at %s", object, spot(w.location))
}

// Place puts the held object down at target, which must be the robot's place.
func (w *World) Place(object, target string) Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.place(target)
	switch {
	case !ok:
		return w.fail("unknown target %q: place objects at one of %s", target, w.placeNames())
	case w.holding == "":
		return w.fail("the gripper is empty: pick_object the %s first", object)
	case w.holding != object:
		return w.fail("the robot holds the %s, not the %s: place the %s or pick the %s after placing it", w.holding, object, w.holding, object)
	case w.location == "":
		return w.fail("%s", w.awayLocked("navigate_to "+target))
	case w.location != target:
		return w.fail("the robot is at %s, not %s: navigate_to %s first", spot(w.location), spot(target), target)
	case p.Openable && !p.Open:
		return w.fail("the %s is closed: open_drawer before placing into it", target)
	}
	w.setLocation(object, target)
	w.holding = ""
	if p.Openable {
		return w.ok("the robot put the %s into %s", object, spot(target))
	}
	return w.ok("the robot put the %s down at %s", object, spot(target))
}

// OpenDrawer opens the drawer; the robot must be at it.
func (w *World) OpenDrawer() Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.location == "" {
		return w.fail("%s", w.awayLocked("navigate_to drawer"))
	}
	if w.location != drawer {
		return w.fail("the robot is at %s, not the drawer: navigate_to drawer first", spot(w.location))
	}
	i := slices.IndexFunc(w.places, func(p Place) bool { return p.Name == drawer })
	if w.places[i].Open {
		return w.ok("the drawer is already open")
	}
	w.places[i].Open = true
	return w.ok("the drawer opened")
}

// spot names a place in a sentence: "home", "the table".
func spot(place string) string {
	if place == "home" {
		return place
	}
	return "the " + place
}

// awayLocked says why a robot that is not at a place cannot act at one; next
// is the call that brings it there, such as "navigate_to table".
func (w *World) awayLocked(next string) string {
	from, to := spot(w.leg[0]), spot(w.leg[1])
	switch w.motion {
	case motionDriving:
		return fmt.Sprintf("the robot is still driving from %s to %s: wait until it arrives", from, to)
	case motionBraking:
		return fmt.Sprintf("the robot is braking between %s and %s: wait until it stands still, then %s", from, to, next)
	}
	return fmt.Sprintf("the robot stands between %s and %s, not at a place: %s first", from, to, next)
}

// locationLocked is robot_location: a place, or "between home and table".
func (w *World) locationLocked() string {
	if w.location != "" {
		return w.location
	}
	return fmt.Sprintf("between %s and %s", w.leg[0], w.leg[1])
}

func (w *World) ok(format string, args ...any) Outcome {
	return Outcome{OK: true, Observation: fmt.Sprintf(format, args...), RunID: w.newRunLocked(),
		Location: w.locationLocked(), Holding: w.holding}
}

func (w *World) fail(format string, args ...any) Outcome {
	return Outcome{Reason: fmt.Sprintf(format, args...), RunID: w.newRunLocked(),
		Location: w.locationLocked(), Holding: w.holding}
}

func (w *World) newRunLocked() string {
	w.lastRun++
	return fmt.Sprintf("run-%d", w.lastRun)
}

func (w *World) place(name string) (Place, bool) {
	i := slices.IndexFunc(w.places, func(p Place) bool { return p.Name == name })
	if i < 0 {
		return Place{}, false
	}
	return w.places[i], true
}

func (w *World) object(name string) (Object, bool) {
	i := slices.IndexFunc(w.objects, func(o Object) bool { return o.Name == name })
	if i < 0 {
		return Object{}, false
	}
	return w.objects[i], true
}

func (w *World) setLocation(object, location string) {
	i := slices.IndexFunc(w.objects, func(o Object) bool { return o.Name == object })
	w.objects[i].Location = location
}

func (w *World) placeNames() string {
	names := make([]string, len(w.places))
	for i, p := range w.places {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

func (w *World) objectNames() string {
	names := make([]string, len(w.objects))
	for i, o := range w.objects {
		names[i] = o.Name
	}
	return strings.Join(names, ", ")
}
