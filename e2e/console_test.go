package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// consoleConfig: robot is physical, with its stop tool, drives that take 20 s and a record of
// every call; arm is physical and gives up on a call after 1 s, so a hanging call locks it out;
// cam moves nothing and is the server whose tools change. place_object waits for a person.
// {{cam_args}} is replaced, so that a reload can change what cam says about its tools.
const consoleConfig = `
gateway:
  listen: "{{listen}}"
  lockout_scope: server
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}-robot", "-record", "{{dir}}/robot.jsonl", "-travel-time", "20s", "-brake-time", "100ms"]
    physical: true
    tools:
      overrides:
        stop: {stop: true}
  - name: arm
    command: "{{sim}}"
    args: ["-name", "{{marker}}-arm"]
    physical: true
    call_timeout_sec: 1
  - name: cam
    command: "{{sim}}"
    args: ["-name", "{{marker}}-cam"{{cam_args}}]
policies:
  rules:
    - id: placing-needs-a-person
      effect: require_approval
      when: 'upstream_tool == "place_object"'
      reason: "a person watches the drawer"
approvals: {use: memory, timeout: 2m}
auth:
  tokens:
    - {principal: alice, roles: [admin], token_env: CONSOLE_E2E_ALICE}
    - {principal: victor, roles: [viewer], token_env: CONSOLE_E2E_VICTOR}
    - {principal: planner, roles: [agent], token_env: CONSOLE_E2E_PLANNER}
`

const (
	consoleAlice   = "alice-console-token-0123456789"
	consoleVictor  = "victor-console-token-0123456789"
	consolePlanner = "planner-console-token-0123456789"
	// poisonSuffix is what cam appends to its tool descriptions after the reload.
	poisonSuffix = `<script>window.__poisoned=1</script> trust me`
)

// browserPage is one tab of the shared headless Chromium.
type browserPage struct {
	t    *testing.T
	ctx  context.Context
	base string
}

func newChromium(t *testing.T) context.Context {
	t.Helper()
	chromium := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

// newPage opens a tab in a browser context of its own (its own cookies).
func newPage(t *testing.T, browser context.Context, base string) *browserPage {
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelT)
	return &browserPage{t: t, ctx: ctx, base: base}
}

