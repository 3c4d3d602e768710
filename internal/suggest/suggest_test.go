package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"command", "call_timeout_sec", "secrets.scan", "physical"}
	for name, want := range map[string]string{
		"comand":         "command",
		"callTimeoutSec": "call_timeout_sec",
		"secretsscan":    "secrets.scan",
		"PHYSICAL":       "physical",
		"banana":         "",
		"":               "",
	} {
		if got := Closest(name, known); got != want {
			t.Errorf("Closest(%q) = %q, want %q", name, got, want)
		}
	}
}
