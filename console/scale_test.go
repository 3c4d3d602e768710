package console

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/store"
)

// Issue 16 asks that the page stay fast with 10,000 audit records and 100 pending items. The
// bounds are generous for a small shared machine, yet a page that rendered or scanned the whole
// log on every request would miss them (10,000 records take longer than that to decode and
// render).
const (
	scaleRecords   = 10000
	scaleApprovals = 100
	scalePins      = 20
	scaleRuns      = 5
	scaleBound     = 300 * time.Millisecond
	// The first look after start-up reads the last hour of the log once to find its findings.
	scaleColdBound = time.Second
)

// slowdown stretches the absolute bounds: 10 under the race detector (race_test.go).
var slowdown time.Duration = 1

// seedScale writes the audit records, all within the last hour and oldest first: calls by
// three principals, refusals, guard findings and policy denials, and a few operator records.
// "rosa" made only the first five, so a filter on her reads the whole log back to its start.
func seedScale(t *testing.T, f *fixture) {
	t.Helper()
	now := f.clock()
	log := f.st.Audit()
	principals := []string{"planner", "bob", "carol"}
	for i := range scaleRecords {
		r := store.Record{Type: store.RecordCall, Principal: principals[i%3], Session: "sess-1", Server: "arm",
			Tool: fmt.Sprintf("arm__t%d", i%17), CallID: fmt.Sprintf("call-%d", i), Decision: "allow", Outcome: "ok",
			Args: json.RawMessage(`{"target":"red_cup","speed":0.4,"pose":{"x":0.31,"y":-0.12,"z":0.05}}`), DurationMS: 12,
			Time: now.Add(-50 * time.Minute).Add(time.Duration(i) * 250 * time.Millisecond)}
		switch {
		case i < 5:
			r.Principal = "rosa"
		case i%10 == 1:
			r.Decision, r.Kind, r.Outcome, r.Reason = "deny", "policy_denied", "refused", "rule slow-near-people: speed above 0.2 while a person is near"
		case i%10 == 2:
			r.Decision, r.Kind, r.Outcome, r.Reason = "deny", "guard_blocked", "refused", "guard secrets found an api_key in the arguments"
			r.Detail = map[string]any{"findings": []any{map[string]any{"guard": "secrets", "category": "api_key", "path": "$.note"}}}
		case i%10 == 3:
			r.Detail = map[string]any{"findings": []any{map[string]any{"guard": "pii", "category": "email", "path": "$.note", "action": "redacted"}}}
		case i%10 == 4:
			r.Decision, r.Kind, r.Outcome, r.Reason = "deny", "invalid_tool_arguments", "refused", "speed: must be at most 1"
		case i%100 == 5:
			r = store.Record{Type: store.RecordOperator, Principal: "alice", Action: "unlock", Server: "arm", Reason: "checked the cell", Time: r.Time}
		}
		if !log.Append(r) {
			t.Fatalf("record %d not queued", i)
		}
		// The writer's queue is bounded: let it drain now and then.
		if i%1000 == 999 {
			if err := log.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range scaleApprovals {
		putApproval(t, f.st, fmt.Sprintf("ap-%03d", i), now.Add(time.Duration(i)*time.Second))
	}
	for i := range scalePins {
		tool := fmt.Sprintf("t%d", i)
		err := f.st.PutPin(store.Pin{Server: "arm", Tool: tool, Digest: "d1", Pinned: now,
			Definition:        json.RawMessage(`{"name":"` + tool + `","description":"Move the arm.","inputSchema":{"type":"object","properties":{"speed":{"type":"number"}}}}`),
			Pending:           "d2",
			PendingDefinition: json.RawMessage(`{"name":"` + tool + `","description":"Move the arm fast.","inputSchema":{"type":"object","properties":{"speed":{"type":"number","maximum":2}}}}`),
			Changed:           now})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// timed fetches path scaleRuns times, each time past the view cache so that the state is
// computed again, and returns the median duration and the last body.
func (f *fixture) timed(path string) (time.Duration, string) {
	f.t.Helper()
	var (
		took []time.Duration
		body string
	)
	for range scaleRuns {
		f.advance(time.Second)
		start := time.Now()
		var resp *http.Response
		resp, body = f.get(path)
		took = append(took, time.Since(start))
		if resp.StatusCode != http.StatusOK {
			f.t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	slices.Sort(took)
	return took[len(took)/2], body
}

// firstEvent times the event stream's first state event, as the page receives it.
func (f *fixture) firstEvent() (time.Duration, string) {
	f.t.Helper()
	f.advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/console/events", nil)
	start := time.Now()
	resp, err := f.client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() && sc.Text() != "" {
		ev.WriteString(sc.Text() + "\n")
	}
	return time.Since(start), ev.String()
}

const fullScan = "audit, filter matching the oldest records only"

var seqRow = regexp.MustCompile(`<tr data-seq="(\d+)">`)

func TestConsoleStaysFastWithTenThousandRecordsAndAHundredPending(t *testing.T) {
	f := newFixture(t, "")
	seedScale(t, f)

	// Signing in fetches the first page, whose view is the first after start-up: it reads the
	// last hour of the log, once.
	start := time.Now()
	f.login(adminToken)
	cold := time.Since(start)
	t.Logf("%-48s         %7.2f ms", "sign-in and the first page after start-up", float64(cold.Microseconds())/1000)
	if cold > scaleColdBound*slowdown {
		t.Errorf("sign-in and the first page after start-up took %v, over %v", cold, scaleColdBound*slowdown)
	}

	type measured struct {
		name, path string
		maxBytes   int
		rows       int // audit rows the page must show
		// paged pages read a page's worth of records, not the log: each must cost under a
		// quarter of the page whose filter matches only the oldest records, which reads
		// the whole log back to its start (measured in the same run, so the ratio holds on
		// a slow or busy machine).
		paged bool
		check func(body string) string
	}
	pages := []measured{
		{name: "main page", path: "/console/", maxBytes: 512 << 10, rows: recentShown + findingsShown, check: func(b string) string {
			if n := strings.Count(b, `<article class="card" data-approval=`); n != scaleApprovals {
				return fmt.Sprintf("%d approvals shown, want %d", n, scaleApprovals)
			}
			if n := strings.Count(b, `data-pin=`); n != scalePins {
				return fmt.Sprintf("%d pin changes shown, want %d", n, scalePins)
			}
			return ""
		}},
		{name: "state (the event payload)", path: "/console/state", maxBytes: 512 << 10, rows: recentShown + findingsShown},
		{name: "audit, first page", path: "/console/audit", maxBytes: 128 << 10, rows: auditPageDefault},
		{name: "audit, filtered", path: "/console/audit?principal=carol&kind=policy_denied", maxBytes: 128 << 10, rows: auditPageDefault, check: func(b string) string {
			if strings.Contains(b, "<td>bob</td>") || strings.Contains(b, "<td>guard_blocked</td>") {
				return "a record outside the filter is shown"
			}
			return ""
		}},
		{name: fullScan, path: "/console/audit?principal=rosa", maxBytes: 128 << 10, rows: 5},
		{name: "audit, older records", path: "/console/audit?before=5000&limit=50", maxBytes: 128 << 10, rows: 50, paged: true, check: func(b string) string {
			if m := seqRow.FindStringSubmatch(b); m == nil || m[1] != "4999" {
				return fmt.Sprintf("the older page starts at %v, want 4999", m)
			}
			return ""
		}},
		{name: "audit, older filtered records", path: "/console/audit?principal=carol&before=3000", maxBytes: 128 << 10, rows: auditPageDefault, paged: true},
		{name: "audit record", path: "/console/audit/5000", maxBytes: 32 << 10, paged: true, check: func(b string) string {
			if !strings.Contains(b, "Audit record 5000") {
				return "not record 5000"
			}
			return ""
		}},
	}
	var fullScanTook time.Duration
	for _, p := range pages {
		took, body := f.timed(p.path)
		if p.name == fullScan {
			fullScanTook = took
		}
		if p.paged && took > fullScanTook/4 {
			t.Errorf("%s (%s): median %v, over a quarter of reading the whole log (%v): it reads more than a page",
				p.name, p.path, took, fullScanTook)
		}
		rows := len(seqRow.FindAllString(body, -1))
		if p.path == "/console/state" {
			var u update
			if err := json.Unmarshal([]byte(body), &u); err != nil {
				t.Fatal(err)
			}
			rows = len(seqRow.FindAllString(u.Main, -1))
		}
		t.Logf("%-48s median %7.2f ms  %7d bytes  %3d audit rows", p.name, float64(took.Microseconds())/1000, len(body), rows)
		if took > scaleBound*slowdown {
			t.Errorf("%s (%s): median %v, over %v", p.name, p.path, took, scaleBound*slowdown)
		}
		if len(body) > p.maxBytes {
			t.Errorf("%s (%s): %d bytes, over %d", p.name, p.path, len(body), p.maxBytes)
		}
		if p.rows > 0 && rows != p.rows {
			t.Errorf("%s (%s): %d audit rows, want %d", p.name, p.path, rows, p.rows)
		}
		if p.check != nil {
			if msg := p.check(body); msg != "" {
				t.Errorf("%s (%s): %s", p.name, p.path, msg)
			}
		}
	}

	took, ev := f.firstEvent()
	t.Logf("%-48s         %7.2f ms  %7d bytes", "first event of the stream", float64(took.Microseconds())/1000, len(ev))
	if !strings.HasPrefix(ev, "event: state\ndata: {") || took > scaleBound*slowdown || len(ev) > 512<<10 {
		t.Errorf("first event: %v, %d bytes: %.200s", took, len(ev), ev)
	}
}
