package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// The critical path of a call at c=1: where the goroutine that serves the client's HTTP
// connection spends a call, read from a runtime trace of the gateway (its pprof endpoint's
// /admin/debug/pprof/trace) while the bench client makes one call at a time. At c=1 that
// goroutine carries the whole call inside the gateway: it reads the request, runs the chain,
// writes to the upstream, waits for the answer, writes the audit record and answers, then waits
// for the client's next request. Each stretch between two of its state transitions is named by
// what it was (running, in a system call, waiting, runnable) and by the first frame of the
// gateway or of net/http at its ends, so the table says, for instance, how long the audit's
// write took and how long the gateway's own code ran before the call went upstream.

// pathRow is one kind of stretch on the critical path.
type pathRow struct {
	What    string
	PerCall float64 // how many of them a call has
	Median  float64 // µs
	Total   float64 // µs, all of them over the trace
}

// criticalPath is the analysis of one trace.
type criticalPath struct {
	Calls   int     // calls in the trace: the stretches waiting at the call marker
	PerCall float64 // µs of the serving goroutine's traced time per call, the client's included
	Rows    []pathRow
}

// frameSkip are the packages a stretch is not named by: the runtime and the plumbing under
// the code that decides.
var frameSkip = []string{"runtime.", "internal/", "syscall.", "sync.", "os.", "net.", "bufio.", "io.", "context."}

// site is the first frame of s outside frameSkip, without the gateway's module path; "" when
// the stack has none.
func site(s trace.Stack) string {
	for f := range s.Frames() {
		skip := false
		for _, p := range frameSkip {
			if strings.HasPrefix(f.Func, p) {
				skip = true
				break
			}
		}
		if !skip {
			return strings.TrimPrefix(f.Func, "github.com/mcp-gateway/mcp-gateway/")
		}
	}
	return ""
}

// goTransition is one state transition of a goroutine.
type goTransition struct {
	t    trace.Time
	to   trace.GoState
	site string // where it happened: the goroutine's own stack, or the waker's
	conn bool   // the goroutine's stack is in net/http's connection loop
}

// analyzeTrace reads a runtime trace and returns the critical path of the goroutine that
// serves an HTTP connection (the one with the most transitions under net/http.(*conn).serve).
// callMarker is part of the name of the function in which that goroutine waits for the
// upstream, once per call; the stretches waiting there count the calls.
func analyzeTrace(r io.Reader, callMarker string) (criticalPath, error) {
	rd, err := trace.NewReader(r)
	if err != nil {
		return criticalPath{}, fmt.Errorf("runtime trace: %w", err)
	}
	byG := map[trace.GoID][]goTransition{}
	for {
		ev, err := rd.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return criticalPath{}, fmt.Errorf("runtime trace: %w", err)
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		_, to := st.Goroutine()
		g := st.Resource.Goroutine()
		tr := goTransition{t: ev.Time(), to: to, site: site(st.Stack)}
		if tr.site == "" {
			tr.site = site(ev.Stack()) // a wake-up: the stack of the goroutine that woke it
		}
		for _, s := range []trace.Stack{st.Stack, ev.Stack()} {
			for f := range s.Frames() {
				if f.Func == "net/http.(*conn).serve" {
					tr.conn = true
				}
			}
		}
		byG[g] = append(byG[g], tr)
	}
	var (
		serving []goTransition
		most    int
	)
	for _, trs := range byG {
		n := 0
		for _, tr := range trs {
			if tr.conn {
				n++
			}
		}
		if n > most {
			most, serving = n, trs
		}
	}
	if len(serving) < 2 {
		return criticalPath{}, errors.New("runtime trace: no goroutine serving an HTTP connection")
	}
	stretches := map[string][]float64{}
	calls := 0
	last := "" // the last site seen: where a stretch of running began
	for i := 0; i+1 < len(serving); i++ {
		a, b := serving[i], serving[i+1]
		if a.site != "" {
			last = a.site
		}
		d := float64(b.t-a.t) / 1e3
		var what string
		switch a.to {
		case trace.GoRunning:
			what = fmt.Sprintf("running, from %s to %s", orUnknown(last), orUnknown(b.site))
		case trace.GoSyscall:
			what = "system call in " + orUnknown(a.site)
		case trace.GoWaiting:
			what = "waiting in " + orUnknown(a.site)
			if callMarker != "" && strings.Contains(a.site, callMarker) {
				calls++
			}
		case trace.GoRunnable:
			what = "runnable (not yet running), woken by " + orUnknown(a.site)
		default:
			what = a.to.String()
		}
		stretches[what] = append(stretches[what], d)
	}
	if calls == 0 {
		return criticalPath{}, fmt.Errorf("runtime trace: the serving goroutine never waited in %s", callMarker)
	}
	cp := criticalPath{Calls: calls}
	var all float64
	for what, ds := range stretches {
		var sum float64
		for _, d := range ds {
			sum += d
		}
		all += sum
		cp.Rows = append(cp.Rows, pathRow{What: what, PerCall: float64(len(ds)) / float64(calls), Median: median(ds), Total: sum})
	}
	cp.PerCall = all / float64(calls)
	sort.Slice(cp.Rows, func(i, j int) bool { return cp.Rows[i].Total > cp.Rows[j].Total })
	return cp, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "(no frame)"
	}
	return s
}