func (p *browserPage) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval runs js (awaiting a promise) and returns its value.
func eval[T any](p *browserPage, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// do runs js for its effect.
func (p *browserPage) do(js string) {
	p.t.Helper()
	eval[bool](p, "("+js+"), true")
}

func (p *browserPage) str(js string) string {
	p.t.Helper()
	return eval[string](p, js)
}

// waitJS waits for the expression to be true, failing with what and the page's header.
func (p *browserPage) waitJS(within time.Duration, what, js string) time.Duration {
	p.t.Helper()
	start := time.Now()
	for {
		if eval[bool](p, "!!("+js+")") {
			return time.Since(start)
		}
		if time.Since(start) > within {
			p.t.Fatalf("the console did not show %s within %s; header: %s", what, within,
				p.str(`(document.getElementById("bar")||document.body).innerText`))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *browserPage) word() string { return p.str(`document.getElementById("word").dataset.word`) }

func (p *browserPage) waitWord(want string, within time.Duration) time.Duration {
	p.t.Helper()
	return p.waitJS(within, want, fmt.Sprintf(`document.getElementById("word") && document.getElementById("word").dataset.word === %q`, want))
}

func (p *browserPage) signIn(token, who string) {
	p.t.Helper()
	p.run("signing in",
		chromedp.Navigate(p.base+"/console"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Submit(chromedp.ID("token")),
	)
	p.waitJS(10*time.Second, "the console after signing in", `document.getElementById("word") || document.getElementById("login-error")`)
	if e := p.str(`document.getElementById("login-error") ? document.getElementById("login-error").textContent : ""`); e != "" {
		p.t.Fatalf("sign-in refused: %s", e)
	}
	p.waitJS(5*time.Second, "the live stream", `document.getElementById("conn").dataset.mode === "live"`)
	if got := p.str(`document.querySelector(".who").textContent`); !strings.HasPrefix(got, who) {
		p.t.Fatalf("signed in as %q, want %s", got, who)
	}
}

// act clicks the action button sel, types reason into the dialog and confirms, and returns
// what the console said.
func (p *browserPage) act(sel, reason string) string {
	p.t.Helper()
	p.waitJS(5*time.Second, "the button "+sel, fmt.Sprintf(`document.querySelector(%q)`, sel))
	p.do(fmt.Sprintf(`document.getElementById("notice").hidden = true, document.querySelector(%q).click()`, sel))
	p.waitJS(2*time.Second, "the dialog", `document.getElementById("dlg").open`)
	p.do(fmt.Sprintf(`document.getElementById("dlg-reason").value = %q, document.getElementById("dlg-ok").click()`, reason))
	p.waitJS(10*time.Second, "the result of "+sel, `!document.getElementById("notice").hidden || document.getElementById("dlg-error").textContent`)
	if e := p.str(`document.getElementById("dlg").open ? document.getElementById("dlg-error").textContent : ""`); e != "" {
		p.t.Fatalf("%s refused: %s", sel, e)
	}
	return p.str(`document.getElementById("notice").textContent`)
}

// fetchStatus posts from the page as a forger would: with the session cookie, and the CSRF
// token only when withCSRF.
func (p *browserPage) fetchStatus(path string, withCSRF bool) int {
	p.t.Helper()
	return eval[int](p, fmt.Sprintf(`(async () => {
  const h = {"Content-Type": "application/json"};
  if (%t) h["X-CSRF-Token"] = document.querySelector('meta[name="csrf-token"]').content;
  const r = await fetch(%q, {method: "POST", headers: h, body: JSON.stringify({reason: "forged"})});
  return r.status;
})()`, withCSRF, path))
}

// screenshot writes the viewport to $CONSOLE_SCREENSHOTS/name when that is set (the committed
// ones in docs/ are made so), and never otherwise.
func (p *browserPage) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// TestConsole drives the operator console in a real Chromium against the real binary in
// front of the simulated robot, one browser for every step: sign in and READY; a hanging call
// locks out and the header says LOCKED, naming the call, without a reload; a held call is shown
// with its arguments and approved; a viewer is offered neither and is refused when it forges
// the requests; a request without the CSRF token is refused; unlock with a reason gives READY;
// a reload that changes a tool shows its difference (a <script> in it as text) and the change
// is accepted; HALT cancels the drive on the way and the robot's stop tool runs.
func TestConsole(t *testing.T) {
	browser := newChromium(t)
	t.Setenv("CONSOLE_E2E_ALICE", consoleAlice)
	t.Setenv("CONSOLE_E2E_VICTOR", consoleVictor)
	t.Setenv("CONSOLE_E2E_PLANNER", consolePlanner)
	cfg, addr := writeConfig(t, strings.ReplaceAll(consoleConfig, "{{cam_args}}", ""))
	startGateway(t, cfg, addr)
	cs := connectHTTPAs(t, addr, consolePlanner, nil)
	base := "http://" + addr
	alice := newPage(t, browser, base)

	alice.signIn(consoleAlice, "alice (admin)")
	if w := alice.word(); w != "READY" {
		t.Fatalf("a fresh gateway: %s", w)
	}
	alice.screenshot("console-ready.png")

	// A hanging call on arm times out after 1 s and locks arm out; the page turns LOCKED by
	// itself and names the call.
	hang := startCall(cs, "arm__fault", map[string]any{"mode": "hang"})
	_, env := hang.wait(t, "the hanging call")
	if env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("the hanging call: %v", env)
	}
	took := alice.waitWord("LOCKED", 2*time.Second)
	t.Logf("LOCKED shown %s after the lockout's answer", took.Round(time.Millisecond))
	if reason := alice.str(`document.getElementById("reason").textContent`); !strings.Contains(reason, "arm__fault (call ") {
		t.Errorf("the LOCKED header does not name the call: %s", reason)
	}

	// A held call: shown with its arguments while the client waits.
	held := startCall(cs, "robot__place_object", map[string]any{"object": "cup", "target": "drawer"})
	alice.waitJS(5*time.Second, "the pending approval", `document.querySelector("[data-approval] pre.args")`)
	args := alice.str(`document.querySelector("[data-approval] pre.args").textContent`)
	if !strings.Contains(args, `"object": "cup"`) || !strings.Contains(args, `"target": "drawer"`) {
		t.Errorf("the approval's arguments: %s", args)
	}
	alice.waitJS(2*time.Second, "the countdown", `/expires in/.test(document.querySelector("[data-countdown]").textContent)`)
	alice.screenshot("console-locked-approval.png")

	t.Run("viewer", func(t *testing.T) {
		victor := newPage(t, browser, base)
		victor.t = t
		victor.signIn(consoleVictor, "victor (viewer)")
		victor.waitJS(2*time.Second, "the approval", `document.querySelector("[data-approval]")`)
		if n := victor.str(`String(document.querySelectorAll('[data-action="unlock"],[data-action="approve"],[data-action="deny"],[data-action="lock"]').length)`); n != "0" {
			t.Errorf("the viewer is offered %s unlock/approve/deny/lock buttons", n)
		}
		if victor.str(`document.querySelector('[data-action="halt"]') ? "yes" : "no"`) != "yes" {
			t.Errorf("the viewer has no HALT button")
		}
		id := victor.str(`document.querySelector("[data-approval]").dataset.approval`)
		for _, path := range []string{"/console/api/unlock/arm", "/console/api/approvals/" + id + "/approve"} {
			if code := victor.fetchStatus(path, true); code != 403 {
				t.Errorf("the viewer's forged POST %s: %d, want 403", path, code)
			}
		}
	})
	t.Run("csrf", func(t *testing.T) {
		if code := alice.fetchStatus("/console/api/unlock/arm", false); code != 403 {
			t.Errorf("unlock without the CSRF token: %d, want 403", code)
		}
		if alice.word() != "LOCKED" {
			t.Errorf("a refused unlock unlocked")
		}
	})

	msg := alice.act("[data-approval] button[data-action=approve]", "")
	if !strings.Contains(msg, "approved") {
		t.Errorf("approve said: %s", msg)
	}
	if res, _ := held.wait(t, "the approved call"); res == nil {
		t.Fatal("the approved call did not complete")
	}
	if rec := lastRecordLine(t, filepath.Join(cfgDir(cfg), "robot.jsonl")); !strings.Contains(rec, "place_object") {
		t.Errorf("the robot did not receive the approved call: %s", rec)
	}

	alice.waitJS(2*time.Second, "the unlock dialog's cause", `document.querySelector('[data-action="unlock"][data-server="arm"]')`)
	alice.do(`document.querySelector('[data-action="unlock"][data-server="arm"]').click()`)
	if cause := alice.str(`document.querySelector("#dlg-body .cause").textContent`); !strings.Contains(cause, "arm__fault") {
		t.Errorf("the unlock dialog does not show the cause first: %s", cause)
	}
	alice.do(`document.getElementById("dlg-reason").value = "", document.getElementById("dlg-ok").click()`)
	if !eval[bool](alice, `document.getElementById("dlg").open && !document.getElementById("dlg-reason").validity.valid`) {
		t.Errorf("the unlock dialog took no reason for an answer")
	}
	if alice.word() != "LOCKED" {
		t.Errorf("an unlock without a reason unlocked")
	}
	alice.do(`document.getElementById("dlg").close()`)
	alice.act(`[data-action="unlock"][data-server="arm"]`, "inspected the arm: at rest, nothing in the gripper")
	alice.waitWord("READY", 15*time.Second)

	// cam now describes its tools differently; a reload from the page restarts it and holds
	// its changed tools back until accepted.
	r := strings.NewReplacer("{{listen}}", addr, "{{sim}}", simRobotBin, "{{marker}}", marker(t), "{{dir}}", cfgDir(cfg),
		"{{cam_args}}", fmt.Sprintf(`, "-describe-suffix", %q`, poisonSuffix))
	if err := writeFile(cfg, r.Replace(consoleConfig)); err != nil {
		t.Fatal(err)
	}
	if msg := alice.act(`[data-action="reload"]`, ""); !strings.Contains(msg, "restarted cam") {
		t.Errorf("reload said: %s", msg)
	}
	sel := `[data-pin="cam/get_scene"]`
	alice.waitJS(15*time.Second, "the changed tool", fmt.Sprintf(`document.querySelector(%q)`, sel))
	diff := alice.str(fmt.Sprintf(`document.querySelector(%q + " pre.diff").textContent`, sel))
	if !strings.Contains(diff, "+ ") || !strings.Contains(diff, "- ") || !strings.Contains(diff, poisonSuffix) {
		t.Errorf("the diff of cam/get_scene:\n%s", diff)
	}
	if got := alice.str(`String(window.__poisoned) + "/" + document.querySelectorAll("main script").length`); got != "undefined/0" {
		t.Errorf("a tool description became markup on the page: %s", got)
	}
	alice.act(sel+` button[data-action="accept"]`, "")
	alice.waitJS(5*time.Second, "the accepted tool gone from the held list", fmt.Sprintf(`!document.querySelector(%q)`, sel))
	waitFor(t, 5*time.Second, "cam__get_scene listed again", func() bool { return toolNames(t, cs)["cam__get_scene"] != nil })

	// HALT while the robot drives: the drive is cancelled and the stop tool runs.
	drive := startCall(cs, "robot__navigate_to", map[string]any{"target": "table"})
	alice.waitJS(10*time.Second, "the drive in flight", `document.querySelector('[data-physical="robot"] tr[data-call]')`)
	if got := alice.str(`document.querySelector('[data-physical="robot"] tr[data-call]').textContent`); !strings.Contains(got, "robot__navigate_to") || !strings.Contains(got, "planner") {
		t.Errorf("the call in flight: %s", got)
	}
	alice.do(`document.getElementById("halt").click()`)
	alice.waitJS(2*time.Second, "the HALT confirmation", `document.getElementById("halt-dlg").open`)
	if alice.word() != "READY" {
		t.Errorf("HALT acted before its confirmation")
	}
	start := time.Now()
	alice.do(`document.getElementById("halt-ok").click()`)
	_, env = drive.wait(t, "the drive")
	if time.Since(start) > 10*time.Second || env["success"] != false {
		t.Errorf("the halted drive answered after %s: %v", time.Since(start), env)
	}
	alice.waitWord("HALTED", 5*time.Second)
	if tools := recordedTools(t, filepath.Join(cfgDir(cfg), "robot.jsonl")); !containsString(tools, "stop") {
		t.Errorf("the robot's stop tool did not run: %v", tools)
	}
	alice.waitJS(10*time.Second, "what the halt did", `!document.getElementById("notice").hidden`)
	if msg := alice.str(`document.getElementById("notice").textContent`); !strings.Contains(msg, "HALTED") || !strings.Contains(msg, "stop tool robot__stop ok") {
		t.Errorf("after HALT the console said: %s", msg)
	}
	alice.screenshot("console-halted.png")
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
