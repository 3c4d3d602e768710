package guards

import "testing"

func TestTopicDeny(t *testing.T) {
	settings := `
topics:
  weapons: [arm, firearm, "assault rifle"]
  legal: [lawsuit, attorney]
  deutsch: [Waffe, straße]
`
	g := newGuard(t, "topic.deny", settings)
	tests := []struct {
		name string
		text string
		want []found
	}{
		{"whole word", "Arm the device", []found{f("weapons", "Arm")}},
		{"not inside a word", "a harmless armature; arms; arm_joint", nil},
		{"any case", "FIREARM and LawSuit", []found{f("weapons", "FIREARM"), f("legal", "LawSuit")}},
		{"punctuation is a boundary", "(arm), arm-mounted", []found{f("weapons", "arm"), f("weapons", "arm")}},
		{"several words", "an Assault  Rifle here", []found{f("weapons", "Assault  Rifle")}},
		{"several words, incomplete", "assault course", nil},
		{"unicode case", "WAFFE und STRASSE und Straße", []found{f("deutsch", "WAFFE"), f("deutsch", "Straße")}},
		{"unicode word boundary", "Waffenschein", nil},
		{"accented letter is a word character", "armé", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spansOf(t, g, tt.text); !equalFound(got, tt.want) {
				t.Errorf("Scan(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

func TestTopicDenyRedaction(t *testing.T) {
	g := newGuard(t, "topic.deny", "topics: {legal: [lawsuit]}\nreplacement: '[topic]'").(*topicDeny)
	text := "file a lawsuit, a Lawsuit!"
	spans, _ := g.Scan(t.Context(), text)
	if got, want := g.Redact(text, spans), "file a [topic], a [topic]!"; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
}
