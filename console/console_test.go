package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

const (
	adminToken  = "alice-token-0123456789"
	viewerToken = "victor-token-0123456789"
	agentToken  = "planner-token-0123456789"
)

// fixtureYAML has one physical server that is never started: the handlers act on the state
// file and the config, which is all these tests need.
const fixtureYAML = `servers:
  - name: arm
    command: "{{exe}}"
    physical: true
approvals: {use: memory, timeout: 1m}
auth:
  tokens:
    - {principal: alice, roles: [admin], token_env: T_ALICE}
    - {principal: victor, roles: [viewer], token_env: T_VICTOR}
    - {principal: planner, roles: [agent], token_env: T_PLANNER}
{{console}}`

type fixture struct {
	t    *testing.T
	srv  *httptest.Server
	g    *gateway.Gateway
	st   *store.Store
	c    *Console
	cfg  *config.Config
	mu   sync.Mutex
	now  time.Time
	jar  http.CookieJar
	csrf string
}

func newFixture(t *testing.T, consoleYAML string) *fixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.NewReplacer("{{exe}}", exe, "{{console}}", consoleYAML).Replace(fixtureYAML)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"T_ALICE": adminToken, "T_VICTOR": viewerToken, "T_PLANNER": agentToken}
	creds, err := gateway.LoadCredentials(cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g, err := gateway.New(cfg, gateway.Options{Store: st, AdminToken: "the-admin-token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	f := &fixture{t: t, g: g, st: st, cfg: cfg, now: time.Now()}
	f.c = New(g, Options{Credentials: creds, Config: cfg, Now: f.clock})
	g.MountConsole(f.c)
	f.srv = httptest.NewServer(g.Handler(creds))
	t.Cleanup(f.srv.Close)
	f.jar, _ = cookiejar.New(nil)
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fixture) client() *http.Client {
	return &http.Client{Jar: f.jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login posts the sign-in form as the page would, and reads the CSRF token off the console.
func (f *fixture) login(token string) *http.Response {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/console/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.srv.URL)
	resp, err := f.client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther {
		_, body := f.get("/console/")
		m := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(body)
		if m == nil {
			f.t.Fatalf("no CSRF token on the console page:\n%s", body)
		}
		f.csrf = m[1]
	}
	return resp
}

func (f *fixture) get(path string) (*http.Response, string) {
	f.t.Helper()
	resp, err := f.client().Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// post sends an action as the page's script does; header overrides (or with "" removes) one.
func (f *fixture) post(path string, body any, header ...string) (int, map[string]any) {
	f.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", f.srv.URL)
	req.Header.Set("X-CSRF-Token", f.csrf)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := f.client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (f *fixture) state() update {
	f.t.Helper()
	f.advance(time.Second) // past the view cache
	resp, body := f.get("/console/state")
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("GET /console/state: %d %s", resp.StatusCode, body)
	}
	var u update
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		f.t.Fatal(err)
	}
	return u
}

// lastRecord is the last audit record with the action.
func (f *fixture) lastRecord(action string) *store.Record {
	f.t.Helper()
	if err := f.st.Audit().Flush(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	var found *store.Record
	_ = f.st.AuditScan(store.AuditFilter{}, func(r store.Record) bool {
		if r.Action == action {
			found = &r
		}
		return true
	})
	return found
}

func TestSignInSetsAStrictSessionCookieAndSecurityHeaders(t *testing.T) {
	f := newFixture(t, "")
	resp, body := f.get("/console/")
	if !strings.Contains(body, `name="token"`) {
		t.Fatalf("without a session the console shows the sign-in page:\n%s", body)
	}
	for h, want := range map[string]string{
		"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
		!strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q is not strict", csp)
	}
	if strings.Contains(body, "<script>") || regexp.MustCompile(`<script(?: [^>]*)?>[^<]`).MatchString(body) {
		t.Errorf("the page has an inline script")
	}

	resp = f.login(adminToken)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with an admin token: %d", resp.StatusCode)
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/console" || ck[0].MaxAge <= 0 {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/console, expiring", ck)
	}
	if ck[0].Secure {
		t.Errorf("the cookie is Secure over plain HTTP, which the browser would never send back")
	}
	if strings.Contains(ck[0].Value, adminToken) {
		t.Errorf("the cookie carries the token")
	}
	_, body = f.get("/console/")
	for _, want := range []string{"alice (admin)", `data-action="halt"`, "DEGRADED", "arm"} {
		if !strings.Contains(body, want) {
			t.Errorf("the console lacks %q", want)
		}
	}
	if rec := f.lastRecord("console_signin"); rec == nil || rec.Principal != "alice" || rec.Outcome != "ok" {
		t.Errorf("sign-in audit record: %+v", rec)
	}
}

func TestBadSignInsAreRefusedAuditedAndRateLimited(t *testing.T) {
	f := newFixture(t, "")
	if resp := f.login("not-a-token-at-all-really"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", resp.StatusCode)
	}
	rec := f.lastRecord("console_signin")
	if rec == nil || rec.Outcome != "refused" || strings.Contains(fmt.Sprint(rec), "not-a-token") {
		t.Fatalf("refused sign-in audit record: %+v", rec)
	}
	if resp := f.login(agentToken); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token without role admin or viewer: %d", resp.StatusCode)
	}
	if rec := f.lastRecord("console_signin"); rec == nil || rec.Principal != "planner" || rec.Outcome != "refused" {
		t.Errorf("refused sign-in of planner: %+v", rec)
	}
	for range signinBurst - 2 {
		f.login("still-not-a-token-really")
	}
	if resp := f.login("yet-another-guess"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("after %d refused sign-ins a guess must wait: %d", signinBurst, resp.StatusCode)
	}
	// A person with a valid token is never kept out by others' bad sign-ins from the same
	// address (a reverse proxy): they may need to HALT.
	if resp := f.login(adminToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a good token while guesses are throttled: %d", resp.StatusCode)
	}
	f.advance(signinWindow)
	if resp := f.login("a-guess-after-the-window"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after the window a guess is checked again: %d", resp.StatusCode)
	}
}

func TestSignInFromAnotherOriginIsRefused(t *testing.T) {
	f := newFixture(t, "")
	req, _ := http.NewRequest("POST", f.srv.URL+"/console/login", strings.NewReader("token="+adminToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := f.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("sign-in posted from another origin: %d %v", resp.StatusCode, resp.Cookies())
	}
}

func TestActionsNeedOriginSessionAndCSRFToken(t *testing.T) {
	f := newFixture(t, "")
	f.login(adminToken)
	body := map[string]string{"reason": "checking"}
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"no CSRF token", []string{"X-CSRF-Token", ""}, http.StatusForbidden},
		{"a wrong CSRF token", []string{"X-CSRF-Token", strings.Repeat("0", 64)}, http.StatusForbidden},
		{"another origin", []string{"Origin", "http://evil.example"}, http.StatusForbidden},
		{"no origin", []string{"Origin", ""}, http.StatusForbidden},
		{"no session", []string{"Cookie", "mcp_gateway_console=forged"}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "no session" {
				old := f.jar
				f.jar, _ = cookiejar.New(nil)
				defer func() { f.jar = old }()
			}
			code, out := f.post("/console/api/lock/arm", body, tc.header...)
			if code != tc.want {
				t.Errorf("%d %v, want %d", code, out, tc.want)
			}
		})
	}
	if len(f.st.Lockouts()) != 0 {
		t.Fatalf("a refused request locked: %v", f.st.Lockouts())
	}
	if code, out := f.post("/console/api/lock/arm", body); code != http.StatusOK {
		t.Fatalf("the same request with its token: %d %v", code, out)
	}
}

