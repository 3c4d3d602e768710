package governor

import (
	"context"
	"testing"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/limits"
)

func TestLimitRefusesBeforeTheRestOfTheChain(t *testing.T) {
	arm := config.Limit{ID: "arm-moves", Per: config.PerPrincipal, Rate: "2/m", Count: 2, Window: 60e9, Burst: 2,
		PhysicalOnly: true, Mode: config.LimitEnforce}
	cam := config.Limit{ID: "cam-one", Per: config.PerServer, Concurrent: 1, Mode: config.LimitEnforce}
	shadow := config.Limit{ID: "shadow", Per: config.PerGlobal, Rate: "1/h", Count: 1, Window: 3600e9, Burst: 1, Mode: config.LimitLogOnly}
	l := limits.New([]config.Limit{arm, cam, shadow}, limits.Options{})
	reached := 0
	var inner func(c *Call) *Outcome
	final := HandlerFunc(func(ctx context.Context, c *Call) *Outcome {
		reached++
		if inner != nil {
			return inner(c)
		}
		return &Outcome{Success: true}
	})
	h := Chain(final, Limit(l))
	robot := &Tool{Public: "robot__move", Server: "robot", ServerConfig: &config.Server{Name: "robot", Physical: true}}
	camera := &Tool{Public: "cam__snap", Server: "cam", ServerConfig: &config.Server{Name: "cam"}}
	call := func(p string, tool *Tool) (*Call, *Outcome) {
		c := &Call{Principal: p, Name: tool.Public, Tool: tool}
		return c, h.Handle(context.Background(), c)
	}
	for range 2 {
		if _, o := call("planner", robot); o.Kind != "" {
			t.Fatalf("refused: %s", o.Reason)
		}
	}
	c, o := call("planner", robot)
	if o.Kind != KindRateLimited || reached != 2 {
		t.Fatalf("third physical call: kind %q, reached the chain %d times; want rate_limited and 2", o.Kind, reached)
	}
	env := o.Result.StructuredContent.(map[string]any)
	if env["success"] != false || env["kind"] != "rate_limited" || env["limit"] != "arm-moves" || env["window"] != "1m" ||
		env["retry_after_sec"] != 30 || env["reason"] != o.Reason || !o.Result.IsError {
		t.Errorf("envelope %v", env)
	}
	if c.Detail["rate_limit_would_refuse"] != nil {
		t.Errorf("a refused call noted a would-be refusal: %v", c.Detail)
	}
	// Another principal is unaffected; the global log_only limit notes its would-be refusal.
	c, o = call("viewer", robot)
	if o.Kind != "" || c.Detail["rate_limit_would_refuse"] != "shadow" {
		t.Errorf("another principal: kind %q, detail %v", o.Kind, c.Detail)
	}
	// A concurrent cap of 1: a call made while another is in flight is refused, and the slot
	// is free again once the first call returns.
	var nested *Outcome
	inner = func(c *Call) *Outcome {
		if c.Tool == camera && nested == nil {
			nested = &Outcome{}
			_, nested = call("viewer", camera)
		}
		return &Outcome{Success: true}
	}
	if _, o = call("planner", camera); o.Kind != "" {
		t.Fatalf("first camera call refused: %s", o.Reason)
	}
	if nested.Kind != KindRateLimited || nested.Result.StructuredContent.(map[string]any)["window"] != "concurrent" {
		t.Errorf("concurrent call: kind %q %v", nested.Kind, nested.Result.StructuredContent)
	}
	inner = nil
	if _, o = call("planner", camera); o.Kind != "" {
		t.Errorf("after the call in flight returned: %s", o.Reason)
	}
}

type passHandler struct{}

func (*passHandler) Handle(context.Context, *Call) *Outcome { return &Outcome{Success: true} }

func TestLimitStepLeftOutWithoutLimits(t *testing.T) {
	var h Handler = &passHandler{}
	if Limit(limits.New(nil, limits.Options{}))(h) != h || Limit(nil)(h) != h {
		t.Error("the step wraps the chain without limits")
	}
}
