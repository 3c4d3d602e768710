// Command benchpeers measures the gateway hop side by side with the fastest ungoverned Go MCP
// proxy, github.com/TBXark/mcp-proxy (issue 17), in one run: `make bench-peers`.
//
// It builds the gateway, the shared go-sdk bench client and echo server (../shared/bench) and,
// given its checkout, TBXark's proxy into a temporary folder, writes their configurations there
// (from the templates in configs.go), and drives the echo tool through each peer with the same
// client: the echo server directly (stdio and HTTP), TBXark (HTTP), the gateway without rules or
// guards (HTTP), the gateway with full governance (HTTP, and over stdio downstream). Rounds are
// interleaved (every peer once per round), and every figure in the table is the median of the
// rounds. Beside calls/s and latency it reads the proxy process's CPU time and memory from /proc
// and the cost of one fdatasync on the disk under the gateways' state, and runs the full gateway
// a second time with its state on tmpfs (where the audit's sync costs nothing), so that the
// share of durability in its figures is measured, not guessed. The gateways ask the echo server
// for the MCP revision TBXark asks for (tbxarkRevision), so that every proxy's pipe carries the
// same protocol, and the full gateway runs once more on its default revision, the newest, to show
// what that costs. After the rounds it traces the
// gateways at c=1 (critical.go) and prints where a call's time goes inside them. It exits
// non-zero only when something failed to run (a peer that did not start, errors in a run),
// never for a target missed.
//
// Linux only (/proc). Not run in CI; `go vet` compiles it, its trace analysis has a test, and
// so do the configurations it writes (configs_test.go: the gateway and TBXark take them).
package main

import (
	"bufio"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type options struct {
	benchDir, tbxarkDir string
	rounds, n, nMB      int
	warmup              int
	sessions            int
	curve               []int // session counts of the memory curve
	settle              time.Duration
	tmpfsDir            string // where the tmpfs peer keeps its state; empty for no such peer
	criticalPath        bool   // trace a call's critical path in the gateway at c=1
	// revision is the MCP revision the gateway peers ask the echo server for; empty for the
	// gateway's default. When set, the gw-full-newest peer runs on the default beside them.
	revision string
}

// tbxarkRevision is the MCP revision TBXark's mcp-proxy asks its servers for: the newest its
// MCP library (mark3labs/mcp-go v0.44) speaks. The gateway peers ask the echo server for the same
// by default, so that every proxy's upstream pipe carries the same protocol.
const tbxarkRevision = "2025-11-25"

// newestRevision is the gateway's default revision for its servers: the newest it speaks
// (revisions are dates, so the greatest string).
var newestRevision = slices.Max(mcp.SupportedProtocolVersions())

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}