func TestLockAndUnlockAsThePerson(t *testing.T) {
	f := newFixture(t, "")
	f.login(adminToken)
	if code, out := f.post("/console/api/lock/arm", map[string]string{}); code != http.StatusBadRequest {
		t.Errorf("lock without a reason: %d %v", code, out)
	}
	if code, out := f.post("/console/api/lock/nope", map[string]string{"reason": "x"}); code != http.StatusNotFound {
		t.Errorf("lock of an unknown server: %d %v", code, out)
	}
	if code, out := f.post("/console/api/lock/arm", map[string]string{"reason": "a person walks into the cell"}); code != http.StatusOK {
		t.Fatalf("lock: %d %v", code, out)
	}
	u := f.state()
	if u.Word != WordLocked || !strings.Contains(u.Header, "arm locked by alice: a person walks into the cell") {
		t.Fatalf("after a lock the header says %s: %s", u.Word, u.Header)
	}
	if !strings.Contains(u.Main, `data-action="unlock" data-server="arm"`) {
		t.Errorf("the lockout has no unlock button:\n%s", u.Main)
	}
	if rec := f.lastRecord("lock"); rec == nil || rec.Principal != "alice" {
		t.Errorf("lock audit record: %+v", rec)
	}

	// An unknown outcome on a server no longer configured: the unlock clears it, nothing restarts.
	if err := f.st.PutLockout(store.Lockout{Server: "old-arm", Tool: "old-arm__move", CallID: "c-7", Principal: "planner", Reason: "timed out"}); err != nil {
		t.Fatal(err)
	}
	if code, out := f.post("/console/api/unlock/old-arm", map[string]string{"reason": "  "}); code != http.StatusBadRequest {
		t.Errorf("unlock without a reason: %d %v", code, out)
	}
	if code, out := f.post("/console/api/unlock/cam", map[string]string{"reason": "x"}); code != http.StatusNotFound {
		t.Errorf("unlock of a server that is not locked: %d %v", code, out)
	}
	code, out := f.post("/console/api/unlock/old-arm", map[string]string{"reason": "inspected: the gripper is open and empty"})
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(out["message"]), "old-arm__move (call c-7, by planner)") {
		t.Fatalf("unlock: %d %v", code, out)
	}
	rec := f.lastRecord("unlock")
	if rec == nil || rec.Principal != "alice" || rec.Server != "old-arm" || rec.Reason != "inspected: the gripper is open and empty" {
		t.Errorf("unlock audit record: %+v", rec)
	}
}

