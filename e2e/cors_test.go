package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// corsPage is served by a test server (an origin of its own); run() calls the gateway's /mcp as
// a browser client of streamable HTTP does: initialize, read Mcp-Session-Id from the answer,
// notifications/initialized, then tools/list with the session. It resolves to the tool names,
// or to "failed: …" when the browser refuses.
const corsPage = `<!doctype html>
<title>cell console</title>
<script>
const gateway = %q;
async function rpc(body, session) {
  const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
  if (session) headers["Mcp-Session-Id"] = session;
  const resp = await fetch(gateway, {method: "POST", headers, body: JSON.stringify(body)});
  const text = await resp.text();
  const data = text.split("\n").filter(l => l.startsWith("data: ")).map(l => l.slice(6)).join("") || text;
  return {session: resp.headers.get("Mcp-Session-Id"), status: resp.status, msg: data ? JSON.parse(data) : null};
}
async function run() {
  try {
    const init = await rpc({jsonrpc: "2.0", id: 1, method: "initialize",
      params: {protocolVersion: "2025-06-18", capabilities: {}, clientInfo: {name: "console", version: "1"}}});
    if (!init.session) return "failed: no Mcp-Session-Id readable, HTTP " + init.status;
    await rpc({jsonrpc: "2.0", method: "notifications/initialized"}, init.session);
    const list = await rpc({jsonrpc: "2.0", id: 2, method: "tools/list"}, init.session);
    return "tools: " + list.msg.result.tools.map(t => t.name).sort().join(",");
  } catch (e) {
    return "failed: " + e;
  }
}
</script>`

// TestBrowserPageOfAnAllowedOriginCallsMCP drives a headless Chromium: a page of an origin in
// gateway.allowed_origins lists the tools through /mcp (preflight, session header exposed); a
// page of another origin cannot, and the gateway refused it.
func TestBrowserPageOfAnAllowedOriginCallsMCP(t *testing.T) {
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
	gatewayAddr := freeAddr(t)
	page := func() *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, corsPage, "http://"+gatewayAddr+"/mcp")
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	allowed, foreign := page(), page()
	cfg, _ := writeConfig(t, fmt.Sprintf(`
gateway:
  listen: %q
  allowed_origins: [%q]
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`, gatewayAddr, allowed.URL))
	startGateway(t, cfg, gatewayAddr)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()

	run := func(pageURL string) string {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
			t.Fatalf("driving chromium to %s: %v", pageURL, err)
		}
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`run()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("driving chromium at %s: %v", pageURL, err)
		}
		return out
	}
	if got := run(allowed.URL); !strings.HasPrefix(got, "tools: ") || !strings.Contains(got, "robot__navigate_to") {
		t.Errorf("the page of the allowed origin %s: %s", allowed.URL, got)
	}
	if got := run(foreign.URL); !strings.HasPrefix(got, "failed: ") {
		t.Errorf("the page of the foreign origin %s reached the gateway: %s", foreign.URL, got)
	}
	if v, _ := scrape(t, gatewayAddr).value("mcp_gateway_protocol_refusals_total", "reason=missing_session"); v != 0 {
		t.Errorf("the browser's calls were refused for a missing session %v times", v)
	}
}
