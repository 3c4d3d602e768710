package config

import (
	"testing"
)

func TestParseRefusesStopToolsThatCannotStopTheRobot(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		wants []want
	}{
		{
			name: "stop on a server that is not physical",
			src: `servers:
  - name: cam
    command: cam
    tools:
      overrides:
        shutter:
          stop: true
`,
			wants: []want{{7, `servers[0] (cam): tools.overrides.shutter.stop: only a physical server (physical: true) has a stop tool`}},
		},
		{
			name: "stop and allow_while_locked on one tool",
			src: `servers:
  - name: arm
    command: arm
    physical: true
    tools:
      overrides:
        halt:
          stop: true
          allow_while_locked: true
`,
			wants: []want{{9, `servers[0] (arm): tools.overrides.halt.allow_while_locked: cannot be set on the stop tool, which is always callable`}},
		},
		{
			name: "stop on a hidden tool",
			src: `servers:
  - name: arm
    command: arm
    physical: true
    tools:
      hidden: [debug, "ha*"]
      overrides:
        halt: {stop: true}
`,
			wants: []want{{8, `servers[0] (arm): tools.overrides.halt.stop: the stop tool must reach the robot from a model or an MCP client too, but tools.hidden[1] (line 6) hides it`}},
		},
		{
			name: "stop on an excluded tool",
			src: `servers:
  - name: arm
    command: arm
    physical: true
    tools:
      exclude:
        - debug_*
        - halt
      overrides:
        halt: {stop: true}
`,
			wants: []want{{10, `tools.overrides.halt.stop: the stop tool must reach the robot from a model or an MCP client too, but tools.exclude[1] (line 8) leaves it out`}},
		},
		{
			name: "stop on a tool include does not list",
			src: `servers:
  - name: arm
    command: arm
    physical: true
    tools:
      include: [pick, place]
      overrides:
        halt: {stop: true}
`,
			wants: []want{{8, `tools.overrides.halt.stop: the stop tool must reach the robot from a model or an MCP client too, but no pattern of tools.include (line 6) lists it`}},
		},
		{
			name: "two stop tools on one server",
			src: `servers:
  - name: arm
    command: arm
    physical: true
    tools:
      overrides:
        halt: {stop: true}
        pick: {evaluated: true}
        estop:
          description: "Stops everything."
          stop: true
`,
			wants: []want{{11, `servers[0] (arm): tools.overrides.estop.stop: a server has one stop tool, and tools.overrides.halt (line 7) is already this server's`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, tt.src)
			assertReported(t, errs, tt.wants)
			if len(errs.List) != len(tt.wants) {
				t.Errorf("got %d problems, want %d:\n%v", len(errs.List), len(tt.wants), errs)
			}
		})
	}
}

func TestParseKeepsStopAndInspectionTools(t *testing.T) {
	cfg, err := Parse("robot.yaml", []byte(`servers:
  - name: arm
    command: arm
    physical: true
    tools:
      include: ["*"]
      exclude: [debug_*]
      overrides:
        stop: {stop: true}
        get_scene:
          allow_while_locked: true
  - name: cam
    command: cam
    tools:
      overrides:
        snap: {allow_while_locked: true}
  - name: base
    command: base
    physical: true
    tools:
      overrides:
        halt: {stop: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	arm, cam, base := cfg.Servers[0].Tools.Overrides, cfg.Servers[1].Tools.Overrides, cfg.Servers[2].Tools.Overrides
	if !arm["stop"].Stop || arm["stop"].Line != 9 || !arm["get_scene"].AllowWhileLocked || arm["get_scene"].Line != 10 {
		t.Errorf("arm's overrides: %+v", arm)
	}
	// Each physical server has its own stop tool; allow_while_locked on a server that is never
	// locked out is accepted and changes nothing.
	if !base["halt"].Stop || !cam["snap"].AllowWhileLocked {
		t.Errorf("base's and cam's overrides: %+v %+v", base, cam)
	}
}