func TestHaltFromTheConsole(t *testing.T) {
	f := newFixture(t, "")
	f.login(adminToken)
	if code, out := f.post("/console/api/halt", map[string]string{}); code != http.StatusBadRequest {
		t.Errorf("halt without a reason: %d %v", code, out)
	}
	if code, out := f.post("/console/api/halt", map[string]string{"reason": "smoke at the arm"}); code != http.StatusOK {
		t.Fatalf("halt: %d %v", code, out)
	}
	if u := f.state(); u.Word != WordHalted || !strings.Contains(u.Header, "halted by alice: smoke at the arm") {
		t.Errorf("after HALT the header says %s: %s", u.Word, u.Header)
	}
	if rec := f.lastRecord("halt"); rec == nil || rec.Principal != "alice" {
		t.Errorf("halt audit record: %+v", rec)
	}
}

func TestViewerSeesEverythingActsOnNothingButHalt(t *testing.T) {
	f := newFixture(t, "")
	putApproval(t, f.st, "ap-1", f.clock())
	f.login(viewerToken)
	_, body := f.get("/console/")
	if !strings.Contains(body, "victor (viewer)") || !strings.Contains(body, "arm__move") {
		t.Fatalf("the viewer's console:\n%s", body)
	}
	for _, absent := range []string{`data-action="unlock"`, `data-action="approve"`, `data-action="deny"`, `data-action="lock"`, `data-action="reload"`} {
		if strings.Contains(body, absent) {
			t.Errorf("the viewer is offered %s", absent)
		}
	}
	if !strings.Contains(body, `data-action="halt"`) {
		t.Errorf("the viewer has no HALT button")
	}
	for path, body := range map[string]any{
		"/console/api/lock/arm":               map[string]string{"reason": "x"},
		"/console/api/unlock/arm":             map[string]string{"reason": "x"},
		"/console/api/approvals/ap-1/approve": map[string]string{},
		"/console/api/approvals/ap-1/deny":    map[string]string{"reason": "x"},
		"/console/api/pins/arm/accept":        map[string]string{},
		"/console/api/reload":                 map[string]string{},
	} {
		if code, out := f.post(path, body); code != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d %v, want 403", path, code, out)
		}
	}
	if a, _, _ := f.st.GetApproval("ap-1"); a.State != store.ApprovalPending {
		t.Errorf("a viewer decided the approval: %s", a.State)
	}
	if code, out := f.post("/console/api/halt", map[string]string{"reason": "the viewer saw a person at the arm"}); code != http.StatusOK {
		t.Errorf("viewer HALT: %d %v", code, out)
	}
	if rec := f.lastRecord("halt"); rec == nil || rec.Principal != "victor" {
		t.Errorf("halt audit record: %+v", rec)
	}
	// A viewer signs out of a shared tablet like anyone.
	if code, out := f.post("/console/logout", map[string]string{}); code != http.StatusOK {
		t.Fatalf("viewer sign-out: %d %v", code, out)
	}
	if resp, _ := f.get("/console/state"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the viewer's session after signing out: %d", resp.StatusCode)
	}
}

