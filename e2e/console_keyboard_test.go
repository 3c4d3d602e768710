package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// A tablet held upright: what the console must fit without scrolling sideways.
const tabletWidth, tabletHeight = 820, 1180

// key presses one key (kb.Tab, kb.Enter, kb.Escape, " ", or text to type) as the keyboard
// would, with Shift when shift.
func (p *browserPage) key(keys string, shift bool) {
	p.t.Helper()
	var opts []chromedp.KeyOption
	if shift {
		opts = append(opts, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	p.run("pressing "+fmt.Sprintf("%q", keys), chromedp.KeyEvent(keys, opts...))
}

// focused describes the focused element, for messages.
func (p *browserPage) focused() string {
	p.t.Helper()
	return p.str(`(e => e ? e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + " " + JSON.stringify((e.textContent || e.value || "").trim().slice(0, 60)) : "nothing")(document.activeElement)`)
}

// tabTo presses Tab (Shift-Tab when back) until the focused element matches the CSS selector,
// at most max times, and checks at every stop that the focus can be seen: an outline at least
// 2 px wide that is not "none". Past the last element the focus leaves the page (the body
// has it) before it comes round to the first.
func (p *browserPage) tabTo(sel string, back bool, max int) {
	p.t.Helper()
	for range max {
		p.key(kb.Tab, back)
		if outline := p.str(`(e => { if (e === document.body) return "body"; const s = getComputedStyle(e); return s.outlineStyle + " " + s.outlineWidth; })(document.activeElement)`); outline != "body" && (strings.HasPrefix(outline, "none") || strings.HasSuffix(outline, " 0px") || strings.HasSuffix(outline, " 1px")) {
			p.t.Errorf("the focused %s has no visible outline: %s", p.focused(), outline)
		}
		if eval[bool](p, fmt.Sprintf(`document.activeElement.matches(%q)`, sel)) {
			return
		}
	}
	p.t.Fatalf("%d presses of Tab (back: %t) did not reach %s; the focus is on %s", max, back, sel, p.focused())
}

// checkFits fails when the page, at what, is wider than the tablet's viewport.
func (p *browserPage) checkFits(what string) {
	p.t.Helper()
	if w := eval[int](p, `document.documentElement.scrollWidth`); w > tabletWidth {
		p.t.Errorf("%s: the page is %d px wide on a %d px screen: it needs horizontal scrolling (widest: %s)", what, w, tabletWidth,
			p.str(`[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > innerWidth + 1).slice(-1).map(e => e.tagName + "." + e.className).join()`))
	}
}

// checkWord checks that the header says the state in its word and its symbol, so that it
// does not rest on colour alone.
func (p *browserPage) checkWord(want, symbol string) {
	p.t.Helper()
	p.waitWord(want, 5*time.Second)
	if got := p.str(`document.getElementById("word").textContent.trim()`); got != want {
		p.t.Errorf("the header's text is %q, want the word %s", got, want)
	}
	if got := p.str(`getComputedStyle(document.getElementById("word"), "::before").content`); !strings.Contains(got, symbol) {
		p.t.Errorf("the header %s has the symbol %s, want %s", want, got, symbol)
	}
}

// TestConsoleWorksWithTheKeyboardOnATablet signs in and operates the console with the keyboard
// alone on a tablet-sized screen: the skip link, an approval, an unlock with its reason, and
// HALT with its confirmation (Escape cancels; the reason is typed; then confirmed). Every
// focused element shows its outline, each header state carries its word and symbol, not only a
// colour, and no state needs horizontal scrolling.
func TestConsoleWorksWithTheKeyboardOnATablet(t *testing.T) {
	browser := newChromium(t)
	t.Setenv("CONSOLE_E2E_ALICE", consoleAlice)
	t.Setenv("CONSOLE_E2E_VICTOR", consoleVictor)
	t.Setenv("CONSOLE_E2E_PLANNER", consolePlanner)
	cfg, addr := writeConfig(t, strings.ReplaceAll(consoleConfig, "{{cam_args}}", ""))
	startGateway(t, cfg, addr)
	cs := connectHTTPAs(t, addr, consolePlanner, nil)
	p := newPage(t, browser, "http://"+addr)
	p.run("a tablet's screen", chromedp.EmulateViewport(tabletWidth, tabletHeight))

	// Sign in: the token field has the focus; type and press Enter.
	p.run("the sign-in page", chromedp.Navigate(p.base+"/console"), chromedp.WaitVisible(chromedp.ID("token")))
	if f := p.focused(); !strings.HasPrefix(f, "input#token") {
		t.Fatalf("the sign-in page's focus is on %s, not the token field", f)
	}
	p.checkFits("the sign-in page")
	p.key(consoleAlice, false)
	p.key(kb.Enter, false)
	p.waitJS(10*time.Second, "the live console", `document.getElementById("conn") && document.getElementById("conn").dataset.mode === "live"`)
	p.checkWord("READY", "✓")
	p.checkFits("READY")

	// The first Tab reaches the skip link, shown; Enter on it moves past the header, so the
	// next Tab lands in the page's content.
	p.tabTo("a.skip", false, 1)
	if left := eval[float64](p, `document.activeElement.getBoundingClientRect().left`); left < 0 {
		t.Errorf("the focused skip link is off the screen (left %v)", left)
	}
	p.key(kb.Enter, false)
	p.key(kb.Tab, false)
	if !eval[bool](p, `!!document.activeElement.closest("main")`) {
		t.Errorf("after the skip link, Tab went to %s, not into the content", p.focused())
	}

	// A hanging call locks arm out: LOCKED, in words.
	hang := startCall(cs, "arm__fault", map[string]any{"mode": "hang"})
	hang.wait(t, "the hanging call")
	p.checkWord("LOCKED", "⚠")

	// A held call: Tab to its approve button, Space opens the dialog, Tab to its OK, Enter.
	held := startCall(cs, "robot__place_object", map[string]any{"object": "cup", "target": "drawer"})
	p.waitJS(5*time.Second, "the pending approval", `document.querySelector("[data-approval] button[data-action=approve]")`)
	p.checkFits("LOCKED with a pending approval")
	p.tabTo("[data-approval] button[data-action=approve]", false, 40)
	p.key(" ", false)
	p.waitJS(2*time.Second, "the approve dialog", `document.getElementById("dlg").open`)
	p.checkFits("the approve dialog")
	p.tabTo("#dlg-ok", false, 3)
	p.key(kb.Enter, false)
	if res, _ := held.wait(t, "the approved call"); res == nil {
		t.Fatal("the call approved with the keyboard did not complete")
	}
	p.waitJS(5*time.Second, "the approval gone", `!document.querySelector("[data-approval]")`)

	// Unlock arm: the dialog opens on its reason; type one, Tab to OK, Enter.
	p.tabTo(`[data-action="unlock"][data-server="arm"]`, false, 40)
	p.key(kb.Enter, false)
	p.waitJS(2*time.Second, "the unlock dialog", `document.getElementById("dlg").open`)
	if f := p.focused(); !strings.HasPrefix(f, "textarea#dlg-reason") {
		t.Errorf("the unlock dialog opened with the focus on %s, not its reason", f)
	}
	p.key("looked at the arm: at rest", false)
	p.tabTo("#dlg-ok", false, 3)
	p.key(kb.Enter, false)
	p.checkWord("READY", "✓")
	if !strings.Contains(p.str(`document.getElementById("notice").textContent`), "unlock") {
		t.Errorf("after the unlock the console said: %s", p.str(`document.getElementById("notice").textContent`))
	}

	// The focus stays where it is when an update replaces the panels (here: a new record).
	p.tabTo(`main a[href="/console/audit"]`, false, 40)
	last := p.str(`document.querySelector("#h-recent ~ table tr[data-seq]").dataset.seq`)
	if _, env := startCall(cs, "cam__get_scene", map[string]any{}).wait(t, "a call on cam"); env["success"] != true {
		t.Fatalf("cam__get_scene: %v", env)
	}
	p.waitJS(5*time.Second, "the new record", fmt.Sprintf(`document.querySelector("#h-recent ~ table tr[data-seq]").dataset.seq !== %q`, last))
	if !eval[bool](p, `document.activeElement.matches('main a[href="/console/audit"]')`) {
		t.Errorf("after an update the focus is on %s, not where it was", p.focused())
	}

	// HALT: back up to the button, Enter asks; Escape cancels and nothing halts.
	p.tabTo("#halt", true, 40)
	p.key(kb.Enter, false)
	p.waitJS(2*time.Second, "the HALT confirmation", `document.getElementById("halt-dlg").open`)
	p.checkFits("the HALT confirmation")
	p.key(kb.Escape, false)
	p.waitJS(2*time.Second, "the HALT confirmation closed", `!document.getElementById("halt-dlg").open`)
	if p.word() != "READY" {
		t.Fatalf("Escape on the HALT confirmation halted")
	}
	if f := p.focused(); !strings.HasPrefix(f, "button#halt") {
		t.Errorf("after Escape the focus is on %s, not back on HALT", f)
	}
	// Again: this time give a reason and confirm.
	p.key(kb.Enter, false)
	p.waitJS(2*time.Second, "the HALT confirmation", `document.getElementById("halt-dlg").open`)
	p.tabTo("#halt-reason", true, 3)
	p.run("the reason's old text selected", chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	p.key("a person walked into the cell", false)
	p.tabTo("#halt-ok", false, 3)
	p.key(kb.Enter, false)
	p.checkWord("HALTED", "■")
	if reason := p.str(`document.getElementById("reason").textContent`); !strings.Contains(reason, "a person walked into the cell") || !strings.Contains(reason, "alice") {
		t.Errorf("the HALTED header's reason: %s", reason)
	}
	p.checkFits("HALTED")

	p.run("the audit log", chromedp.Navigate(p.base+"/console/audit"), chromedp.WaitVisible(chromedp.ID("h-audit")))
	p.checkFits("the audit log")
}
