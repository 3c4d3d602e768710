package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// Reading traces back from Jaeger's HTTP API (the one its UI uses): /api/traces/{id},
// /api/services and /api/traces?service=.

// jTrace is a trace as Jaeger's HTTP API returns it.
type jTrace struct {
	TraceID   string `json:"traceID"`
	Spans     []*jSpan
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// jSpan is one span of a jTrace; Service is filled in from the trace's processes.
type jSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64  `json:"startTime"` // µs since the epoch
	Duration  int64  `json:"duration"`  // µs
	Tags      []jTag `json:"tags"`
	Logs      []struct {
		Fields []jTag `json:"fields"`
	} `json:"logs"`
	ProcessID string `json:"processID"`
	Service   string `json:"-"`
}

type jTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// parent is the span id the span is a child of, "" for a root.
func (s *jSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// tag is the value of the span's tag key as text, and whether it has it.
func (s *jSpan) tag(key string) (string, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value), true
		}
	}
	return "", false
}

// is reports whether the span's tag key has the value want.
func (s *jSpan) is(key, want string) bool {
	v, ok := s.tag(key)
	return ok && v == want
}

// failed reports whether the span's status is Error (Jaeger shows OpenTelemetry's status as the
// error and otel.status_code tags).
func (s *jSpan) failed() bool {
	e, _ := s.tag("error")
	c, _ := s.tag("otel.status_code")
	return e == "true" || c == "ERROR"
}

// event reports whether the span has an event (a Jaeger log) named name.
func (s *jSpan) event(name string) bool {
	for _, l := range s.Logs {
		for _, f := range l.Fields {
			if f.Key == "event" && f.Value == name {
				return true
			}
		}
	}
	return false
}

func (s *jSpan) String() string {
	return fmt.Sprintf("%s %q (span %s, parent %s, tags %v)", s.Service, s.OperationName, s.SpanID, s.parent(), s.Tags)
}

// find is the first span of service named name, or nil.
func (tr *jTrace) find(service, name string) *jSpan {
	for _, s := range tr.Spans {
		if s.Service == service && s.OperationName == name {
			return s
		}
	}
	return nil
}

// byID is the span with id, or nil.
func (tr *jTrace) byID(id string) *jSpan {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s
		}
	}
	return nil
}

// children are the spans whose parent is id.
func (tr *jTrace) children(id string) []*jSpan {
	var out []*jSpan
	for _, s := range tr.Spans {
		if s.parent() == id {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].StartTime < out[b].StartTime })
	return out
}

// child is the child of id named name, or nil.
func (tr *jTrace) child(id, name string) *jSpan {
	for _, s := range tr.children(id) {
		if s.OperationName == name {
			return s
		}
	}
	return nil
}

// apiGet decodes the "data" of a Jaeger API answer into v; it returns the HTTP status.
func (j *jaegerProc) apiGet(t *testing.T, path string, v any) int {
	t.Helper()
	resp, err := http.Get(j.query + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return resp.StatusCode
}

func (tr *jTrace) fill() {
	for _, s := range tr.Spans {
		s.Service = tr.Processes[s.ProcessID].ServiceName
	}
}

// trace is the trace with id as Jaeger has it now; ok is false when it has none of its spans.
func (j *jaegerProc) trace(t *testing.T, id string) (tr *jTrace, ok bool) {
	t.Helper()
	var traces []*jTrace
	if code := j.apiGet(t, "/api/traces/"+id, &traces); code == http.StatusNotFound {
		return nil, false
	} else if code != http.StatusOK {
		t.Fatalf("GET /api/traces/%s: %d", id, code)
	}
	if len(traces) != 1 {
		t.Fatalf("GET /api/traces/%s: %d traces", id, len(traces))
	}
	traces[0].fill()
	return traces[0], true
}

// waitTrace waits until Jaeger's trace id satisfies cond (spans arrive in batches, from several
// processes) and returns it; it fails the test with the trace's tree otherwise.
func (j *jaegerProc) waitTrace(t *testing.T, id, what string, cond func(*jTrace) bool) *jTrace {
	t.Helper()
	var last *jTrace
	if pollFor(20*time.Second, func() bool {
		tr, ok := j.trace(t, id)
		if ok {
			last = tr
		}
		return ok && cond(tr)
	}) {
		return last
	}
	if last == nil {
		t.Fatalf("Jaeger has no trace %s (waited 20s for %s)", id, what)
	}
	t.Fatalf("trace %s never had %s (waited 20s); it has:\n%s", id, what, last.outline())
	return nil
}

// services lists the services Jaeger has spans of.
func (j *jaegerProc) services(t *testing.T) []string {
	t.Helper()
	var names []string
	if code := j.apiGet(t, "/api/services", &names); code != http.StatusOK {
		t.Fatalf("GET /api/services: %d", code)
	}
	return names
}

// traces are the traces of service in the last hour (at most 100), newest first.
func (j *jaegerProc) traces(t *testing.T, service string) []*jTrace {
	t.Helper()
	var traces []*jTrace
	q := url.Values{"service": {service}, "lookback": {"1h"}, "limit": {"100"}}
	if code := j.apiGet(t, "/api/traces?"+q.Encode(), &traces); code != http.StatusOK {
		t.Fatalf("GET /api/traces?%s: %d", q.Encode(), code)
	}
	for _, tr := range traces {
		tr.fill()
	}
	return traces
}

// outline is the trace as an indented tree with each span's service, duration and the tags
// that tell the steps apart, for the docs.
func (tr *jTrace) outline() string {
	var b strings.Builder
	var walk func(s *jSpan, depth int)
	walk = func(s *jSpan, depth int) {
		var notes []string
		for _, k := range []string{"span.kind", "error.type", "mcp_gateway.policy.rule", "mcp_gateway.policy.effect", "mcp_gateway.outcome"} {
			if v, ok := s.tag(k); ok {
				notes = append(notes, k+"="+v)
			}
		}
		fmt.Fprintf(&b, "%s%s  [%s] %s  %s\n", strings.Repeat("  ", depth), s.OperationName, s.Service,
			time.Duration(s.Duration)*time.Microsecond, strings.Join(notes, " "))
		for _, c := range tr.children(s.SpanID) {
			walk(c, depth+1)
		}
	}
	for _, s := range tr.Spans {
		if p := s.parent(); p == "" || tr.byID(p) == nil {
			walk(s, 0)
		}
	}
	return b.String()
}