func TestViewerMayNotHaltWhenConfigured(t *testing.T) {
	f := newFixture(t, "console: {viewer_may_halt: false}\n")
	f.login(viewerToken)
	if _, body := f.get("/console/"); strings.Contains(body, `data-action="halt"`) {
		t.Errorf("the viewer is offered HALT with viewer_may_halt: false")
	}
	if code, out := f.post("/console/api/halt", map[string]string{"reason": "x"}); code != http.StatusForbidden {
		t.Errorf("viewer HALT with viewer_may_halt: false: %d %v", code, out)
	}
}

func putApproval(t *testing.T, st *store.Store, id string, now time.Time) {
	t.Helper()
	err := st.PutApproval(store.Approval{ID: id, Digest: "d-" + id, Server: "arm", Tool: "arm__move", Principal: "planner", Rule: "move-needs-person",
		Reason: "a person watches <b>the arm</b>", Args: json.RawMessage(`{"speed":0.5,"pin":"[REDACTED]"}`),
		Created: now, Expires: now.Add(time.Minute), State: store.ApprovalPending})
	if err != nil {
		t.Fatal(err)
	}
}

func TestApproveAndDenyPendingCalls(t *testing.T) {
	f := newFixture(t, "")
	putApproval(t, f.st, "ap-1", f.clock())
	putApproval(t, f.st, "ap-2", f.clock())
	f.login(adminToken)
	u := f.state()
	for _, want := range []string{`data-approval="ap-1"`, "move-needs-person", "planner", `&#34;speed&#34;: 0.5`, "[REDACTED]",
		"a person watches &lt;b&gt;the arm&lt;/b&gt;", `data-countdown=`} {
		if !strings.Contains(u.Main, want) {
			t.Errorf("the pending approval lacks %q", want)
		}
	}
	if code, out := f.post("/console/api/approvals/ap-1/approve", map[string]string{}); code != http.StatusOK || out["detail"].(map[string]any)["state"] != "approved" {
		t.Fatalf("approve: %d %v", code, out)
	}
	if code, out := f.post("/console/api/approvals/ap-1/deny", map[string]string{"reason": "late"}); code != http.StatusConflict {
		t.Errorf("a second answer: %d %v", code, out)
	}
	if code, out := f.post("/console/api/approvals/ap-2/deny", map[string]string{}); code != http.StatusBadRequest {
		t.Errorf("deny without a reason: %d %v", code, out)
	}
	if code, out := f.post("/console/api/approvals/ap-2/deny", map[string]string{"reason": "the drawer is blocked"}); code != http.StatusOK {
		t.Fatalf("deny: %d %v", code, out)
	}
	if code, out := f.post("/console/api/approvals/ap-9/approve", map[string]string{}); code != http.StatusNotFound {
		t.Errorf("an unknown request: %d %v", code, out)
	}
	if rec := f.lastRecord("deny"); rec == nil || rec.Principal != "alice" || rec.Reason != "the drawer is blocked" {
		t.Errorf("deny audit record: %+v", rec)
	}
	if rec := f.lastRecord("approve"); rec == nil || rec.Principal != "alice" {
		t.Errorf("approve audit record: %+v", rec)
	}
	if u := f.state(); strings.Contains(u.Main, `data-approval=`) {
		t.Errorf("decided requests are still shown as pending")
	}
}

