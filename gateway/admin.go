package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/internal/printable"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// Status is the gateway's state as /admin/status and `mcp-gateway status` report it.
type Status struct {
	Gateway   string           `json:"gateway"`
	Version   string           `json:"version,omitempty"`
	StateFile string           `json:"state_file,omitempty"`
	Upstreams []UpstreamStatus `json:"upstreams"`
	// Lockouts are the lockouts in force, oldest first; Kind says what put each in force and
	// By which operator.
	Lockouts []LockoutStatus `json:"lockouts"`
	// Halted is set while a halt (emergency stop) is in force on any server.
	Halted bool `json:"halted"`
	// Physical is each configured physical server's calls in flight and its operator tools.
	Physical []PhysicalStatus `json:"physical"`
	// Approvals are the calls waiting for an operator's approval.
	Approvals ApprovalsStatus `json:"approvals"`
}

// PhysicalStatus is one physical server's calls and the tools an operator has on it.
type PhysicalStatus struct {
	Server string `json:"server"`
	// InFlight are its calls past the policy step, oldest first. One call runs at a time, so
	// the oldest is the one on the robot, or about to be sent; Queued of the others wait for
	// their turn. A stop tool's call does not wait (Stop).
	InFlight []FlightStatus `json:"in_flight"`
	Queued   int            `json:"queued"`
	// StopTool is the public name of its stop tool, "" when it has none; InspectionTools are
	// the read-only tools that stay callable during a lockout (allow_while_locked).
	StopTool        string   `json:"stop_tool,omitempty"`
	InspectionTools []string `json:"inspection_tools"`
}

// FlightStatus is a physical call in flight.
type FlightStatus struct {
	CallID     string    `json:"call_id"`
	Tool       string    `json:"tool"`
	Principal  string    `json:"principal,omitempty"`
	Session    string    `json:"session,omitempty"`
	Stop       bool      `json:"stop,omitempty"`
	Since      time.Time `json:"since"`
	RunningSec float64   `json:"running_sec"`
}

// ApprovalsStatus is the pending approval requests, oldest first.
type ApprovalsStatus struct {
	Pending  int               `json:"pending"`
	Requests []PendingApproval `json:"requests"`
	// Error says why the requests could not be read.
	Error string `json:"error,omitempty"`
}

