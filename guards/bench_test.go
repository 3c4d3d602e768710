package guards

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// robotText is about n bytes of a robot's observation log: mostly plain text, with an e-mail,
// a phone number, an IP address and a credential now and then, as tool results carry them.
func robotText(n int) string {
	lines := []string{
		"gripper closed on object 7 with force 12.5 N; grasp stable after 0.32 s.\n",
		"camera frame 1024x768 received from the wrist camera at t=1712345678.25\n",
		"path planned around the obstacle at x=0.42 y=-0.13, 14 waypoints, speed 0.5 m/s\n",
		"joint temperatures nominal: 41.2 40.8 39.9 42.1 38.7 40.0 C, battery 87%\n",
		"The operator asked to move the red cup from the table to the second shelf.\n",
		"Detected objects: cup (0.93), bottle (0.88), box (0.71); nearest 0.35 m away.\n",
		"operator note: contact ann@example.com or 555-123-4567 about calibration\n",
		"uplink 10.0.0.7 ok; config token=AKIAIOSFODNN7EXAMPLE was rotated\n",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		line := lines[i%6]
		if i%40 == 39 {
			line = lines[6+i/40%2]
		}
		b.WriteString(line)
	}
	return b.String()[:n]
}

// argsObject is a tool call's arguments of about 1 KB.
var argsObject = json.RawMessage(`{
  "object": "red cup",
  "grasp": {"approach": "side", "force_n": 12.5, "width_m": 0.08},
  "target": {"frame": "shelf_2", "x": 0.42, "y": -0.13, "z": 0.05, "yaw": 1.57},
  "speed": 0.5,
  "timeout_sec": 30,
  "waypoints": [
    {"x": 0.10, "y": 0.00, "z": 0.30, "label": "above table"},
    {"x": 0.25, "y": -0.05, "z": 0.35, "label": "clear of the bottle"},
    {"x": 0.40, "y": -0.10, "z": 0.30, "label": "above shelf"},
    {"x": 0.42, "y": -0.13, "z": 0.10, "label": "place"}
  ],
  "constraints": ["keep the cup upright", "avoid the operator zone", "max tilt 10 degrees"],
  "note": "The operator asked to move the red cup from the table to the second shelf, gently, and to report back when it is done so the next task can start.",
  "context": "Previous attempt failed because the cup slipped; use the side grasp and slow down near the shelf edge. Confirm placement with the wrist camera."
}`)

// defaultGuards is the guard set an operator would enable in front of a robot (the six
// built-ins); tool_call and tool_result use the same set here.
const defaultGuards = `- {id: secrets, use: secrets.scan}
- {id: pii, use: pii.regex}
- {id: injection, use: injection.heuristic}
- {id: deny, use: regex.deny, patterns: ['rm\s+-rf', 'sudo\s', 'DROP\s+TABLE']}
- {id: size, use: size.limit, max_bytes: 4194304}
- {id: topics, use: topic.deny, topics: {weapons: [weapon, firearm, explosive]}}
`

var benchGuards = []struct{ use, settings string }{
	{"pii.regex", ""},
	{"secrets.scan", ""},
	{"injection.heuristic", ""},
	{"regex.deny", `patterns: ['rm\s+-rf', 'sudo\s', 'DROP\s+TABLE']`},
	{"size.limit", "max_bytes: 4194304"},
	{"topic.deny", "topics: {weapons: [weapon, firearm, explosive], legal: [lawsuit, attorney]}"},
}

// BenchmarkGuard runs each guard alone, through a Set, on 1 KB and 1 MB of text.
func BenchmarkGuard(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		text := robotText(size)
		for _, g := range benchGuards {
			settings := ""
			if g.settings != "" {
				settings = ", " + strings.Trim(strings.ReplaceAll(g.settings, "\n", ", "), " ")
			}
			set := build(b, StageToolResult, fmt.Sprintf("- {id: g, use: %s, action: redact%s}", g.use, settings))
			b.Run(fmt.Sprintf("%s/%s", g.use, sizeName(size)), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					set.CheckText(b.Context(), "arm", "look", text)
				}
			})
		}
	}
}

// BenchmarkDefaultGuards runs the six default guards on a 1 MB tool result and on a 1 KB
// argument object (targets: 20 ms and 15 µs).
func BenchmarkDefaultGuards(b *testing.B) {
	set := build(b, StageToolResult, defaultGuards)
	for _, bc := range []struct {
		name string
		doc  json.RawMessage
	}{
		{"result_1MB", largeResult(1 << 20)},
		{"result_1MB_one_leaf", mustJSON(map[string]any{"success": true, "observation": robotText(1 << 20)})},
		{"args_1KB", argsObject},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.doc)))
			b.ReportAllocs()
			for b.Loop() {
				set.CheckJSON(b.Context(), "arm", "pick_object", bc.doc)
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMB", n>>20)
	}
	return fmt.Sprintf("%dKB", n>>10)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkAdversarial runs every guard on 256 KB of text built to make its scanner work hard
// (every character a candidate); the time per byte must stay in line with the ordinary text.
func BenchmarkAdversarial(b *testing.B) {
	inputs := map[string]string{
		"digits":     strings.Repeat("1 ", 1<<17),
		"groups":     strings.Repeat("4111-", 1<<16),
		"at_signs":   strings.Repeat("a.b@", 1<<16),
		"colons":     strings.Repeat("a:", 1<<17),
		"dots":       strings.Repeat("1.", 1<<17),
		"sk_dashes":  strings.Repeat("sk-", 1<<16),
		"pem_begins": strings.Repeat("-----BEGIN RSA PRIVATE KEY-----", 1<<13),
		"eyJ":        strings.Repeat("eyJabcdefghij.", 1<<14),
		"assign":     strings.Repeat("password=", 1<<15),
		"gh":         strings.Repeat("gh", 1<<17),
		"markers":    strings.Repeat("<[#", 1<<16),
		"triggers":   strings.Repeat("ignore you send ", 1<<14),
		"words":      strings.Repeat("arm ", 1<<16),
	}
	for _, g := range benchGuards {
		guard := newGuard(b, g.use, g.settings)
		for name, text := range inputs {
			b.Run(g.use+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					if _, err := guard.Scan(b.Context(), text); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
