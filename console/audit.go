package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// The audit pages: the last records matching the filters (server, tool, kind, type, principal,
// since), a page at a time, newest first, and one record whole.

const (
	auditPageDefault = 50
	auditPageMax     = 500
)

type auditList struct {
	Filter  map[string]string
	Records []store.Record
	// Older is the query of the next page of older records; "" when there are none.
	Older string
	Error string
	Kinds []string
	Types []string
}

type auditRecord struct {
	store.Record
	ArgsText   string
	DetailText string
}

// Kinds and types offered in the filters' lists; any other value can be typed in the URL.
var (
	auditKinds = []string{"guard_blocked", "policy_denied", "approval_denied", "approval_expired", "mcp_execution_status_unknown",
		"invalid_tool_arguments", "unknown_tool", "upstream_unavailable", "tool_protocol_violation", "tool_definition_changed"}
	auditTypes = []string{store.RecordCall, store.RecordOperator, store.RecordLockout, store.RecordApproval, store.RecordCheckpoint, store.RecordAuditGap}
)

func (c *Console) serveAudit(w http.ResponseWriter, r *http.Request) {
	d := c.pageData(sessionOf(r))
	q := r.URL.Query()
	list := &auditList{Filter: map[string]string{}, Kinds: auditKinds, Types: auditTypes}
	for _, k := range []string{"server", "tool", "kind", "type", "principal", "since"} {
		list.Filter[k] = q.Get(k)
	}
	d.Audit = list
	limit := auditPageDefault
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		limit = min(n, auditPageMax)
	}
	var before uint64
	if n, err := strconv.ParseUint(q.Get("before"), 10, 64); err == nil {
		before = n
	}
	f, err := gateway.ParseAuditFilter(url.Values{"server": {q.Get("server")}, "tool": {q.Get("tool")}, "kind": {q.Get("kind")},
		"type": {q.Get("type")}, "since": {q.Get("since")}})
	st := c.g.Store()
	switch {
	case err != nil:
		list.Error = err.Error()
	case st == nil:
		list.Error = "this gateway runs without its state file, so it keeps no audit log"
	default:
		// One more than a page, read backwards from before: the work is a page's, however long
		// the log, and the extra record says whether there are older ones.
		f.Principal, f.BeforeSeq, f.Limit = q.Get("principal"), before, limit+1
		err = st.AuditScan(f, func(rec store.Record) bool { list.Records = append(list.Records, rec); return true })
		if err != nil {
			list.Error = err.Error()
		}
		if len(list.Records) > limit {
			list.Records = list.Records[1:]
			older := url.Values{}
			for k, v := range list.Filter {
				if v != "" {
					older.Set(k, v)
				}
			}
			older.Set("before", strconv.FormatUint(list.Records[0].Seq, 10))
			older.Set("limit", strconv.Itoa(limit))
			list.Older = "/console/audit?" + older.Encode()
		}
		for i, j := 0, len(list.Records)-1; i < j; i, j = i+1, j-1 {
			list.Records[i], list.Records[j] = list.Records[j], list.Records[i]
		}
	}
	c.render(w, "audit.html", d)
}

func (c *Console) serveAuditRecord(w http.ResponseWriter, r *http.Request) {
	d := c.pageData(sessionOf(r))
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	st := c.g.Store()
	if err != nil || seq == 0 || st == nil {
		w.WriteHeader(http.StatusNotFound)
		c.render(w, "record.html", d)
		return
	}
	var found *store.Record
	_ = st.AuditScan(store.AuditFilter{AfterSeq: seq - 1, BeforeSeq: seq + 1, Limit: 1}, func(rec store.Record) bool {
		found = &rec
		return false
	})
	if found == nil {
		w.WriteHeader(http.StatusNotFound)
		c.render(w, "record.html", d)
		return
	}
	rec := &auditRecord{Record: *found, ArgsText: prettyJSON(found.Args, 0)}
	if len(found.Detail) > 0 {
		b, _ := json.MarshalIndent(found.Detail, "", "  ")
		rec.DetailText = string(b)
	}
	d.Record = rec
	c.render(w, "record.html", d)
}
