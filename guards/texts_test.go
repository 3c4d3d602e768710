package guards

import (
	"context"
	"strings"
	"testing"
)

// CheckTexts names each finding by the path the caller gave its text, redacts index for index,
// and keeps the texts as they were when the result blocks.
func TestCheckTextsNamesTheCallersPaths(t *testing.T) {
	texts := []Text{
		{Path: "description", Text: "Moves the arm."},
		{Path: "inputSchema.properties.target.description", Text: "key AKIAIOSFODNN7EXAMPLE here"},
		{Path: "empty", Text: ""},
		{Path: "inputSchema.properties.mode.enum[2]", Text: "AKIAIOSFODNN7EXAMPLE"},
	}
	tests := []struct {
		action string
		want   Action
		out    []string
	}{
		{"redact", ActionRedact, []string{"Moves the arm.", "key [SECRET] here", "", "[SECRET]"}},
		{"block", ActionBlock, []string{"Moves the arm.", "key AKIAIOSFODNN7EXAMPLE here", "", "AKIAIOSFODNN7EXAMPLE"}},
	}
	for _, tt := range tests {
		set := build(t, StageUpstreamContent, "- {id: s, use: secrets.scan, action: "+tt.action+"}")
		res, out := set.CheckTexts(context.Background(), "robot", "robot__navigate_to", texts)
		if res.Action != tt.want || len(res.Findings) != 2 {
			t.Fatalf("%s: %+v", tt.action, res)
		}
		for i, path := range []string{"inputSchema.properties.target.description", "inputSchema.properties.mode.enum[2]"} {
			if f := res.Findings[i]; f.Path != path || f.Stage != "upstream_content" || f.Category != "aws_access_key" {
				t.Errorf("%s: finding %d: %+v", tt.action, i, f)
			}
		}
		if strings.Join(out, "|") != strings.Join(tt.out, "|") {
			t.Errorf("%s: texts passed on: %q", tt.action, out)
		}
		if !strings.Contains(res.Reason, "at inputSchema.properties.target.description") || strings.Contains(res.Reason, "AKIA") {
			t.Errorf("%s: reason %q", tt.action, res.Reason)
		}
	}
}

// A guard narrowed by where.tools leaves CheckTexts of other items alone.
func TestCheckTextsHonoursWhere(t *testing.T) {
	set := build(t, StageToolDefinition, "- {id: s, use: secrets.scan, where: {tools: ['other__*']}}")
	res, out := set.CheckTexts(context.Background(), "robot", "robot__navigate_to", []Text{{Path: "description", Text: "AKIAIOSFODNN7EXAMPLE"}})
	if res.Action != ActionNone || out[0] != "AKIAIOSFODNN7EXAMPLE" {
		t.Errorf("%+v %q", res, out)
	}
}
