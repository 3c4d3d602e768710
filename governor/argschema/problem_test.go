package argschema

import (
	"fmt"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	many := make([]Problem, MaxDescribed+3)
	for i := range many {
		many[i] = Problem{Path: fmt.Sprintf("/points/%d", i), Message: "must be object but is null"}
	}
	tests := []struct {
		name     string
		problems []Problem
		want     string
	}{
		{"several", []Problem{
			{"", `missing required property "target"`},
			{"/mode", `must be one of "fast", "slow" but is "turbo"`},
			{"/speed", "must be <= 1.5 but is 2"},
		}, `invalid arguments for move: 3 problems: (arguments): missing required property "target"; ` +
			`/mode: must be one of "fast", "slow" but is "turbo"; /speed: must be <= 1.5 but is 2. ` +
			`Fix all of them and call move again.`},
		{"one", []Problem{{"/speed", "must be <= 1.5 but is 2"}},
			"invalid arguments for move: 1 problem: /speed: must be <= 1.5 but is 2. Fix it and call move again."},
		{"none", nil,
			"invalid arguments for move: they do not match its input schema. Check them against it and call move again."},
		{"more than MaxDescribed", many,
			fmt.Sprintf("invalid arguments for move: %d problems: /points/0: must be object but is null; ", len(many))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Describe("move", tt.problems)
			if len(tt.problems) > MaxDescribed {
				last := fmt.Sprintf("/points/%d: must be object but is null; and 3 more. Fix all of them and call move again.", MaxDescribed-1)
				if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, last) || strings.Count(got, "/points/") != MaxDescribed {
					t.Errorf("got %q", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidateFeedsDescribe(t *testing.T) {
	s := mustCompile(t, robotSchema)
	got := Describe("move", s.Validate([]byte(`{"target": "home", "speed": 2, "colour": "red"}`)))
	want := `invalid arguments for move: 2 problems: (arguments): property "colour" is not allowed ` +
		`(allowed: color, mode, note, repeat, speed, target, waypoints); /speed: must be <= 1.5 but is 2. ` +
		`Fix all of them and call move again.`
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
