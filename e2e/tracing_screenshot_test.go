package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/trace"
)

// heldCallConfig: the simulated robot is physical, drives take 400 ms, and every drive waits for
// a person's approval; telemetry exports to Jaeger.
const heldCallConfig = `
gateway: {listen: "{{listen}}", name: ` + gatewayService + `}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}", "-travel-time", "400ms"]
    physical: true
policies:
  rules:
    - id: drives-need-a-person
      effect: require_approval
      when: 'upstream_tool == "navigate_to"'
      reason: a person watches the cell
approvals: {use: memory, timeout: 2m}
telemetry:
  endpoint: "{{otlp}}"
`

// TestJaegerScreenshotOfAnApprovedCall makes docs/jaeger-approved-call.png: Jaeger's UI showing
// the trace of a physical call that was held for approval, approved by an operator and run. It
// needs Jaeger UI's built assets, which the Go build of Jaeger does not have, and runs only when
// asked: TRACE_SCREENSHOTS=<folder for the PNG> JAEGER_UI_DIR=<jaeger-ui's packages/jaeger-ui/build>
// (docs/operations.md, "Tracing", says how to build them).
func TestJaegerScreenshotOfAnApprovedCall(t *testing.T) {
	out, ui := os.Getenv("TRACE_SCREENSHOTS"), os.Getenv("JAEGER_UI_DIR")
	if out == "" || ui == "" {
		t.Skip("set TRACE_SCREENSHOTS to a folder and JAEGER_UI_DIR to Jaeger UI's built assets to make the screenshot")
	}
	if _, err := os.Stat(filepath.Join(ui, "index.html")); err != nil {
		t.Fatalf("JAEGER_UI_DIR=%s has no index.html: build Jaeger UI first (%v)", ui, err)
	}
	noOTelEnv(t)
	browser := newChromium(t)
	j := startJaeger(t, ui)
	tr := clientTracer(t, j)
	cfg, addr := writeConfig(t, strings.ReplaceAll(heldCallConfig, "{{otlp}}", j.otlpHTTP))
	startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)

	type answer struct {
		sc  trace.SpanContext
		err error
		ok  bool
	}
	done := make(chan answer, 1)
	go func() {
		sc, res, err := tracedCall(t, tr, cs, "robot__navigate_to", map[string]any{"target": "shelf"})
		done <- answer{sc, err, err == nil && !res.IsError}
	}()
	id := pendingApproval(t, cfg)
	time.Sleep(1500 * time.Millisecond) // the operator takes a moment: the wait shows in the trace
	cliOK(t, "approvals", "approve", id, "-c", cfg, "--operator", "alice", "--reason", "the cell is clear")
	a := <-done
	if !a.ok {
		t.Fatalf("the approved drive failed: %v", a.err)
	}
	traceID := a.sc.TraceID().String()
	got := j.waitTrace(t, traceID, "the client's span, the gateway's and its steps", func(tr *jTrace) bool {
		call := tr.find(gatewayService, "tools/call robot__navigate_to")
		if tr.find(clientService, "agent step") == nil || call == nil {
			return false
		}
		for _, step := range []string{"validate", "policy", "approval wait", "tools/call navigate_to", "audit"} {
			if tr.child(call.SpanID, step) == nil {
				return false
			}
		}
		return true
	})
	t.Logf("the trace of the approved call:\n%s", got.outline())

	page := newPage(t, browser, j.query)
	page.run("the trace page",
		chromedp.EmulateViewport(1400, 830),
		chromedp.Navigate(j.query+"/trace/"+traceID))
	page.waitJSText(30*time.Second, "tools/call robot__navigate_to")
	// Open the approval wait's details and its tags: the step that held the call.
	page.do(`[...document.querySelectorAll(".span-name")].find(e => e.querySelector(".endpoint-name").innerText === "approval wait").click()`)
	page.waitJSText(10*time.Second, "Tags")
	page.do(`document.querySelector(".AccordianKeyValues--header").click()`)
	page.waitJSText(10*time.Second, "mcp_gateway.policy.rule")
	time.Sleep(time.Second) // the timeline's layout settles
	png, err := chromedp.Run(page.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(out, "jaeger-approved-call.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// waitJSText waits until the page's text holds s.
func (p *browserPage) waitJSText(within time.Duration, s string) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for !eval[bool](p, fmt.Sprintf(`document.body.innerText.includes(%q)`, s)) {
		if time.Now().After(deadline) {
			p.t.Fatalf("the page never showed %q; it shows:\n%.2000s", s, p.str(`document.body.innerText`))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