func main() {
	var o options
	flag.StringVar(&o.benchDir, "bench-dir", envOr("BENCH_DIR", "../shared/bench"), "the shared bench module (bench client and echo server); env BENCH_DIR")
	flag.StringVar(&o.tbxarkDir, "tbxark-dir", os.Getenv("TBXARK_DIR"), "a checkout of github.com/TBXark/mcp-proxy; without it the TBXark peer and the ratios to it are left out; env TBXARK_DIR")
	flag.IntVar(&o.rounds, "rounds", envInt("ROUNDS", 3), "interleaved rounds; env ROUNDS")
	flag.IntVar(&o.n, "n", envInt("N", 2000), "calls per run; env N")
	flag.IntVar(&o.nMB, "n-mb", 0, "calls per 1 MB run (default N/40, at least 10)")
	flag.IntVar(&o.warmup, "warmup", 10, "warm-up calls per session before each bench invocation")
	flag.IntVar(&o.sessions, "sessions", 1000, "sessions (and workers) of the peak-RSS run")
	flag.DurationVar(&o.settle, "settle", 2*time.Second, "wait after a peer is ready before its idle RSS is read")
	flag.StringVar(&o.tmpfsDir, "tmpfs-dir", envOr("TMPFS_DIR", "/dev/shm"), "a folder on tmpfs for the state of the gateway-full peer whose audit sync costs nothing (the share of durability); skipped when it is not on tmpfs; empty for none; env TMPFS_DIR")
	flag.BoolVar(&o.criticalPath, "critical-path", true, "after the rounds, trace gateway-minimal, gateway-full and its tmpfs twin for 2 s each at c=1 and print where a call's time goes in the gateway")
	flag.StringVar(&o.revision, "upstream-revision", envOr("UPSTREAM_REVISION", tbxarkRevision), "the MCP revision the gateway peers ask the echo server for (servers[].protocol_version), by default the one TBXark asks for; \"default\" for the gateway's own default, the newest it speaks; env UPSTREAM_REVISION")
	curve := flag.String("curve", envOr("CURVE", "10,100,250,500"), "session counts of the memory curve (peak RSS of a fresh process per count; the -sessions run adds its point); empty for none; env CURVE")
	flag.Parse()
	for _, f := range strings.FieldsFunc(*curve, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "benchpeers: -curve: %q is not a number of sessions\n", f)
			os.Exit(2)
		}
		o.curve = append(o.curve, n)
	}
	if o.revision == "default" {
		o.revision = ""
	}
	if o.nMB <= 0 {
		o.nMB = max(o.n/40, 10)
	}
	if runtime.GOOS != "linux" {
		fmt.Fprintln(os.Stderr, "benchpeers: needs Linux (/proc)")
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "benchpeers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "\nbenchpeers: %v: stopping every child\n", s)
		stopAll()
		removeAll(tmp)
		os.Exit(130)
	}()
	err = benchPeers(o, tmp)
	stopAll()
	removeAll(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchpeers: FAILED:", err)
		os.Exit(1)
	}
}

// removeAtExit are folders made outside the temporary folder (the tmpfs peer's state).
var removeAtExit []string

func removeAll(tmp string) {
	for _, d := range append(removeAtExit, tmp) {
		_ = os.RemoveAll(d)
	}
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
}

// bins are the built programs.
type bins struct {
	gateway, bench, echo, tbxark string
}

func build(o options, tmp string) (bins, error) {
	binDir := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return bins{}, err
	}
	b := bins{
		gateway: filepath.Join(binDir, "mcp-gateway"),
		bench:   filepath.Join(binDir, "bench"),
		echo:    filepath.Join(binDir, "echo-server"),
	}
	root, err := moduleRoot()
	if err != nil {
		return b, err
	}
	benchDir, err := filepath.Abs(o.benchDir)
	if err != nil {
		return b, err
	}
	// The gateway is built as `make build` builds it (without cgo); the others as they come.
	type step struct {
		dir, out, pkg string
		env           []string
	}
	steps := []step{
		{root, b.gateway, "./cmd/mcp-gateway", []string{"CGO_ENABLED=0"}},
		{benchDir, b.bench, "./cmd/bench", nil},
		{benchDir, b.echo, "./cmd/echo-server", nil},
	}
	if o.tbxarkDir != "" {
		b.tbxark = filepath.Join(binDir, "tbxark")
		dir, err := filepath.Abs(o.tbxarkDir)
		if err != nil {
			return b, err
		}
		steps = append(steps, step{dir, b.tbxark, ".", nil})
	}
	for _, s := range steps {
		logf("build %s in %s", s.pkg, s.dir)
		cmd := exec.Command("go", "build", "-o", s.out, s.pkg)
		cmd.Dir = s.dir
		if s.env != nil {
			cmd.Env = append(os.Environ(), s.env...)
		}
		if out, err := run(cmd, nil); err != nil {
			return b, fmt.Errorf("go build %s in %s: %v\n%s", s.pkg, s.dir, err, out)
		}
	}
	return b, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the mcp-gateway module")
	}
	return filepath.Dir(mod), nil
}

