package governor

import (
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Whatever each part of a call counts, the client sees its progress increase: a part starts one
// past the last value sent, a value that would go back is dropped, and an ended part sends
// nothing more.
func TestProgressIncreasesAcrossTheCallsParts(t *testing.T) {
	var got []string
	c := &Call{Progress: func(p *mcp.ProgressNotificationParams) {
		got = append(got, fmt.Sprintf("%g/%g %s", p.Progress, p.Total, p.Message))
	}}
	p := func(v, total float64, msg string) *mcp.ProgressNotificationParams {
		return &mcp.ProgressNotificationParams{Progress: v, Total: total, Message: msg}
	}
	upstream := c.progressStage()
	upstream.send(p(0.5, 2, "driving"))
	upstream.send(p(1.5, 2, "driving"))
	upstream.send(p(1.5, 2, "repeated")) // not an increase
	upstream.send(p(1, 2, "backwards"))  // a decrease
	waiting := c.progressStage()         // a tool_result guard holds the result
	waiting.send(p(0, 30, "waiting"))
	waiting.send(p(2, 30, "waiting"))
	waiting.end()
	waiting.send(p(4, 30, "late"))
	upstream.send(p(2, 2, "an ended part's server still talking"))
	c.progressStage().send(p(0, 0, "no total"))
	want := []string{"0.5/2 driving", "1.5/2 driving", "2.5/32.5 waiting", "4.5/32.5 waiting", "5.5/0 no total"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	if (&Call{}).progressStage().sender() != nil {
		t.Error("a call whose client asked for no progress has a progress sender")
	}
}