// printCriticalPath writes the rows that hold most of the time, and what the rest add up to.
func printCriticalPath(w io.Writer, name string, cp criticalPath, rows int) {
	fmt.Fprintf(w, "\n%s: %d calls traced, %.0f µs of the serving goroutine's time per call (the wait for the client's next request included):\n\n", name, cp.Calls, cp.PerCall)
	fmt.Fprintln(w, "| stretch | per call | median µs | µs per call |")
	fmt.Fprintln(w, "|---|---|---|---|")
	var rest float64
	for i, r := range cp.Rows {
		if i >= rows {
			rest += r.Total
			continue
		}
		fmt.Fprintf(w, "| %s | %.2f | %.1f | %.1f |\n", r.What, r.PerCall, r.Median, r.Total/float64(cp.Calls))
	}
	if rest > 0 {
		fmt.Fprintf(w, "| the %d other kinds | | | %.1f |\n", len(cp.Rows)-rows, rest/float64(cp.Calls))
	}
}

// namedPath is the critical path of one peer.
type namedPath struct {
	name string
	cp   criticalPath
}

// callMarker is where the gateway's goroutine serving a call waits for a stdio upstream's
// answer: once per call on the fast path.
const callMarker = "upstream.(*stdioConn).callTool"

// traceCriticalPath starts a fresh gateway of p's kind with its profiler on, runs the bench
// client at c=1 for about four seconds, takes a runtime trace of two of them, and analyzes it.
func (e *env) traceCriticalPath(p *peer) (criticalPath, error) {
	tp := &peer{key: p.key + "-trace", name: p.name, kind: p.kind, http: true, tool: p.tool, pprof: true}
	if err := e.launch(tp); err != nil {
		return criticalPath{}, err
	}
	defer func() {
		stop(tp.proc, 15*time.Second)
		tp.proc = nil
	}()
	if err := e.ready(tp); err != nil {
		return criticalPath{}, err
	}
	// Enough calls for the run to outlast the trace, from the rate the rounds measured.
	n := max(2000, int(4*median(p.rps[1])))
	done := make(chan error, 1)
	go func() {
		_, err := e.bench(tp, benchArgs{c: 1, n: n, warmup: e.o.warmup, runs: 1, size: 16})
		done <- err
	}()
	time.Sleep(time.Second)
	body, terr := e.fetchTrace(strings.TrimSuffix(tp.url, "/mcp"), 2)
	if err := <-done; err != nil {
		return criticalPath{}, fmt.Errorf("bench client: %v", err)
	}
	if terr != nil {
		return criticalPath{}, terr
	}
	logf("%s: runtime trace of 2 s at c=1, %d KB", tp.key, len(body)>>10)
	return analyzeTrace(bytes.NewReader(body), callMarker)
}

// fetchTrace takes a runtime trace of seconds from the gateway at base.
func (e *env) fetchTrace(base string, seconds int) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/admin/debug/pprof/trace?seconds=%d", base, seconds), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("runtime trace: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("runtime trace: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("runtime trace: %s: %.300s", resp.Status, body)
	}
	return body, nil
}
