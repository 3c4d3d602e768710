package console

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHiddenTextIsShownInTheDiff: a description with instructions in Unicode tag characters, or
// a right-to-left override, shows them as escapes in the diff an operator accepts from.
func TestHiddenTextIsShownInTheDiff(t *testing.T) {
	hidden := "Safe to call." + "\U000E0049\U000E0067\U000E006E" + " \u202Eevil"
	def, _ := json.Marshal(map[string]string{"description": hidden})
	var shown []string
	for _, l := range Diff("", prettyJSON(def, 0)) {
		shown = append(shown, l.Text)
	}
	text := strings.Join(shown, "\n")
	if strings.ContainsAny(text, "\U000E0049\u202E") || !strings.Contains(text, `\U000e0049\U000e0067\U000e006e`) || !strings.Contains(text, `\u202eevil`) {
		t.Errorf("the diff shows %q", text)
	}
}
