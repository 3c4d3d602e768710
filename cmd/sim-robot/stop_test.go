package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The durations of the travel tests: each asserts that what must end at once
// ended well before them.
const (
	testTravel = 2 * time.Second
	testBrake  = time.Second
	atOnce     = 500 * time.Millisecond
)

// pending is a tool call running in the background.
type pending struct {
	cancel context.CancelFunc
	done   chan callResult
}

type callResult struct {
	env map[string]any
	err error
	at  time.Time
}

// callAsync calls tool without waiting for its answer.
func (h *harness) callAsync(tool string, args map[string]any, progressToken any) *pending {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	p := &pending{cancel: cancel, done: make(chan callResult, 1)}
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if progressToken != nil {
		params.SetProgressToken(progressToken)
	}
	go func() {
		res, err := h.session.CallTool(ctx, params)
		r := callResult{err: err, at: time.Now()}
		if err == nil {
			r.env, _ = res.StructuredContent.(map[string]any)
		}
		p.done <- r
	}()
	return p
}

// answer waits for the call's answer.
func (p *pending) answer(t *testing.T) callResult {
	t.Helper()
	select {
	case r := <-p.done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return callResult{}
	}
}

func (h *harness) scene(t *testing.T) map[string]any {
	t.Helper()
	return h.call(t, "get_scene", nil)["scene"].(map[string]any)
}

// waitForMotion waits until get_scene reports the robot's motion.
func (h *harness) waitForMotion(t *testing.T, motion string) {
	t.Helper()
	eventually(t, "the robot is "+motion, func() bool { return h.scene(t)["motion"] == motion })
}

// recordedStops returns the interrupted lists of the stop lines in path.
func recordedStops(t *testing.T, path string) [][]interruption {
	t.Helper()
	var stops [][]interruption
	for _, l := range recordLines(t, path) {
		if l.Tool != "stop" {
			if l.Interrupted != nil {
				t.Errorf("a %s line carries interrupted: %+v", l.Tool, l)
			}
			continue
		}
		if l.Interrupted == nil {
			t.Errorf("a stop line lacks interrupted: %+v", l)
		}
		stops = append(stops, l.Interrupted)
	}
	return stops
}

func recordLines(t *testing.T, path string) []recordLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []recordLine
	for _, text := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var l recordLine
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			t.Fatalf("record line %q: %v", text, err)
		}
		lines = append(lines, l)
	}
	return lines
}

func startRecording(t *testing.T, cfg config) (*harness, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "calls.jsonl")
	rec, err := openRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	return start(t, cfg, rec, nil), path
}

func TestStopWithNothingMoving(t *testing.T) {
	h, path := startRecording(t, config{})
	// A stop is never refused, not even for arguments it does not take.
	env := h.call(t, "stop", map[string]any{"force": true})
	want := map[string]any{
		"success":     true,
		"observation": "nothing was moving; the robot is at home",
		"run_id":      "run-1",
		"interrupted": []any{},
		"location":    "home",
		"holding":     nil,
	}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("stop = %v, want %v", env, want)
	}
	if stops := recordedStops(t, path); len(stops) != 1 || len(stops[0]) != 0 {
		t.Fatalf("recorded stops %v, want one with nothing interrupted", stops)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `{"tool":"stop","args":{"force":true},"at":"`) || !strings.Contains(string(b), `"interrupted":[]}`) {
		t.Errorf("record line %s, want the args as given and an empty interrupted list", b)
	}
	s := h.call(t, "robot_stats", nil)
	if s["stopped"] != 0.0 || s["calls"].(map[string]any)["stop"] != 1.0 {
		t.Errorf("robot_stats = %v, want one stop call that stopped nothing", s)
	}
}

func TestStopEndsARunningWaitAtOnce(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	h := start(t, config{}, nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			once.Do(func() { close(started) })
		},
	})
	wait := h.callAsync("wait", map[string]any{"timeout_sec": 30}, "w")
	defer wait.cancel()
	select {
	case <-started: // the wait is under way: it reports progress
	case <-time.After(5 * time.Second):
		t.Fatal("the wait sent no progress")
	}
	stoppedAt := time.Now()
	env := h.call(t, "stop", nil)
	if env["success"] != true || !strings.HasPrefix(env["observation"].(string), "stopped: wait of 30s (was running)") {
		t.Errorf("stop = %v, want a success that stopped the wait", env)
	}
	if got := env["interrupted"]; !reflect.DeepEqual(got, []any{map[string]any{"tool": "wait", "state": "running"}}) {
		t.Errorf("interrupted = %v", got)
	}
	r := wait.answer(t)
	if r.err != nil || r.env["success"] != false || !strings.Contains(r.env["reason"].(string), "stopped by the stop tool") || r.env["run_id"] != "run-1" {
		t.Fatalf("the stopped wait answered %v, %v; want a failure saying the stop tool stopped it, with run-1", r.env, r.err)
	}
	if took := r.at.Sub(stoppedAt); took > atOnce {
		t.Errorf("the wait answered %v after the stop, want at once", took)
	}
	s := h.call(t, "robot_stats", nil)
	if s["stopped"] != 1.0 || s["cancelled"] != 0.0 {
		t.Errorf("robot_stats = %v, want 1 stopped and 0 cancelled", s)
	}
}

