package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/governor"
	"github.com/mcp-gateway/mcp-gateway/internal/printable"
	"github.com/mcp-gateway/mcp-gateway/internal/suggest"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// The operator's own stops (SPEC.md §15, "A person can always stop it"): Halt, the emergency
// stop of every physical server, and Lock, a lockout of one server on an operator's word. Both
// are lockouts in the state file, so they survive a restart and only Unlock ends them.

// HaltRequest is the body of POST /admin/halt.
type HaltRequest struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

// LockRequest is the body of POST /admin/lockouts/{server}.
type LockRequest struct {
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
}

// HaltReport is what a halt did, as POST /admin/halt answers it.
type HaltReport struct {
	Operator string    `json:"operator"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	// Servers are the physical servers of the config in force, each now halted.
	Servers []HaltedServer `json:"servers"`
	// Cancelled are the physical calls that were in flight, oldest first.
	Cancelled []CancelledCall `json:"cancelled"`
	Timings   HaltTimings     `json:"timings,omitzero"`
	// AuditError says why the halt's audit records are not on disk yet (they are queued and
	// written when the state file takes writes); "" when they are.
	AuditError string `json:"audit_error,omitempty"`
}

// HaltedServer is one server a halt covered.
type HaltedServer struct {
	Server string `json:"server"`
	// Lockout is the halt in force: this one, or the earlier halt it found (AlreadyHalted),
	// which stays. A halt over a lockout of another kind replaces it; Lockout.Replaced holds
	// that one.
	Lockout       store.Lockout `json:"lockout"`
	AlreadyHalted bool          `json:"already_halted,omitempty"`
	// LockoutError says the halt is in force in memory but not yet in the state file.
	LockoutError string `json:"lockout_error,omitempty"`
	// Stop is the halt's call of its stop tool; zero (left out of the JSON) for a halt on the
	// state file of a stopped gateway, which calls none.
	Stop StopResult `json:"stop,omitzero"`
}

// Stop statuses.
const (
	StopOK       = "ok"        // the stop tool answered with success
	StopFailed   = "failed"    // it failed or was refused; Kind and Reason say how
	StopNoAnswer = "no_answer" // no answer within the halt's wait; the call goes on
	StopNone     = "none"      // the server has no stop tool (tools.overrides.<tool>.stop)
)

// StopResult is the halt's call of one server's stop tool.
type StopResult struct {
	// Tool is the stop tool's public name; "" when the server has none.
	Tool   string `json:"tool,omitempty"`
	CallID string `json:"call_id,omitempty"`
	Status string `json:"status"`
	Kind   string `json:"kind,omitempty"`
	Reason string `json:"reason,omitempty"`
	// SentMS is the time from the halt request to the call leaving the governed chain's checks
	// for its server (the dispatch step); AnsweredMS to its answer.
	SentMS     float64 `json:"sent_ms,omitempty"`
	AnsweredMS float64 `json:"answered_ms,omitempty"`
}

// What became of a call a halt cancelled.
const (
	CancelledUnknown  = "unknown"  // it had been sent: its outcome is unknown, and recorded so
	CancelledNotSent  = "not_sent" // it was waiting for its turn and was never sent
	CancelledFinished = "finished" // it ended in its own way before the cancellation took
	CancelledRunning  = "running"  // it was not back within the halt's wait
)

// CancelledCall is a physical call a halt cancelled.
type CancelledCall struct {
	CallID    string `json:"call_id"`
	Server    string `json:"server"`
	Tool      string `json:"tool"`
	Principal string `json:"principal,omitempty"`
	Session   string `json:"session,omitempty"`
	// RanMS is how long it had been in flight (waiting for its turn included) when cancelled.
	RanMS   float64 `json:"ran_ms"`
	Outcome string  `json:"outcome"`
	Kind    string  `json:"kind,omitempty"`
	// EndedMS is the time from the halt request to the call's end; 0 while it runs.
	EndedMS float64 `json:"ended_ms,omitempty"`
}

// HaltTimings are milliseconds from the halt request.
type HaltTimings struct {
	// LockedMS: every halt lockout is in force and committed (or held in memory, see
	// LockoutError).
	LockedMS float64 `json:"locked_ms"`
	// StopSentMS: the last stop tool call reached dispatch; 0 (left out of the JSON) without
	// stop tools.
	StopSentMS float64 `json:"stop_sent_ms,omitempty"`
	// LastCancelledEndedMS: the last cancelled call ended; 0 (left out) when none was cancelled.
	LastCancelledEndedMS float64 `json:"last_cancelled_ended_ms,omitempty"`
	// TookMS: the report was ready.
	TookMS float64 `json:"took_ms"`
}

// LockResult is what Lock did, as POST /admin/lockouts/{server} answers it.
type LockResult struct {
	// Lockout is the lockout in force: the operator's, or the one already there, which stays
	// (AlreadyLocked).
	Lockout       store.Lockout `json:"lockout"`
	AlreadyLocked bool          `json:"already_locked,omitempty"`
	// LockoutError says the lockout is in force in memory but not yet in the state file.
	LockoutError string `json:"lockout_error,omitempty"`
	// AuditError says why the lock's audit record is not on disk yet; "" when it is.
	AuditError string `json:"audit_error,omitempty"`
}

var (
	// ErrUnknownServer: the config names no such server.
	ErrUnknownServer = errors.New("no such server")
	// ErrNotPhysical: the server moves no hardware, so there is nothing to lock.
	ErrNotPhysical = errors.New("not a physical server")
)

// haltWait bounds how long a halt waits, after it has stopped everything, for the stop tools'
// answers and for the cancelled calls to come back, before it answers. Nothing depends on the
// wait: the lockouts are in force, the cancellations and the stop calls are sent; it only
// decides what the report can say.
const haltWait = 5 * time.Second

// HaltCause is the cause (context.Cause) of a physical call a halt cancelled (governor.HaltCause).
type HaltCause = governor.HaltCause

// Halt is the emergency stop (docs/operations.md, "Halt"). In this order, before it returns:
// it puts a halt lockout in force on every physical server of the config in force, committed to
// the state file with its audit record queued, so that nothing new is sent; it cancels every
// physical call in flight but stop-tool calls, with a HaltCause (a call that was sent ends with
// an unknown outcome, recorded, and its server gets notifications/cancelled; one waiting for its
// turn is never sent); and it calls each server's stop tool through the governed chain as the
// operator, all servers at once, without waiting for the cancelled calls. Then it waits up to
// haltWait for the stop tools' answers and the cancelled calls, and for its audit records to be
// on disk, and reports. A second halt keeps the first halt's lockout, and cancels and stops
// again. Non-physical servers are not touched.
func (g *Gateway) Halt(ctx context.Context, operator, reason string) (HaltReport, error) {
	// Never refused for what the text holds (a halt must always work), but shown as it is.
	operator, reason = printable.Text(operator), printable.Text(reason)
	start := time.Now()
	if strings.TrimSpace(reason) == "" {
		return HaltReport{}, errors.New("a reason is required: say why the robot is being stopped; it is kept in the audit log")
	}
	st := g.opts.Store
	if st == nil {
		return HaltReport{}, errors.New("this gateway runs without its state file and serves no physical calls")
	}
	since := func(t time.Time) float64 { return float64(t.Sub(start).Microseconds()) / 1000 }
	cfg := g.config()
	rep := HaltReport{Operator: operator, Reason: reason, At: start.UTC(), Cancelled: []CancelledCall{}}
	var auditErr error
	rep.Servers, auditErr = HaltLockouts(st, PhysicalServers(cfg), operator, reason, start, nil)
	for _, s := range rep.Servers {
		g.opMetrics.halt(s.Server)
		g.log.Warn("HALT: physical server halted by an operator; only unlock ends it",
			"server", s.Server, "operator", operator, "reason", reason, "already_halted", s.AlreadyHalted)
	}
	rep.Timings.LockedMS = since(time.Now())

	cause := &HaltCause{Operator: operator, Reason: reason}
	flights := g.inFlight.cancelPhysical(cause)
	// Then the calls not yet at dispatch: a call held for an approval is withdrawn.
	g.inFlight.cancelAdmitted(cause)

	cat := g.Catalog()
	stops := make([]*stopCall, len(rep.Servers))
	for i, s := range rep.Servers {
		if t := stopToolOf(cat, s.Server); t != nil {
			stops[i] = g.callStop(t, operator, reason)
		}
	}

	deadline := time.NewTimer(haltWait)
	defer deadline.Stop()
	expired := false
	waitFor := func(done <-chan struct{}) bool {
		select {
		case <-done:
			return true
		default:
		}
		if expired {
			return false
		}
		select {
		case <-done:
			return true
		case <-deadline.C:
			expired = true
			return false
		}
	}
	for i, sc := range stops {
		if sc == nil {
			rep.Servers[i].Stop = StopResult{Status: StopNone}
			continue
		}
		waitFor(sc.done)
		rep.Servers[i].Stop = sc.result(since)
		rep.Timings.StopSentMS = max(rep.Timings.StopSentMS, rep.Servers[i].Stop.SentMS)
	}
	for _, fl := range flights {
		cc := CancelledCall{
			CallID: fl.id, Server: fl.server, Tool: fl.tool, Principal: fl.principal, Session: fl.session,
			RanMS: float64(start.Sub(fl.start).Microseconds()) / 1000, Outcome: CancelledRunning,
		}
		if waitFor(fl.done) {
			cc.Outcome, cc.Kind, cc.EndedMS = cancelledOutcome(fl.out), string(fl.out.Kind), since(fl.end)
			rep.Timings.LastCancelledEndedMS = max(rep.Timings.LastCancelledEndedMS, cc.EndedMS)
		}
		rep.Cancelled = append(rep.Cancelled, cc)
	}
	if auditErr == nil {
		// The halt's own records; a stop call that answered has its record on disk already.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		auditErr = st.Audit().Flush(flushCtx)
		cancel()
	}
	if auditErr != nil {
		g.log.Error("audit records of a halt not on disk yet", "error", auditErr)
		rep.AuditError = auditErr.Error()
	}
	rep.Timings.TookMS = since(time.Now())
	return rep, nil
}

// PhysicalServers are the names of cfg's physical servers, in config order.
func PhysicalServers(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.Servers {
		if s.Physical {
			out = append(out, s.Name)
		}
	}
	return out
}

// HaltLockouts puts a halt by operator in force on each server and queues an operator record
// (action "halt", with what the halt replaced or found) for each, with detail added to every
// record. It is the part of a halt that lives in the state file, shared by Halt and by
// `mcp-gateway halt` on the file of a stopped gateway. The error says a record was not queued;
// the caller flushes the log.
func HaltLockouts(st *store.Store, servers []string, operator, reason string, at time.Time, detail map[string]any) ([]HaltedServer, error) {
	out := make([]HaltedServer, 0, len(servers))
	var unqueued []string
	for _, server := range servers {
		prev, applied, err := st.ApplyLockout(store.Lockout{Server: server, Kind: store.LockoutHalt, By: operator, Reason: reason, At: at})
		hs := HaltedServer{Server: server, Lockout: prev, AlreadyHalted: !applied}
		if applied {
			hs.Lockout, _ = st.Lockout(server)
		}
		if err != nil {
			hs.LockoutError = err.Error()
		}
		rec := store.Record{Type: store.RecordOperator, Action: "halt", Principal: operator, Server: server, Reason: reason, Detail: map[string]any{}}
		for k, v := range detail {
			rec.Detail[k] = v
		}
		switch {
		case !applied:
			rec.Detail["already_halted"] = lockoutDetail(prev)
		case prev.Server != "":
			rec.Detail["replaced"] = lockoutDetail(prev)
		}
		if !st.Audit().Append(rec) {
			unqueued = append(unqueued, server)
		}
		out = append(out, hs)
	}
	if len(unqueued) > 0 {
		return out, fmt.Errorf("the audit records of the halt of %s could not be queued: the state file does not take writes", strings.Join(unqueued, ", "))
	}
	return out, nil
}

// lockoutDetail is a lockout as an audit record's detail holds it.
func lockoutDetail(l store.Lockout) map[string]any {
	d := map[string]any{"kind": lockoutKind(l), "reason": l.Reason, "at": l.At}
	for k, v := range map[string]string{"by": l.By, "tool": l.Tool, "call_id": l.CallID, "principal": l.Principal} {
		if v != "" {
			d[k] = v
		}
	}
	if l.Replaced != nil {
		d["replaced"] = lockoutDetail(*l.Replaced)
	}
	return d
}

// lockoutKind is the lockout's kind; records from before kinds existed are unknown outcomes.
func lockoutKind(l store.Lockout) string {
	if l.Kind == "" {
		return store.LockoutUnknown
	}
	return l.Kind
}

// cancelledOutcome says what became of a cancelled call from its outcome.
func cancelledOutcome(out *governor.Outcome) string {
	switch {
	case out.Unknown:
		return CancelledUnknown
	case out.Kind == governor.KindCancelled, out.Kind == governor.KindExecutionStatusUnknown:
		// Cancelled while waiting for its turn, or refused at its turn by the halt's lockout.
		return CancelledNotSent
	default:
		return CancelledFinished
	}
}

// stopToolOf is the server's stop tool in the catalog, nil when it has none.
func stopToolOf(cat *Catalog, server string) *governor.Tool {
	var found *governor.Tool
	for _, t := range cat.byName {
		if t.Server == server && t.Stop && (found == nil || t.Public < found.Public) {
			found = t
		}
	}
	return found
}

// stopCall is a halt's call of one stop tool, running in its own goroutine until the governed
// chain answers it (its deadline bounds it, and a gateway shutdown cancels it).
type stopCall struct {
	tool, id string
	start    time.Time
	sent     atomic.Int64 // unix nanoseconds when it reached dispatch; 0 before
	done     chan struct{}
	out      *governor.Outcome // set before done is closed
	end      time.Time
}

// callStop sends the stop tool through the governed chain as the operator: audited, guarded and
// judged as every call. It does not run in the halt request's context, whose end (its HTTP
// client gone) must not cancel a stop.
func (g *Gateway) callStop(t *governor.Tool, operator, reason string) *stopCall {
	sc := &stopCall{tool: t.Public, id: g.callPrefix + strconv.FormatUint(g.callSeq.Add(1), 10), start: time.Now(), done: make(chan struct{})}
	ctx := context.WithValue(context.Background(), dispatchKey{}, func(at time.Time) { sc.sent.Store(at.UnixNano()) })
	c := &governor.Call{
		ID: sc.id, Name: t.Public, Args: json.RawMessage("{}"), Halt: true,
		Principal: operator, Roles: []string{config.RoleAdmin}, Start: sc.start,
		Detail: map[string]any{"called_by": "halt", "halt_reason": reason},
	}
	go func() {
		defer close(sc.done)
		sc.out = g.Call(ctx, c)
		sc.end = time.Now()
	}()
	return sc
}

// result is the call's report; since converts a time to milliseconds from the halt request.
func (sc *stopCall) result(since func(time.Time) float64) StopResult {
	r := StopResult{Tool: sc.tool, CallID: sc.id, Status: StopNoAnswer}
	if ns := sc.sent.Load(); ns != 0 {
		r.SentMS = since(time.Unix(0, ns))
	}
	select {
	case <-sc.done:
	default:
		return r
	}
	r.AnsweredMS = since(sc.end)
	switch out := sc.out; {
	case out.Success && out.Kind == "":
		r.Status = StopOK
	default:
		r.Status, r.Kind, r.Reason = StopFailed, string(out.Kind), out.Reason
	}
	return r
}

// Lock puts an operator's lockout in force on one physical server (`mcp-gateway lock`): the
// same as a lockout after an unknown outcome, except that it names who and why. It does not
// cancel the call in flight, which finishes or times out as it would; only a halt cancels. A
// server that is already locked out keeps the lockout it has, and the lock is still audited.
func (g *Gateway) Lock(ctx context.Context, server, operator, reason string) (LockResult, error) {
	operator, reason = printable.Text(operator), printable.Text(reason)
	if strings.TrimSpace(reason) == "" {
		return LockResult{}, errors.New("a reason is required: say why the server is being locked out; it is kept in the audit log")
	}
	if err := LockableServer(g.config(), server); err != nil {
		return LockResult{}, err
	}
	res, err := LockOnStateFile(ctx, g.opts.Store, server, operator, reason, nil)
	if err != nil {
		return res, err
	}
	if !res.AlreadyLocked {
		g.opMetrics.lock(server)
	}
	g.log.Warn("physical server locked out by an operator", "server", server, "operator", operator, "reason", reason, "already_locked", res.AlreadyLocked)
	return res, nil
}

// LockableServer is nil when cfg has a physical server of that name, else an error wrapping
// ErrUnknownServer (with the name it most likely meant) or ErrNotPhysical.
func LockableServer(cfg *config.Config, server string) error {
	s := cfg.Server(server)
	if s == nil {
		var names []string
		for _, s := range cfg.Servers {
			names = append(names, s.Name)
		}
		hint := ""
		if m := suggest.Closest(server, names); m != "" {
			hint = fmt.Sprintf("; did you mean %q?", m)
		}
		return fmt.Errorf("%w named %q in %s%s", ErrUnknownServer, server, cfg.Path, hint)
	}
	if !s.Physical {
		physical := PhysicalServers(cfg)
		slices.Sort(physical)
		return fmt.Errorf("server %s is %w (physical: false): its calls move no hardware and are never locked out; the physical servers are: %s",
			server, ErrNotPhysical, orNone(physical))
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// LockOnStateFile puts an operator lockout of server in force and writes its audit record
// (action "lock", with the lockout it found if there was one) before it returns, with detail
// added to the record. It is the part of a lock that lives in the state file, shared by Lock and
// by `mcp-gateway lock` on the file of a stopped gateway; it does not check the server.
func LockOnStateFile(ctx context.Context, st *store.Store, server, operator, reason string, detail map[string]any) (LockResult, error) {
	prev, applied, err := st.ApplyLockout(store.Lockout{Server: server, Kind: store.LockoutOperator, By: operator, Reason: reason})
	if !applied && prev.Server == "" {
		return LockResult{}, fmt.Errorf("locking out %s: %w", server, err)
	}
	res := LockResult{Lockout: prev, AlreadyLocked: !applied}
	if applied {
		res.Lockout, _ = st.Lockout(server)
	}
	if err != nil {
		res.LockoutError = err.Error()
	}
	rec := store.Record{Type: store.RecordOperator, Action: "lock", Principal: operator, Server: server, Reason: reason, Detail: map[string]any{}}
	for k, v := range detail {
		rec.Detail[k] = v
	}
	if !applied {
		rec.Detail["already_locked"] = lockoutDetail(prev)
	}
	if _, err := st.Audit().AppendSync(context.WithoutCancel(ctx), rec); err != nil {
		res.AuditError = err.Error()
	}
	return res, nil
}
