package guards

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/invopop/jsonschema"
)

func TestEveryGuardHasItsSettingsType(t *testing.T) {
	var withSettings []string
	for use := range settingsTypes {
		withSettings = append(withSettings, use)
	}
	slices.Sort(withSettings)
	if !slices.Equal(Uses(), withSettings) {
		t.Fatalf("registry %q and settingsTypes %q differ", Uses(), withSettings)
	}
	if Settings("no.such") != nil {
		t.Error("Settings of an unknown guard")
	}
	for _, use := range Uses() {
		s := Settings(use)
		typ := reflect.TypeOf(s).Elem()
		// yaml and json names agree, so the JSON Schema describes what the YAML decoder reads.
		for i := range typ.NumField() {
			fld := typ.Field(i)
			y, _, _ := strings.Cut(fld.Tag.Get("yaml"), ",")
			j, _, _ := strings.Cut(fld.Tag.Get("json"), ",")
			if y != j {
				t.Errorf("%s.%s: yaml %q, json %q", typ.Name(), fld.Name, y, j)
			}
		}
		schema := (&jsonschema.Reflector{DoNotReference: true}).Reflect(s)
		b, err := json.Marshal(schema)
		if err != nil {
			t.Fatalf("%s: %v", use, err)
		}
		if !strings.Contains(string(b), `"description"`) {
			t.Errorf("%s: schema without descriptions: %s", use, b)
		}
	}
}

func TestActionStrength(t *testing.T) {
	order := []Action{ActionNone, ActionRedact, ActionEscalate, ActionBlock}
	for i := range order {
		for j := range order {
			if got := order[i].Stronger(order[j]); got != (i > j) {
				t.Errorf("%q.Stronger(%q) = %v", order[i], order[j], got)
			}
		}
	}
}