func TestStopEndsATravelAtOnce(t *testing.T) {
	h, path := startRecording(t, config{travelTime: testTravel, brakeTime: testBrake})
	begin := time.Now()
	nav := h.callAsync("navigate_to", map[string]any{"target": "red_cup"}, nil)
	defer nav.cancel()
	h.waitForMotion(t, motionDriving)

	env := h.call(t, "stop", nil)
	if want := "stopped: navigate_to to table (was running); the robot stands between home and the table"; env["observation"] != want {
		t.Errorf("stop observation %q, want %q", env["observation"], want)
	}
	if env["location"] != "between home and table" || env["run_id"] != "run-2" {
		t.Errorf("stop = %v, want location between home and table and run-2", env)
	}
	r := nav.answer(t)
	if took := r.at.Sub(begin); took > testTravel-atOnce {
		t.Errorf("the stopped navigate_to answered after %v, want well before the %v travel", took, testTravel)
	}
	reason, _ := r.env["reason"].(string)
	if r.err != nil || r.env["success"] != false || r.env["run_id"] != "run-1" ||
		!strings.Contains(reason, "navigate_to table was stopped by the stop tool after") ||
		!strings.Contains(reason, "the robot stands between home and the table: navigate_to a place") {
		t.Fatalf("the stopped navigate_to answered %v, %v", r.env, r.err)
	}

	scene := h.scene(t)
	if scene["robot_location"] != "between home and table" || scene["motion"] != motionStill ||
		!reflect.DeepEqual(scene["between"], []any{"home", "table"}) {
		t.Errorf("scene after the stop: robot_location %v, motion %v, between %v", scene["robot_location"], scene["motion"], scene["between"])
	}
	if env := h.call(t, "pick_object", map[string]any{"object": "red_cup"}); env["success"] != false ||
		!strings.Contains(env["reason"].(string), "navigate_to table first") {
		t.Errorf("pick between places = %v, want a failure that says to navigate first", env)
	}
	if stops := recordedStops(t, path); !reflect.DeepEqual(stops, [][]interruption{{{Tool: "navigate_to", State: stateRunning}}}) {
		t.Errorf("recorded stops %+v, want one that interrupted a running navigate_to", stops)
	}
}

func TestStopWhileBrakingAfterACancellation(t *testing.T) {
	h, path := startRecording(t, config{travelTime: testTravel, brakeTime: testBrake})
	nav := h.callAsync("navigate_to", map[string]any{"target": "table"}, nil)
	h.waitForMotion(t, motionDriving)
	nav.cancel()
	if r := nav.answer(t); r.err == nil {
		t.Fatalf("the cancelled call answered %v", r.env)
	}
	h.waitForMotion(t, motionBraking)

	stoppedAt := time.Now()
	env := h.call(t, "stop", nil)
	if want := "stopped: navigate_to to table (was braking after a cancellation)"; !strings.HasPrefix(env["observation"].(string), want) {
		t.Errorf("stop observation %q, want it to begin %q", env["observation"], want)
	}
	eventually(t, "the navigate_to ends as stopped", func() bool {
		return strings.Contains(h.log.String(), "navigate_to stopped by the stop tool")
	})
	if took := time.Since(stoppedAt); took > atOnce {
		t.Errorf("the braking navigate_to ended %v after the stop, want at once, not after the %v of braking", took, testBrake)
	}
	if log := h.log.String(); !strings.Contains(log, "state=braking") || strings.Contains(log, "braked to a halt") {
		t.Errorf("log %q, want the navigate_to stopped while braking, not braked to a halt", log)
	}
	if scene := h.scene(t); scene["motion"] != motionStill || scene["robot_location"] != "between home and table" {
		t.Errorf("scene after the stop: motion %v at %v", scene["motion"], scene["robot_location"])
	}
	s := h.call(t, "robot_stats", nil)
	if s["stopped"] != 1.0 || s["cancelled"] != 1.0 {
		t.Errorf("robot_stats = %v, want 1 stopped and 1 cancelled", s)
	}

	var navigatedAt, stoppedAtLine string
	for _, l := range recordLines(t, path) {
		switch l.Tool {
		case "navigate_to":
			navigatedAt = l.At
		case "stop":
			stoppedAtLine = l.At
		}
	}
	if navigatedAt == "" || stoppedAtLine <= navigatedAt {
		t.Errorf("navigate_to recorded at %q, stop at %q: want both, the stop later", navigatedAt, stoppedAtLine)
	}
	if stops := recordedStops(t, path); !reflect.DeepEqual(stops, [][]interruption{{{Tool: "navigate_to", State: stateBraking}}}) {
		t.Errorf("recorded stops %+v, want one that interrupted a braking navigate_to", stops)
	}
}