// PendingApproval is one request waiting for an operator.
type PendingApproval struct {
	ID        string    `json:"id"`
	Server    string    `json:"server"`
	Tool      string    `json:"tool"`
	Principal string    `json:"principal,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
}

// UpstreamStatus is one upstream server's state.
type UpstreamStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Physical bool   `json:"physical"`
	// Tools is how many of its tools clients see in tools/list; Catalog says what became of
	// the others.
	Tools     int        `json:"tools"`
	Catalog   ToolCounts `json:"catalog"`
	Restarts  int        `json:"restarts"`
	LastError string     `json:"last_error,omitempty"`
}

// LockoutStatus is an active lockout and its age.
type LockoutStatus struct {
	store.Lockout
	AgeSec float64 `json:"age_sec"`
}

// ResetRequest is the body of POST /admin/lockouts/{server}/reset.
type ResetRequest struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

// DecisionRequest is the body of POST /admin/approvals/{id}/approve and /deny.
type DecisionRequest struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

// ResetResult says what a reset cleared and whether the upstream restarted.
type ResetResult struct {
	Cleared      store.Lockout `json:"cleared"`
	Restarted    bool          `json:"restarted"`
	RestartError string        `json:"restart_error,omitempty"`
	// AuditError says why the reset's audit record is not on disk yet (it is queued and written
	// when the state file takes writes); "" when it is.
	AuditError string `json:"audit_error,omitempty"`
}

// ErrNotLocked: the server has no active lockout.
var ErrNotLocked = errors.New("no active lockout")

// Status reports upstreams, lockouts and halts, the physical calls in flight, and the pending
// approvals.
func (g *Gateway) Status() Status {
	now := time.Now()
	st := Status{
		Gateway: g.cfg.Gateway.Name, Version: Version, Upstreams: []UpstreamStatus{}, Lockouts: []LockoutStatus{},
		Physical: []PhysicalStatus{}, Approvals: ApprovalsStatus{Requests: []PendingApproval{}},
	}
	for _, u := range g.ups.All() {
		cfg := u.Config()
		counts := g.toolCounts(u.Name())
		st.Upstreams = append(st.Upstreams, UpstreamStatus{
			Name: u.Name(), State: u.State().String(), Physical: cfg.Physical,
			Tools: counts.Listed, Catalog: counts, Restarts: u.Restarts(), LastError: u.LastError(),
		})
	}
	st.Physical = g.physicalStatus(now)
	s := g.opts.Store
	if s == nil {
		return st
	}
	st.StateFile = s.Path()
	for _, l := range s.Lockouts() {
		st.Lockouts = append(st.Lockouts, LockoutStatus{Lockout: l, AgeSec: now.Sub(l.At).Seconds()})
		st.Halted = st.Halted || l.Halted()
	}
	pending, err := s.ListApprovals(store.ApprovalPending)
	if err != nil {
		st.Approvals.Error = err.Error()
	}
	for _, a := range pending {
		st.Approvals.Requests = append(st.Approvals.Requests, PendingApproval{ID: a.ID, Server: a.Server, Tool: a.Tool, Principal: a.Principal, Expires: a.Expires})
	}
	st.Approvals.Pending = len(st.Approvals.Requests)
	return st
}

// physicalStatus is each physical server of the config in force, in config order.
func (g *Gateway) physicalStatus(now time.Time) []PhysicalStatus {
	flights := g.inFlight.physicalCalls()
	cat := g.Catalog()
	out := []PhysicalStatus{}
	for _, server := range PhysicalServers(g.config()) {
		ps := PhysicalStatus{Server: server, InFlight: []FlightStatus{}, InspectionTools: []string{}}
		if u := g.ups.Get(server); u != nil {
			ps.Queued = u.Queued()
		}
		for _, fl := range flights {
			if fl.server == server {
				ps.InFlight = append(ps.InFlight, FlightStatus{
					CallID: fl.id, Tool: fl.tool, Principal: fl.principal, Session: fl.session, Stop: fl.stop,
					Since: fl.start.UTC(), RunningSec: now.Sub(fl.start).Seconds(),
				})
			}
		}
		if t := stopToolOf(cat, server); t != nil {
			ps.StopTool = t.Public
		}
		for name, t := range cat.byName {
			if t.Server == server && t.AllowWhileLocked {
				ps.InspectionTools = append(ps.InspectionTools, name)
			}
		}
		slices.Sort(ps.InspectionTools)
		out = append(out, ps)
	}
	return out
}

// Unlock clears a server's lockout on an operator's word: the reset is audited (synchronously)
// with who and why, and the server is restarted so that the robot runtime starts from a known
// state.
func (g *Gateway) Unlock(ctx context.Context, server, operator, reason string) (ResetResult, error) {
	operator, reason = printable.Text(operator), printable.Text(reason)
	var res ResetResult
	if strings.TrimSpace(reason) == "" {
		return res, errors.New("a reason is required: say what was inspected on the robot")
	}
	st := g.opts.Store
	cleared, ok, err := st.ClearLockout(server)
	if err != nil {
		return res, fmt.Errorf("clearing the lockout of %s: %w", server, err)
	}
	if !ok {
		return res, fmt.Errorf("server %s: %w", server, ErrNotLocked)
	}
	res.Cleared = cleared
	rec := store.Record{
		Type: store.RecordOperator, Action: "unlock", Principal: operator, Server: server,
		Tool: cleared.Tool, CallID: cleared.CallID, Reason: reason,
		Detail: UnlockDetail(cleared),
	}
	if _, err := st.Audit().AppendSync(context.WithoutCancel(ctx), rec); err != nil {
		g.log.Error("audit record of an unlock not written yet", "server", server, "error", err)
		res.AuditError = err.Error()
	}
	g.log.Warn("lockout cleared by an operator", "server", server, "operator", operator, "reason", reason, "lockout_kind", lockoutKind(cleared))
	// A lockout of a server that is no longer configured is cleared, with nothing to restart.
	if u := g.ups.Get(server); u != nil {
		if err := u.Restart(ctx); err != nil {
			res.RestartError = err.Error()
		} else {
			res.Restarted = true
		}
	}
	return res, nil
}

// UnlockDetail is what an unlock's audit record keeps of the lockout it cleared: when and why it
// was put in force, its kind (a halt, an operator's lock, an unknown outcome), who put it there
// and what a halt had replaced.
func UnlockDetail(cleared store.Lockout) map[string]any {
	d := map[string]any{"locked_at": cleared.At, "lockout_reason": cleared.Reason, "lockout_kind": lockoutKind(cleared)}
	if cleared.By != "" {
		d["locked_by"] = cleared.By
	}
	if cleared.Replaced != nil {
		d["replaced"] = lockoutDetail(*cleared.Replaced)
	}
	return d
}

// adminHandler serves /admin/... behind the admin bearer token.
func (g *Gateway) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, g.Status())
	})
	mux.HandleFunc("GET /admin/lockouts", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, g.Status().Lockouts)
	})
	mux.HandleFunc("POST /admin/halt", func(w http.ResponseWriter, r *http.Request) {
		var req HaltRequest
		if !decodeBody(w, r, &req, `{"reason": "why the robot is stopped", "operator": "who"}`) {
			return
		}
		rep, err := g.Halt(r.Context(), operatorOf(r, req.Operator), req.Reason)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
	mux.HandleFunc("POST /admin/lockouts/{server}", func(w http.ResponseWriter, r *http.Request) {
		var req LockRequest
		if !decodeBody(w, r, &req, `{"reason": "why the server is locked out", "operator": "who"}`) {
			return
		}
		res, err := g.Lock(r.Context(), r.PathValue("server"), operatorOf(r, req.Operator), req.Reason)
		switch {
		case errors.Is(err, ErrUnknownServer):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeJSON(w, http.StatusOK, res)
		}
	})
	mux.HandleFunc("POST /admin/lockouts/{server}/reset", func(w http.ResponseWriter, r *http.Request) {
		var req ResetRequest
		if !decodeBody(w, r, &req, `{"reason": "what was inspected", "operator": "who"}`) {
			return
		}
		req.Operator = operatorOf(r, req.Operator)
		res, err := g.Unlock(r.Context(), r.PathValue("server"), req.Operator, req.Reason)
		switch {
		case errors.Is(err, ErrNotLocked):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeJSON(w, http.StatusOK, res)
		}
	})
	mux.HandleFunc("GET /admin/approvals", func(w http.ResponseWriter, r *http.Request) {
		state := r.URL.Query().Get("state")
		switch {
		case state == "":
			state = store.ApprovalPending
		case state == "all":
			state = ""
		case !slices.Contains(store.ApprovalStates, state):
			writeError(w, http.StatusBadRequest, fmt.Sprintf("no approval state %q: state is all or one of %s", state, strings.Join(store.ApprovalStates, ", ")))
			return
		}
		list, err := g.opts.Store.ListApprovals(state)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if list == nil {
			list = []store.Approval{}
		}
		writeJSON(w, http.StatusOK, list)
	})
	decide := func(approve bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req DecisionRequest
			if r.ContentLength != 0 {
				if !decodeBody(w, r, &req, `{"reason": "why", "operator": "who"}`) {
					return
				}
			}
			req.Operator, req.Reason = printable.Text(operatorOf(r, req.Operator)), printable.Text(req.Reason)
			a, err := g.approvals.Decide(r.Context(), r.PathValue("id"), approve, req.Operator, req.Reason)
			switch {
			case errors.Is(err, store.ErrNotFound):
				writeError(w, http.StatusNotFound, err.Error())
			case errors.Is(err, store.ErrAlreadyDecided):
				writeError(w, http.StatusConflict, err.Error())
			case errors.Is(err, store.ErrExpired), errors.Is(err, store.ErrWithdrawn):
				writeError(w, http.StatusGone, err.Error())
			case err != nil:
				writeError(w, http.StatusInternalServerError, err.Error())
			default:
				writeJSON(w, http.StatusOK, a)
			}
		}
	}
	mux.HandleFunc("POST /admin/approvals/{id}/approve", decide(true))
	mux.HandleFunc("POST /admin/approvals/{id}/deny", decide(false))
	mux.HandleFunc("GET /admin/audit", func(w http.ResponseWriter, r *http.Request) {
		f, err := ParseAuditFilter(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := g.flushForRead(r.Context()); err != nil {
			// The committed records are still worth reading while the disk fails: say what is
			// missing and serve them.
			w.Header().Set("X-Audit-Incomplete", err.Error())
		}
		w.Header().Set("Content-Type", "application/jsonl")
		enc := json.NewEncoder(w)
		err = g.opts.Store.AuditScan(f, func(rec store.Record) bool { return enc.Encode(rec) == nil })
		if err != nil {
			g.log.Error("reading the audit log", "error", err)
		}
	})
	mux.HandleFunc("GET /admin/audit/export", func(w http.ResponseWriter, r *http.Request) {
		f, err := ParseAuditFilter(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := g.flushForRead(r.Context()); err != nil {
			w.Header().Set("X-Audit-Incomplete", err.Error())
		}
		// Each record exactly as stored, so that every line re-hashes: what `audit export` of a
		// stopped gateway's state file writes.
		w.Header().Set("Content-Type", "application/jsonl")
		err = g.opts.Store.AuditExport(f, func(raw []byte) error {
			_, err := w.Write(append(raw, '\n'))
			return err
		})
		if err != nil {
			g.log.Error("exporting the audit log", "error", err)
		}
	})
	mux.HandleFunc("GET /admin/audit/verify", func(w http.ResponseWriter, r *http.Request) {
		if err := g.flushForRead(r.Context()); err != nil {
			w.Header().Set("X-Audit-Incomplete", err.Error())
		}
		checked, bad := g.opts.Store.AuditVerify()
		writeJSON(w, http.StatusOK, VerifyResult{Checked: checked, OK: bad == nil, Bad: bad})
	})
	mux.HandleFunc("POST /admin/audit/digest", func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, "reading the arguments: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"digest": g.opts.Store.DigestArgs(raw)})
	})
	mux.HandleFunc("POST /admin/reload", g.serveReload)
	g.registerOpsRoutes(mux)
	g.registerPinRoutes(mux)
	g.registerToolRoutes(mux)
	if g.cfg.Gateway.Pprof {
		registerPprof(mux)
	} else {
		mux.HandleFunc("/admin/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "the profiler is off: set gateway.pprof: true in the config and restart the gateway")
		})
	}
	return g.requireAdmin(mux)
}

// VerifyResult is the answer of /admin/audit/verify.
type VerifyResult struct {
	Checked uint64             `json:"checked"`
	OK      bool               `json:"ok"`
	Bad     *store.VerifyError `json:"bad,omitempty"`
}

// ParseAuditFilter reads server, tool, kind, type, since (RFC 3339 time or a duration such as
// 2h), after (a sequence number) and limit (the last N records).
func ParseAuditFilter(q interface{ Get(string) string }) (store.AuditFilter, error) {
	f := store.AuditFilter{Server: q.Get("server"), Tool: q.Get("tool"), Kind: q.Get("kind"), Type: q.Get("type")}
	if s := q.Get("since"); s != "" {
		t, err := ParseSince(s, time.Now())
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	if s := q.Get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return f, fmt.Errorf("after must be a record sequence number, got %q", s)
		}
		f.AfterSeq = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return f, fmt.Errorf("limit must be a number of records, got %q", s)
		}
		f.Limit = n
	}
	return f, nil
}

// ParseSince reads an RFC 3339 time, or a duration (such as 90m) meaning that long before now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("since must be a positive duration (how far back), got %q", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("since must be a duration (like 2h) or an RFC 3339 time (like 2026-11-30T08:00:00Z), got %q", s)
	}
	return t, nil
}

// requireAdmin lets a request through only when its principal, which Handler identified by the
// bearer token, holds the admin role: the admin token's principal "admin", or an auth.tokens
// entry with role admin. The token itself is never logged.
func (g *Gateway) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.opts.AdminToken == "" || g.opts.Store == nil {
			writeError(w, http.StatusNotFound, "the admin API is not enabled on this gateway")
			return
		}
		p := PrincipalFromContext(r.Context())
		switch {
		case p == nil:
			unauthorized(w, r, adminTokenHint)
		case !p.HasRole(config.RoleAdmin):
			writeError(w, http.StatusForbidden, fmt.Sprintf("principal %s lacks the role %s, which the admin API needs", p.ID, config.RoleAdmin))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// operatorOf is who an admin action is audited as. The local admin token (admin.token) is
// shared by whoever can read the state directory, so the operator name the request gives is
// recorded as it is; a configured principal's token identifies its holder, so a different name
// is recorded beside it ("alice (via ops-bot)").
func operatorOf(r *http.Request, claimed string) string {
	id := adminPrincipal
	if p := PrincipalFromContext(r.Context()); p != nil {
		id = p.ID
	}
	switch {
	case claimed == "" || claimed == id:
		return id
	case id == adminPrincipal:
		return claimed
	default:
		return claimed + " (via " + id + ")"
	}
}

// flushForRead waits briefly for the records queued before a read of the audit log. While the
// state file does not take writes it does not wait at all: the committed records are served, and
// the error says that queued ones are missing.
func (g *Gateway) flushForRead(ctx context.Context) error {
	st := g.opts.Store
	if err := st.Available(); err != nil {
		return fmt.Errorf("records queued since the state file stopped taking writes are not included: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := st.Audit().Flush(ctx); err != nil {
		return fmt.Errorf("records still queued for the disk are not included: %w", err)
	}
	return nil
}

// maxAdminBody bounds the body of an admin request: a reason and a name, not a document.
const maxAdminBody = 64 << 10

// decodeBody decodes r's JSON body into v, or answers why it cannot and returns false: 413 for a
// body over maxAdminBody, 400 naming what is wrong for one that is not JSON of the shape given.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, shape string) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody)).Decode(v)
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d KiB; send %s", maxAdminBody>>10, shape))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "the body is empty; send "+shape)
	case errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, "the body ends before its JSON does; send "+shape)
	case errors.As(err, &syntax):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the body is not JSON (%v at byte %d); send %s", syntax, syntax.Offset, shape))
	case errors.As(err, &typ):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s must be a %s, not a JSON %s; send %s", typ.Field, typ.Type, typ.Value, shape))
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("the body cannot be read as JSON (%v); send %s", err, shape))
	}
	return false
}