func TestChangedToolShowsItsDiffAsTextAndIsAccepted(t *testing.T) {
	f := newFixture(t, "")
	err := f.st.PutPin(store.Pin{Server: "arm", Tool: "move", Digest: "d1", Pinned: f.clock(),
		Definition:        json.RawMessage(`{"name":"move","description":"Move the arm.","inputSchema":{"type":"object"}}`),
		Pending:           "d2",
		PendingDefinition: json.RawMessage(`{"name":"move","description":"Move the arm. <script>alert(1)</script>","inputSchema":{"type":"object"}}`),
		Changed:           f.clock()})
	if err != nil {
		t.Fatal(err)
	}
	f.login(adminToken)
	u := f.state()
	if strings.Contains(u.Main, "<script>") || !strings.Contains(u.Main, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("the changed description is not shown as text:\n%s", u.Main)
	}
	if !strings.Contains(u.Main, `class="d del">-   &#34;description&#34;: &#34;Move the arm.&#34;,`) ||
		!strings.Contains(u.Main, `class="d add">&#43;   &#34;description&#34;: &#34;Move the arm. &lt;script&gt;`) {
		t.Errorf("the diff lacks its removed and added lines:\n%s", u.Main)
	}
	if !strings.Contains(u.Main, `data-digest="d2"`) {
		t.Errorf("the accept button does not carry the digest of what it shows:\n%s", u.Main)
	}
	// The definition changes again after the page showed it: accepting what was shown is
	// refused, and nothing is pinned.
	if err := f.st.PutPin(store.Pin{Server: "arm", Tool: "move", Digest: "d1", Pinned: f.clock(),
		Definition: json.RawMessage(`{"name":"move"}`), Pending: "d3",
		PendingDefinition: json.RawMessage(`{"name":"move","description":"ALWAYS move to the shelf first."}`), Changed: f.clock()}); err != nil {
		t.Fatal(err)
	}
	if code, out := f.post("/console/api/pins/arm/accept", map[string]string{"tool": "move", "digest": "d2"}); code != http.StatusConflict {
		t.Fatalf("accepting a definition that changed since it was shown: %d %v", code, out)
	}
	if p, _, _ := f.st.GetPin("arm", "move"); p.Digest != "d1" || p.Pending != "d3" {
		t.Fatalf("a refused acceptance changed the pin: %+v", p)
	}
	if code, out := f.post("/console/api/pins/arm/accept", map[string]string{"tool": "move", "digest": "d3"}); code != http.StatusOK {
		t.Fatalf("accept: %d %v", code, out)
	}
	if code, out := f.post("/console/api/pins/arm/accept", map[string]string{"tool": "move"}); code != http.StatusNotFound {
		t.Errorf("accept with nothing pending: %d %v", code, out)
	}
	if rec := f.lastRecord("pins_accept"); rec == nil || rec.Principal != "alice" {
		t.Errorf("pins_accept audit record: %+v", rec)
	}
	if u := f.state(); strings.Contains(u.Main, `data-pin=`) {
		t.Errorf("the accepted change is still held back")
	}
}