func TestCancelledTravelBrakesThenSaysWhereItStopped(t *testing.T) {
	const brake = 200 * time.Millisecond
	logs := &syncBuffer{}
	r := newRobot(context.Background(), config{travelTime: testTravel, brakeTime: brake}, NewWorld(), nil,
		slog.New(slog.NewTextHandler(logs, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	answered := make(chan envelope, 1)
	go func() { answered <- r.drive(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{}}, "shelf") }()
	eventually(t, "the robot drives", func() bool { return r.world.Scene().Motion == motionDriving })
	cancelledAt := time.Now()
	cancel()
	var env envelope
	select {
	case env = <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled navigate_to did not answer")
	}
	if took := time.Since(cancelledAt); took < brake || took > testTravel-atOnce {
		t.Errorf("answered %v after the cancellation, want after the %v of braking and well before the travel ends", took, brake)
	}
	reason, _ := env["reason"].(string)
	for _, want := range []string{"navigate_to shelf was cancelled after", "braked for 0.2s", "stopped between home and the shelf"} {
		if env["success"] != false || !strings.Contains(reason, want) {
			t.Errorf("envelope %v, want a failure whose reason has %q", env, want)
		}
	}
	if s := r.world.Scene(); s.Motion != motionStill || s.RobotLocation != "between home and shelf" {
		t.Errorf("scene after braking: motion %q at %q", s.Motion, s.RobotLocation)
	}
	if s := r.stats.snapshot(); s.cancelled != 1 || s.stopped != 0 {
		t.Errorf("stats %+v, want one cancellation and no stop", s)
	}
}

func TestTravelTakesItsTimeAndReportsProgress(t *testing.T) {
	const travel = 300 * time.Millisecond
	var mu sync.Mutex
	var progress []*mcp.ProgressNotificationParams
	h := start(t, config{travelTime: travel, brakeTime: testBrake}, nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params)
		},
	})
	begin := time.Now()
	r := h.callAsync("navigate_to", map[string]any{"target": "counter"}, "n-1").answer(t)
	if took := r.at.Sub(begin); took < travel {
		t.Errorf("arrived after %v, want at least the %v travel", took, travel)
	}
	if r.err != nil || r.env["success"] != true || r.env["location"] != "counter" || r.env["run_id"] != "run-1" {
		t.Fatalf("navigate_to = %v, %v; want success at the counter with run-1", r.env, r.err)
	}
	if scene := h.scene(t); scene["robot_location"] != "counter" || scene["motion"] != motionStill || scene["between"] != nil {
		t.Errorf("scene after arriving: %v", scene)
	}
	eventually(t, "ten progress notifications arrive", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 10
	})
	mu.Lock()
	defer mu.Unlock()
	for i, p := range progress {
		if p.ProgressToken != "n-1" || p.Total != travel.Seconds() || !strings.HasPrefix(p.Message, "driving to the counter: ") {
			t.Fatalf("progress %+v, want token n-1, total %g and a message about the drive", p, travel.Seconds())
		}
		if i > 0 && p.Progress <= progress[i-1].Progress {
			t.Fatalf("progress does not increase at %d: %v then %v", i, progress[i-1].Progress, p.Progress)
		}
	}
}

func TestNavigateWithoutTravelTimeArrivesAtOnce(t *testing.T) {
	var mu sync.Mutex
	progressed := 0
	h := start(t, config{}, nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progressed++
		},
	})
	r := h.callAsync("navigate_to", map[string]any{"target": "table"}, "n-1").answer(t)
	if r.err != nil || r.env["success"] != true || r.env["observation"] != "the robot drove to the table" || r.env["location"] != "table" {
		t.Fatalf("navigate_to = %v, %v", r.env, r.err)
	}
	if scene := h.scene(t); scene["robot_location"] != "table" || scene["motion"] != motionStill {
		t.Errorf("scene: %v", scene)
	}
	if env := h.call(t, "stop", nil); env["observation"] != "nothing was moving; the robot is at the table" {
		t.Errorf("stop after an instant navigate_to = %v", env)
	}
	mu.Lock()
	defer mu.Unlock()
	if progressed != 0 {
		t.Errorf("an instant navigate_to sent %d progress notifications", progressed)
	}
}

func TestNegativeDurationsAreRefused(t *testing.T) {
	for _, flag := range []string{"-travel-time", "-brake-time"} {
		var stderr strings.Builder
		if _, err := parseFlags([]string{flag, "-1s"}, &stderr); err == nil || !strings.Contains(stderr.String(), flag+" must not be negative") {
			t.Errorf("%s -1s: err %v, stderr %q", flag, err, stderr.String())
		}
	}
	cfg, err := parseFlags(nil, &strings.Builder{})
	if err != nil || cfg.travelTime != 0 || cfg.brakeTime != 500*time.Millisecond {
		t.Errorf("defaults: travel %v brake %v err %v, want 0, 500ms", cfg.travelTime, cfg.brakeTime, err)
	}
}