// A peer is one way of reaching the echo tool.
type peer struct {
	key, name string
	kind      string // direct-stdio, direct-http, tbxark, gw-min, gw-full, gw-full-tmpfs, gw-full-newest, gw-full-stdio
	http      bool
	tool      string
	cmdline   string // stdio: the server command the bench client spawns
	cpuExe    string // stdio: the bench client's child whose CPU is counted
	pprof     bool   // gateway: the profiler on, behind e.token (the critical-path run)

	// the running server of an HTTP peer
	proc *exec.Cmd
	url  string

	rps, p50, cpu map[int][]float64 // by c, one per round (p50 and cpu in µs)
	// upCPU is the echo server's CPU per call behind a proxy (µs, by c, one per round).
	upCPU   map[int][]float64
	mbP50   []float64 // 1 MB run, p50 µs, one per round
	idleKB  int64
	peakKB  int64
	curveKB map[int]int64 // peak RSS by sessions (the memory curve)
}

type env struct {
	o       options
	tmp     string
	b       bins
	hz      int64
	hzKnown bool
	seq     int
	// tmpfsState is the folder on tmpfs for the gw-full-tmpfs peer's state, or empty.
	tmpfsState string
	// token is the admin token of a gateway whose profiler is on.
	token string
}

func benchPeers(o options, tmp string) error {
	for _, d := range []string{"cfg", "state", "logs"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	if strings.ContainsAny(tmp, " \t") {
		return fmt.Errorf("temporary folder %q has a space; the bench client splits -cmd on spaces", tmp)
	}
	b, err := build(o, tmp)
	if err != nil {
		return err
	}
	e := &env{o: o, tmp: tmp, b: b, token: rand.Text()}
	e.hz, e.hzKnown = clockTicks()
	e.tmpfsState = tmpfsFolder(o.tmpfsDir)
	start := time.Now()

	gwStdioCfg, err := e.gatewayConfig("gw-full-stdio", "127.0.0.1:0", true, "", false, o.revision)
	if err != nil {
		return err
	}
	peers := []*peer{
		{key: "direct-stdio", name: "direct, stdio", kind: "direct-stdio", tool: "echo", cmdline: b.echo, cpuExe: "echo-server"},
		{key: "direct-http", name: "direct, HTTP", kind: "direct-http", http: true, tool: "echo"},
	}
	if b.tbxark != "" {
		peers = append(peers, &peer{key: "tbxark", name: "TBXark mcp-proxy, HTTP", kind: "tbxark", http: true, tool: "echo"})
	}
	peers = append(peers,
		&peer{key: "gw-min", name: "gateway-minimal, HTTP", kind: "gw-min", http: true, tool: "echo__echo"},
		&peer{key: "gw-full", name: "gateway-full, HTTP", kind: "gw-full", http: true, tool: "echo__echo"},
	)
	if e.tmpfsState != "" {
		peers = append(peers, &peer{key: "gw-full-tmpfs", name: "gateway-full, HTTP, state on tmpfs", kind: "gw-full-tmpfs", http: true, tool: "echo__echo"})
	}
	if o.revision != "" {
		peers = append(peers, &peer{key: "gw-full-newest", name: "gateway-full, HTTP, upstream on the gateway's default revision", kind: "gw-full-newest", http: true, tool: "echo__echo"})
	}
	peers = append(peers,
		&peer{key: "gw-full-stdio", name: "gateway-full, stdio", kind: "gw-full-stdio", tool: "echo__echo",
			cmdline: b.gateway + " serve --stdio -c " + gwStdioCfg, cpuExe: "mcp-gateway"},
	)
	for _, p := range peers {
		p.rps, p.p50, p.cpu, p.upCPU = map[int][]float64{}, map[int][]float64{}, map[int][]float64{}, map[int][]float64{}
	}

	fsync1, err := fsyncCost(filepath.Join(tmp, "state"), 100, 0)
	if err != nil {
		return err
	}
	spaced1, err := fsyncCost(filepath.Join(tmp, "state"), 100, time.Millisecond)
	if err != nil {
		return err
	}
	logf("fdatasync of 4 KB: median %.0f µs back to back, %.0f µs 1 ms apart (first 100 each)", median(fsync1), median(spaced1))

	// Idle and peak RSS: a fresh process per peer, so that VmHWM is of the 1000-session run.
	for _, p := range peers {
		if !p.http || p.kind == "gw-full-tmpfs" || p.kind == "gw-full-newest" {
			continue // its memory is gw-full's
		}
		if err := e.launch(p); err != nil {
			return err
		}
		time.Sleep(o.settle)
		rss, _, err := memKB(p.proc.Process.Pid)
		if err != nil {
			return err
		}
		p.idleKB = rss
		if err := e.ready(p); err != nil {
			return err
		}
		logf("%s: idle RSS %.1f MB; %d sessions…", p.key, mb(rss), o.sessions)
		r, err := e.bench(p, benchArgs{c: o.sessions, sessions: o.sessions, n: 5 * o.sessions, warmup: 1, runs: 1, size: 16})
		if err != nil {
			return fmt.Errorf("%s, %d sessions: %v", p.key, o.sessions, err)
		}
		_, hwm, err := memKB(p.proc.Process.Pid)
		if err != nil {
			return err
		}
		p.peakKB = hwm
		p.curveKB = map[int]int64{o.sessions: hwm}
		logf("%s: %d sessions: %.0f calls/s, errors 0, peak RSS %.1f MB", p.key, o.sessions, r.rps, mb(hwm))
		stop(p.proc, 15*time.Second)
		p.proc = nil
		// The memory curve: the same run at fewer sessions, each on a fresh process.
		for _, n := range o.curve {
			if n == o.sessions {
				continue
			}
			if err := e.launch(p); err != nil {
				return err
			}
			if err := e.ready(p); err != nil {
				return err
			}
			if _, err := e.bench(p, benchArgs{c: n, sessions: n, n: 5 * n, warmup: 1, runs: 1, size: 16}); err != nil {
				return fmt.Errorf("%s, %d sessions: %v", p.key, n, err)
			}
			if _, p.curveKB[n], err = memKB(p.proc.Process.Pid); err != nil {
				return err
			}
			logf("%s: %d sessions: peak RSS %.1f MB", p.key, n, mb(p.curveKB[n]))
			stop(p.proc, 15*time.Second)
			p.proc = nil
		}
	}

	// The interleaved rounds, on one long-running process per HTTP peer.
	for _, p := range peers {
		if p.http {
			if err := e.launch(p); err != nil {
				return err
			}
			if err := e.ready(p); err != nil {
				return err
			}
		}
	}
	concurrencies := []int{1, 8, 32}
	for round := 0; round < o.rounds; round++ {
		for _, c := range concurrencies {
			for i := range peers {
				p := peers[(i+round)%len(peers)] // a different peer first in each round
				a := benchArgs{c: c, n: o.n, warmup: o.warmup, runs: 2, size: 16}
				if !p.http {
					a.sessions = 1 // one stdio session (one pipe) shared by the workers
				}
				r, err := e.bench(p, a)
				if err != nil {
					return fmt.Errorf("%s, c=%d, round %d: %v", p.key, c, round+1, err)
				}
				p.rps[c] = append(p.rps[c], r.rps)
				p.p50[c] = append(p.p50[c], r.p50)
				if r.cpuOK {
					p.cpu[c] = append(p.cpu[c], r.cpuPerCall)
				}
				if r.upCPUOK {
					p.upCPU[c] = append(p.upCPU[c], r.upCPUPerCall)
				}
				logf("round %d c=%-2d %-14s %6.0f calls/s  p50 %6.0f µs  cpu/call %s", round+1, c, p.key, r.rps, r.p50, cpuText(r))
			}
		}
		for _, p := range peers {
			if p.kind != "tbxark" && p.kind != "gw-full" && p.kind != "gw-full-tmpfs" {
				continue
			}
			r, err := e.bench(p, benchArgs{c: 1, n: o.nMB, warmup: 2, runs: 2, size: 1 << 20})
			if err != nil {
				return fmt.Errorf("%s, 1 MB, round %d: %v", p.key, round+1, err)
			}
			p.mbP50 = append(p.mbP50, r.p50)
			logf("round %d 1 MB %-14s %6.0f calls/s  p50 %6.0f µs", round+1, p.key, r.rps, r.p50)
		}
	}
	for _, p := range peers {
		if p.proc != nil {
			stop(p.proc, 15*time.Second)
			p.proc = nil
		}
	}
	// The critical paths come last: one that cannot be traced fails the run after the table is
	// printed, not instead of it.
	var (
		paths   []namedPath
		pathErr error
	)
	if o.criticalPath {
		for _, p := range peers {
			if p.kind != "gw-min" && p.kind != "gw-full" && p.kind != "gw-full-tmpfs" {
				continue
			}
			cp, err := e.traceCriticalPath(p)
			if err != nil {
				pathErr = fmt.Errorf("%s, critical path: %v", p.key, err)
				logf("%v", pathErr)
				break
			}
			paths = append(paths, namedPath{p.name, cp})
		}
	}
	fsync2, err := fsyncCost(filepath.Join(tmp, "state"), 100, 0)
	if err != nil {
		return err
	}
	spaced2, err := fsyncCost(filepath.Join(tmp, "state"), 100, time.Millisecond)
	if err != nil {
		return err
	}
	report(os.Stdout, e, peers, syncCosts{loop: append(fsync1, fsync2...), spaced: append(spaced1, spaced2...)}, paths, time.Since(start))
	return pathErr
}

func (e *env) port() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// gatewayConfig writes a gateway configuration with a fresh state dir (in stateRoot, or the
// temporary folder's state/ when empty) and returns its path.
func (e *env) gatewayConfig(name, listen string, full bool, stateRoot string, pprof bool, revision string) (string, error) {
	e.seq++
	id := fmt.Sprintf("%s-%d", name, e.seq)
	path := filepath.Join(e.tmp, "cfg", id+".yaml")
	if stateRoot == "" {
		stateRoot = filepath.Join(e.tmp, "state")
	}
	c := gatewayConfig{
		Name: id, Listen: listen, StateDir: filepath.Join(stateRoot, id), Echo: e.b.echo,
		MaxSessions: 2 * e.o.sessions, MaxConnections: 2 * e.o.sessions, Full: full, Revision: revision,
	}
	if pprof {
		c.TokenEnv = adminTokenEnv
	}
	err := writeTemplate(path, gatewayTemplate, c)
	return path, err
}

// launch starts a fresh server process for an HTTP peer and waits for it to listen (and, for
// the gateway, to be ready); it makes no MCP request.
func (e *env) launch(p *peer) error {
	addr, err := e.port()
	if err != nil {
		return err
	}
	var cmd *exec.Cmd
	healthz := ""
	switch p.kind {
	case "direct-http":
		cmd = exec.Command(e.b.echo, "-http", addr)
		p.url = "http://" + addr + "/mcp"
	case "tbxark":
		e.seq++
		cfg := filepath.Join(e.tmp, "cfg", fmt.Sprintf("tbxark-%d.json", e.seq))
		if err := writeTemplate(cfg, tbxarkTemplate, tbxarkConfig{Addr: addr, Echo: e.b.echo}); err != nil {
			return err
		}
		cmd = exec.Command(e.b.tbxark, "-config", cfg)
		p.url = "http://" + addr + "/echo/mcp"
	case "gw-min", "gw-full", "gw-full-tmpfs", "gw-full-newest":
		root := ""
		if p.kind == "gw-full-tmpfs" {
			root = e.tmpfsState
		}
		revision := e.o.revision
		if p.kind == "gw-full-newest" {
			revision = ""
		}
		cfg, err := e.gatewayConfig(p.kind, addr, p.kind != "gw-min", root, p.pprof, revision)
		if err != nil {
			return err
		}
		cmd = exec.Command(e.b.gateway, "serve", "-c", cfg)
		if p.pprof {
			cmd.Env = append(os.Environ(), adminTokenEnv+"="+e.token)
		}
		p.url = "http://" + addr + "/mcp"
		healthz = "http://" + addr + "/readyz"
	default:
		return fmt.Errorf("%s is not an HTTP peer", p.key)
	}
	e.seq++
	logPath := filepath.Join(e.tmp, "logs", fmt.Sprintf("%s-%d.log", p.key, e.seq))
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	err = start(cmd)
	lf.Close()
	if err != nil {
		return fmt.Errorf("%s: start: %v", p.key, err)
	}
	p.proc = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		if zombie(cmd.Process.Pid) {
			return fmt.Errorf("%s did not start: it exited\n%s", p.key, tail(logPath))
		}
		if healthz != "" {
			if resp, err := http.Get(healthz); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		} else if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start within 30s\n%s", p.key, tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready waits until the bench client lists the peer's tool.
func (e *env) ready(p *peer) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := run(exec.Command(e.b.bench, "-transport", "http", "-url", p.url, "-list"), nil)
		if err == nil && strings.Contains(string(out), fmt.Sprintf("tool %q", p.tool)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s at %s does not list the tool %s: %v\n%s", p.key, p.url, p.tool, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

type benchArgs struct {
	c, sessions, n, warmup, runs, size int
}

type benchResult struct {
	rps, p50   float64 // of the last run; p50 in µs
	cpuPerCall float64 // µs of the proxy process per call in the last run
	cpuOK      bool
	// upCPUPerCall is the echo server's, behind a proxy.
	upCPUPerCall float64
	upCPUOK      bool
}

var runLine = regexp.MustCompile(`run (\d+): c=\d+ sessions=\d+ n=(\d+) err=(\d+)\s+(\d+) calls/s\s+p50=(\d+)µs`)

// bench runs the bench client against p. With runs ≥ 2 the proxy's CPU time is read when the
// client prints the second-last run and again when it prints the last, so the CPU per call is
// of the last run's calls alone (no connects, no warm-up); the figures are of the last run.
func (e *env) bench(p *peer, a benchArgs) (benchResult, error) {
	args := []string{"-tool", p.tool, "-c", strconv.Itoa(a.c), "-n", strconv.Itoa(a.n),
		"-warmup", strconv.Itoa(a.warmup), "-runs", strconv.Itoa(a.runs), "-size", strconv.Itoa(a.size), "-label", p.key}
	if a.sessions > 0 {
		args = append(args, "-sessions", strconv.Itoa(a.sessions))
	}
	if p.http {
		args = append(args, "-transport", "http", "-url", p.url)
	} else {
		args = append(args, "-transport", "stdio", "-cmd", p.cmdline)
	}
	cmd := exec.Command(e.b.bench, args...)
	var stderr strings.Builder
	cmd.Stderr = &limited{w: &stderr, n: 8 << 10}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return benchResult{}, err
	}
	if err := start(cmd); err != nil {
		return benchResult{}, err
	}
	var (
		res       benchResult
		out       strings.Builder
		errs      int
		seen      int
		t0        int64
		t0OK      bool
		cpuPid    int
		lastCalls int
		upPid     int
		up0       int64
		up0OK     bool
	)
	if p.http && p.proc != nil {
		cpuPid = p.proc.Process.Pid
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if out.Len() < 16<<10 {
			out.WriteString(line + "\n")
		}
		m := runLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seen++
		if cpuPid == 0 && p.cpuExe != "" {
			cpuPid = descendant(cmd.Process.Pid, p.cpuExe)
		}
		var ticks int64
		var tickErr error = errors.New("no process")
		if cpuPid != 0 {
			ticks, tickErr = cpuTicks(cpuPid)
		}
		// Behind a proxy, the echo server is the proxy's child.
		if upPid == 0 && cpuPid != 0 && !strings.HasPrefix(p.kind, "direct") {
			upPid = descendant(cpuPid, "echo-server")
		}
		var upTicks int64
		var upErr error = errors.New("no process")
		if upPid != 0 {
			upTicks, upErr = cpuTicks(upPid)
		}
		calls, _ := strconv.Atoi(m[2])
		nerr, _ := strconv.Atoi(m[3])
		errs += nerr
		switch seen {
		case a.runs - 1:
			t0, t0OK = ticks, tickErr == nil
			up0, up0OK = upTicks, upErr == nil
		case a.runs:
			res.rps, _ = strconv.ParseFloat(m[4], 64)
			res.p50, _ = strconv.ParseFloat(m[5], 64)
			lastCalls = calls
			if t0OK && tickErr == nil && a.runs >= 2 && calls > 0 {
				res.cpuPerCall = float64(ticks-t0) / float64(e.hz) * 1e6 / float64(calls)
				res.cpuOK = true
			}
			if up0OK && upErr == nil && a.runs >= 2 && calls > 0 {
				res.upCPUPerCall = float64(upTicks-up0) / float64(e.hz) * 1e6 / float64(calls)
				res.upCPUOK = true
			}
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := wait(cmd)
	switch {
	case werr != nil:
		return res, fmt.Errorf("bench client: %v\n%s%s", werr, out.String(), stderr.String())
	case seen != a.runs || lastCalls == 0:
		return res, fmt.Errorf("bench client printed %d of %d runs\n%s%s", seen, a.runs, out.String(), stderr.String())
	case errs != 0:
		return res, fmt.Errorf("%d calls failed\n%s%s", errs, out.String(), stderr.String())
	}
	return res, nil
}

type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.n -= k
		_, _ = l.w.Write(b[:k])
	}
	return len(b), nil
}

// fsyncCost times a 4 KB write and its fdatasync in a file in dir, times times, in µs, with
// gap between one and the next. The gateway's audit commits with one such sync (the write-ahead
// file's) before a call is answered. Back to back (gap 0) the disk is kept busy; at c=1 the
// gateway's syncs come about 1 ms apart, and a sync on an idle disk, whose thread and CPU
// went to sleep meanwhile, takes longer: both are measured.
func fsyncCost(dir string, times int, gap time.Duration) ([]float64, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const page = 4096
	const pages = 256
	if _, err := f.Write(make([]byte, page*pages)); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	buf := make([]byte, page)
	var d []float64
	for i := 0; i < times; i++ {
		buf[0] = byte(i)
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i%pages)*page); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		d = append(d, float64(time.Since(t).Nanoseconds())/1e3)
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	return d, nil
}

// tmpfsFolder makes a fresh folder in dir when dir is on tmpfs; "" when dir is empty or not a
// writable tmpfs (the tmpfs peer is then left out).
func tmpfsFolder(dir string) string {
	if dir == "" {
		return ""
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != 0x01021994 { // TMPFS_MAGIC
		logf("%s is not a tmpfs: the gateway-full peer with its state on tmpfs is left out", dir)
		return ""
	}
	d, err := os.MkdirTemp(dir, "benchpeers-state-")
	if err != nil {
		logf("%s: %v: the gateway-full peer with its state on tmpfs is left out", dir, err)
		return ""
	}
	removeAtExit = append(removeAtExit, d)
	return d
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mb(kb int64) float64 { return float64(kb) / 1024 }

func cpuText(r benchResult) string {
	if !r.cpuOK {
		return "–"
	}
	t := fmt.Sprintf("%.0f µs", r.cpuPerCall)
	if r.upCPUOK {
		t += fmt.Sprintf(" (echo server %.0f µs)", r.upCPUPerCall)
	}
	return t
}