func TestReloadShowsWhyItWasRefused(t *testing.T) {
	f := newFixture(t, "")
	f.login(adminToken)
	if err := os.WriteFile(f.cfg.Path, []byte("servers:\n  - name: arm\n    comand: nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := f.post("/console/api/reload", map[string]string{})
	if code != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(out["error"]), "comand") || !strings.Contains(fmt.Sprint(out["error"]), "refused") {
		t.Fatalf("reload of a broken file: %d %v", code, out)
	}
	if rec := f.lastRecord("reload"); rec == nil || rec.Principal != "alice" || rec.Outcome != "refused" {
		t.Errorf("reload audit record: %+v", rec)
	}
}

func TestSessionExpires(t *testing.T) {
	f := newFixture(t, "console: {session_ttl: 1h}\n")
	f.login(adminToken)
	f.state()
	f.advance(time.Hour)
	if resp, _ := f.get("/console/state"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after the session's hour: %d", resp.StatusCode)
	}
	if code, _ := f.post("/console/api/lock/arm", map[string]string{"reason": "x"}); code != http.StatusUnauthorized {
		t.Errorf("an action after the session's hour: %d", code)
	}
}

func TestEventStreamSendsTheState(t *testing.T) {
	f := newFixture(t, "")
	f.login(adminToken)
	req, _ := http.NewRequest("GET", f.srv.URL+"/console/events", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := f.client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	buf := make([]byte, 64<<10)
	n, _ := io.ReadAtLeast(resp.Body, buf, 200)
	got := string(buf[:n])
	if !strings.HasPrefix(got, "event: state\ndata: {") || !strings.Contains(got, `"word":"DEGRADED"`) {
		t.Fatalf("first event: %.300s", got)
	}
	// Without a session the stream is refused.
	anon, _ := http.Get(f.srv.URL + "/console/events")
	anon.Body.Close()
	if anon.StatusCode != http.StatusUnauthorized {
		t.Errorf("events without a session: %d", anon.StatusCode)
	}
}

func TestAuditPageFiltersPagesAndShowsARecord(t *testing.T) {
	f := newFixture(t, "")
	for i := range 30 {
		p := "bob"
		if i%3 == 0 {
			p = "carol"
		}
		if _, err := f.st.Audit().AppendSync(context.Background(), store.Record{Type: store.RecordCall, Principal: p, Server: "arm",
			Tool: fmt.Sprintf("arm__t%d", i), Reason: "<img src=x onerror=alert(1)>", Args: json.RawMessage(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	f.login(adminToken)
	_, body := f.get("/console/audit?principal=carol&limit=4")
	rows := regexp.MustCompile(`<tr data-seq="(\d+)">`).FindAllStringSubmatch(body, -1)
	if len(rows) != 4 || strings.Contains(body, "<td>bob</td>") {
		t.Fatalf("carol's last 4 records: %d rows\n%s", len(rows), body)
	}
	if strings.Contains(body, "<img") {
		t.Errorf("a reason was rendered as HTML")
	}
	m := regexp.MustCompile(`href="(/console/audit\?[^"]+)" rel="next"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no link to older records")
	}
	_, older := f.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	olderRows := regexp.MustCompile(`<tr data-seq="(\d+)">`).FindAllStringSubmatch(older, -1)
	if len(olderRows) != 4 || atoi(olderRows[0][1]) >= atoi(rows[len(rows)-1][1]) {
		t.Errorf("the older page: %v after %v", olderRows, rows)
	}
	resp, rec := f.get("/console/audit/" + rows[0][1])
	if resp.StatusCode != http.StatusOK || !strings.Contains(rec, "Audit record "+rows[0][1]) || !strings.Contains(rec, "&#34;n&#34;: 1") {
		t.Errorf("record detail: %d\n%s", resp.StatusCode, rec)
	}
	if resp, _ := f.get("/console/audit/999999"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown record: %d", resp.StatusCode)
	}
	if resp, _ := f.get("/console/audit?since=yesterday"); resp.StatusCode != http.StatusOK {
		t.Errorf("a bad filter is shown, not failed: %d", resp.StatusCode)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc\nd\ne\nf\ng\nh\ni", "a\nb\nc\nd\ne\nf\ng\nH\ni")
	var s []string
	for _, l := range got {
		s = append(s, l.Op+l.Text)
	}
	want := "…|     e|     f|     g|-h|+H|     i"
	if strings.Join(s, "|") != strings.ReplaceAll(want, "     ", " ") {
		t.Errorf("Diff = %q", strings.Join(s, "|"))
	}
}
