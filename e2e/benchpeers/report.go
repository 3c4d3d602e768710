package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// syncCosts are the timings of a 4 KB write and its fdatasync (fsyncCost), in µs: back to back,
// and 1 ms apart as at c=1.
type syncCosts struct{ loop, spaced []float64 }

func report(w io.Writer, e *env, peers []*peer, syncs syncCosts, paths []namedPath, took time.Duration) {
	o := e.o
	byKind := map[string]*peer{}
	for _, p := range peers {
		byKind[p.kind] = p
	}
	fs, spaced := median(syncs.loop), median(syncs.spaced)
	fmt.Fprintf(w, "\n%d interleaved rounds, %d calls per run (%d per 1 MB run), %d-session run for peak RSS; took %s.\n\n",
		o.rounds, o.n, o.nMB, o.sessions, took.Round(time.Second))
	fmt.Fprintf(w, "| peer | calls/s c=1 | calls/s c=8 | calls/s c=32 | p50 c=1 | CPU/call c=8 | echo server's CPU/call c=8 | idle RSS | peak RSS %d sessions | 1 MB p50 |\n", o.sessions)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, p := range peers {
		cpu := "–"
		if v := p.cpu[8]; len(v) > 0 {
			cpu = fmt.Sprintf("%.0f µs", median(v))
			if p.kind == "direct-stdio" || p.kind == "direct-http" {
				cpu += " (server)"
			}
		}
		idle, peak := "–", "–"
		if p.idleKB > 0 {
			idle = fmt.Sprintf("%.1f MB", mb(p.idleKB))
		}
		if p.peakKB > 0 {
			peak = fmt.Sprintf("%.1f MB", mb(p.peakKB))
		}
		up := "–"
		if v := p.upCPU[8]; len(v) > 0 {
			up = fmt.Sprintf("%.0f µs", median(v))
		}
		mbp := "–"
		if len(p.mbP50) > 0 {
			mbp = fmt.Sprintf("%.1f ms", median(p.mbP50)/1e3)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f µs | %s | %s | %s | %s | %s |\n", p.name,
			median(p.rps[1]), median(p.rps[8]), median(p.rps[32]), median(p.p50[1]), cpu, up, idle, peak, mbp)
	}
	fmt.Fprintf(w, "\nfdatasync of a 4 KB write on the disk under the gateways' state: median %.0f µs back to back, %.0f µs 1 ms apart (%d samples each, before and after the rounds).\n", fs, spaced, len(syncs.loop))
	memoryCurve(w, peers)

	fmt.Fprintln(w, "\nRatios (of the medians above):")
	full, fullStdio, tbx, tmpfs, newest := byKind["gw-full"], byKind["gw-full-stdio"], byKind["tbxark"], byKind["gw-full-tmpfs"], byKind["gw-full-newest"]
	line := func(what string, v float64, target string, met bool, extra string) {
		m := "not met"
		if met {
			m = "met"
		}
		fmt.Fprintf(w, "- %s: **%.2f** (target %s): %s%s\n", what, v, target, m, extra)
	}
	noTBX := func(what string) { fmt.Fprintf(w, "- %s: TBXark was not given (TBXARK_DIR)\n", what) }
	for _, c := range []int{8, 32} {
		what := fmt.Sprintf("gateway-full / TBXark calls/s at c=%d", c)
		if tbx == nil {
			noTBX(what)
			continue
		}
		v := median(full.rps[c]) / median(tbx.rps[c])
		stretch := " (stretch 1.2: not met)"
		if v >= 1.2 {
			stretch = " (stretch 1.2: met)"
		}
		line(what, v, "≥ 1.0, stretch 1.2", v >= 1.0, stretch)
	}
	for _, c := range []int{1, 8, 32} {
		v := median(fullStdio.rps[c]) / median(full.rps[c])
		line(fmt.Sprintf("gateway-full over stdio / gateway-full over HTTP calls/s at c=%d", c), v, "≥ 1.0", v >= 1.0, "")
	}
	if tbx == nil || len(full.cpu[8]) == 0 || len(tbx.cpu[8]) == 0 {
		noTBX("CPU per call at c=8, gateway-full / TBXark")
	} else {
		v := median(full.cpu[8]) / median(tbx.cpu[8])
		line("CPU per call at c=8, gateway-full / TBXark", v, "≤ 1.0", v <= 1.0, "")
	}
	if tbx == nil {
		noTBX("p50 at c=1, gateway-full / (1.1 × TBXark + one fdatasync)")
	} else {
		t := median(tbx.p50[1])
		g := median(full.p50[1])
		v := g / (1.1*t + fs)
		line("p50 at c=1, gateway-full / (1.1 × TBXark + one fdatasync)", v, "≤ 1.0", v <= 1.0,
			fmt.Sprintf(" (%.0f µs / (1.1 × %.0f µs + %.0f µs))", g, t, fs))
		v2 := g / (1.1 * t)
		line("the same without the fdatasync, gateway-full / (1.1 × TBXark)", v2, "≤ 1.0", v2 <= 1.0, "")
		v3 := g / (1.1*t + spaced)
		line("the same with the fdatasync 1 ms apart, as at c=1", v3, "≤ 1.0", v3 <= 1.0,
			fmt.Sprintf(" (%.0f µs / (1.1 × %.0f µs + %.0f µs))", g, t, spaced))
		if tmpfs != nil {
			d := g - median(tmpfs.p50[1])
			v4 := g / (1.1*t + d)
			line("the same with what durability costs the gateway's p50 (gateway-full on disk − on tmpfs)", v4, "≤ 1.0", v4 <= 1.0,
				fmt.Sprintf(" (%.0f µs / (1.1 × %.0f µs + %.0f µs))", g, t, d))
		}
	}
	if tmpfs != nil && tbx != nil {
		fmt.Fprintln(w, "- gateway-full with its state on tmpfs (the audit's sync costs nothing; everything else the same) / TBXark:")
		for _, c := range []int{8, 32} {
			fmt.Fprintf(w, "  - calls/s at c=%d: %.2f (on disk %.2f)\n", c, median(tmpfs.rps[c])/median(tbx.rps[c]), median(full.rps[c])/median(tbx.rps[c]))
		}
		if len(tmpfs.cpu[8]) > 0 && len(full.cpu[8]) > 0 && len(tbx.cpu[8]) > 0 {
			ft, fd, tb := median(tmpfs.cpu[8]), median(full.cpu[8]), median(tbx.cpu[8])
			fmt.Fprintf(w, "  - CPU per call at c=8: %.2f (%.0f µs; on disk %.0f µs: durability costs the gateway %.0f µs of CPU a call, %.2f × TBXark's whole call)\n", ft/tb, ft, fd, fd-ft, (fd-ft)/tb)
		}
		fmt.Fprintf(w, "  - p50 at c=1: %.2f of 1.1 × TBXark (%.0f µs; on disk %.0f µs)\n", median(tmpfs.p50[1])/(1.1*median(tbx.p50[1])), median(tmpfs.p50[1]), median(full.p50[1]))
	}
	if newest != nil && tbx != nil {
		fmt.Fprintf(w, "- gateway-full with the echo server on the gateway's default revision (MCP %s, the newest; every call then carries the client's capabilities, the protocol version and the client's name in _meta, and every result the server's name and resultType) / TBXark (MCP %s):\n", newestRevision, tbxarkRevision)
		for _, c := range []int{8, 32} {
			fmt.Fprintf(w, "  - calls/s at c=%d: %.2f (on %s %.2f)\n", c, median(newest.rps[c])/median(tbx.rps[c]), o.revision, median(full.rps[c])/median(tbx.rps[c]))
		}
		if len(newest.cpu[8]) > 0 && len(tbx.cpu[8]) > 0 && len(full.cpu[8]) > 0 {
			fmt.Fprintf(w, "  - CPU per call at c=8: %.2f (on %s %.2f)\n", median(newest.cpu[8])/median(tbx.cpu[8]), o.revision, median(full.cpu[8])/median(tbx.cpu[8]))
		}
		if len(newest.upCPU[8]) > 0 && len(full.upCPU[8]) > 0 && len(tbx.upCPU[8]) > 0 {
			fmt.Fprintf(w, "  - the echo server's CPU per call at c=8: %.0f µs on the newest revision, %.0f µs on %s behind the gateway, %.0f µs behind TBXark\n", median(newest.upCPU[8]), median(full.upCPU[8]), o.revision, median(tbx.upCPU[8]))
		}
		fmt.Fprintf(w, "  - p50 at c=1: %.0f µs (on %s %.0f µs)\n", median(newest.p50[1]), o.revision, median(full.p50[1]))
	}
	if tbx == nil {
		noTBX(fmt.Sprintf("peak RSS at %d sessions, gateway-full / TBXark", o.sessions))
	} else {
		v := float64(full.peakKB) / float64(tbx.peakKB)
		line(fmt.Sprintf("peak RSS at %d sessions, gateway-full / TBXark", o.sessions), v, "≤ 2.0", v <= 2.0, "")
	}
	for _, k := range []string{"gw-min", "gw-full"} {
		p := byKind[k]
		v := mb(p.idleKB)
		m := "not met"
		if v <= 25 {
			m = "met"
		}
		fmt.Fprintf(w, "- idle RSS, %s: **%.1f MB** (target ≤ 25 MB): %s\n", p.name, v, m)
	}
	if tbx == nil || len(tbx.mbP50) == 0 {
		noTBX("1 MB p50, gateway-full / TBXark")
	} else {
		v := median(full.mbP50) / median(tbx.mbP50)
		extra := ""
		if tmpfs != nil && len(tmpfs.mbP50) > 0 {
			extra = fmt.Sprintf(" (state on tmpfs: %.2f)", median(tmpfs.mbP50)/median(tbx.mbP50))
		}
		line("1 MB p50, gateway-full / TBXark", v, "≤ 1.1", v <= 1.1, extra)
	}

	fmt.Fprintln(w, "\nHow it was measured:")
	fmt.Fprintln(w, "- Every bench invocation makes two runs of the calls after its warm-up; the figures are of the second. Each cell is the median over the rounds.")
	fmt.Fprintln(w, "- HTTP peers: one session per worker. Stdio peers: one session (one pipe) shared by the workers.")
	hz := fmt.Sprintf("%d ticks/s from getconf CLK_TCK", e.hz)
	if !e.hzKnown {
		hz = "assumed 100 ticks/s (getconf CLK_TCK failed)"
	}
	fmt.Fprintf(w, "- CPU per call: utime+stime of the proxy process from /proc/PID/stat (%s) over the second run, divided by its calls. For the gateway it is the gateway process alone, not its echo server child; for the direct rows it is the echo server's own.\n", hz)
	fmt.Fprintf(w, "- Idle RSS: VmRSS of a fresh process %s after it was ready, before any MCP request. Peak RSS: VmHWM of that same process after %d sessions (one worker each) made %d calls, 0 errors.\n", o.settle, o.sessions, 5*o.sessions)
	if o.revision != "" {
		fmt.Fprintf(w, "- Upstream revision: every gateway peer but \"gateway-full, HTTP, upstream on the gateway's default revision\" asks the echo server for MCP %s (servers[].protocol_version; TBXark's mcp-proxy asks for %s, and the default %s is like for like with it); that one peer is gateway-full on the gateway's default (the newest, %s). UPSTREAM_REVISION=default runs them all on the default.\n", o.revision, tbxarkRevision, tbxarkRevision, newestRevision)
	} else {
		fmt.Fprintf(w, "- Upstream revision: every gateway peer runs on the gateway's default (the newest, %s); TBXark asks the echo server for %s.\n", newestRevision, tbxarkRevision)
	}
	fmt.Fprintln(w, "- Echo server's CPU per call: its utime+stime over the same run, for the peers in front of it (a proxy's child).")
	if tmpfs != nil {
		fmt.Fprintln(w, "- gateway-full, HTTP, state on tmpfs: the same binary and configuration as gateway-full with its state_dir on tmpfs (TMPFS_DIR), where the write-ahead file's sync returns at once; its memory is not measured (it is gateway-full's).")
	}
	fmt.Fprintf(w, "- The generated gateway configs raise gateway.max_sessions and gateway.max_connections to %d (defaults 256 and 512) for the %d-session run, and rule r4 of the full config denies messages over 2,000,000 bytes instead of 100,000 so that the 1 MB run passes.\n", 2*o.sessions, o.sessions)

	if len(paths) > 0 {
		fmt.Fprintln(w, "\nWhere a call's time goes in the gateway at c=1: a runtime trace of 2 s (the gateway's /admin/debug/pprof/trace) of a fresh gateway with the profiler on, while the bench client makes one call at a time; the stretches of the goroutine serving the client's connection, between its state transitions, named by the gateway's or net/http's frame at their ends. Tracing slows the gateway by some percent: read the shares, not the sum.")
		for _, np := range paths {
			printCriticalPath(w, np.name, np.cp, 14)
		}
	}

	fmt.Fprintln(w, "\nPer round (calls/s; p50 µs at c=1; CPU µs/call at c=8; 1 MB p50 µs):")
	fmt.Fprintln(w, "```")
	for _, p := range peers {
		fmt.Fprintf(w, "%-14s c=1 %s | c=8 %s | c=32 %s | p50 %s | cpu %s | 1MB %s\n", p.key,
			nums(p.rps[1]), nums(p.rps[8]), nums(p.rps[32]), nums(p.p50[1]), nums(p.cpu[8]), nums(p.mbP50))
	}
	fmt.Fprintln(w, "```")
}

func nums(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, "/")
}

// memoryCurve prints the peak RSS of each HTTP peer by the number of sessions (one worker each,
// five calls per session, a fresh process per point).
func memoryCurve(w io.Writer, peers []*peer) {
	var counts []int
	seen := map[int]bool{}
	for _, p := range peers {
		for n := range p.curveKB {
			if !seen[n] {
				seen[n] = true
				counts = append(counts, n)
			}
		}
	}
	if len(counts) < 2 {
		return
	}
	sort.Ints(counts)
	fmt.Fprint(w, "\nPeak RSS by sessions (a fresh process per point; MB):\n\n| peer |")
	for _, n := range counts {
		fmt.Fprintf(w, " %d |", n)
	}
	fmt.Fprint(w, "\n|---|")
	for range counts {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, p := range peers {
		if len(p.curveKB) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s |", p.name)
		for _, n := range counts {
			if kb, ok := p.curveKB[n]; ok {
				fmt.Fprintf(w, " %.1f |", mb(kb))
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		fmt.Fprintln(w)
	}
}
