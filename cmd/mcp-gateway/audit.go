package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// defaultTableLimit is how many records the audit table shows without --limit: the recent tail.
const defaultTableLimit = 20

// recordTypes are the values of --type.
var recordTypes = []string{store.RecordCall, store.RecordLockout, store.RecordOperator, store.RecordApproval, store.RecordCheckpoint, store.RecordAuditGap}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify" {
		return runAuditVerify(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "export" {
		return runAuditExport(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "digest" {
		return runAuditDigest(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	fs := newFlags("audit", "audit [-c FILE] [--server S] [--tool T] [--kind K] [--type T] [--since 2h|RFC3339] [--limit N] [-o table|json|jsonl]\n"+
		"       mcp-gateway audit export [-c FILE] [--since 2h|RFC3339] [filters] > audit.jsonl\n"+
		"       mcp-gateway audit verify [-c FILE] [-o table|json|jsonl]\n"+
		"       mcp-gateway audit digest [-c FILE] [-o table|json|jsonl] < arguments.json\n\n"+
		"Prints the audit log's records, oldest first, as a table or as JSON with every field.\n"+
		"\"audit export\" writes every matching record as one JSON line, for an archive kept before retention\n"+
		"prunes the oldest records. \"audit verify\" checks the hash chain and names the first record that\n"+
		"does not verify.", stdout, stderr)
	o := addOpsFlags(fs)
	f, since := addFilterFlags(fs)
	limit := fs.Int("limit", defaultTableLimit, "show only the last `N` matching records, 0 = all; with -o json or jsonl and no --limit, all")
	fs.addOutput()
	fs.addJSONLAlias()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *limit < 0 {
		return fs.usageError("--limit must be 0 (all) or a number of records, not %d", *limit)
	}
	format := fs.output()
	f.Limit = *limit
	if format != formatTable && !flagGiven(fs, "limit") {
		f.Limit = 0
	}
	if err := checkFilter(fs, f, *since); err != nil {
		return err
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	acc, err := openState(cfg, o, true)
	if err != nil {
		return err
	}
	defer acc.Close()
	acc.warnWALGap(stderr)

	out := newRecordPrinter(stdout, format)
	if acc.api != nil {
		err = scanViaAPI(ctx, acc.api, *f, stderr, out.print)
	} else {
		err = acc.st.AuditScan(*f, func(r store.Record) bool { return out.print(r) == nil })
	}
	if err == nil {
		err = out.err
	}
	if err != nil {
		return err
	}
	if err := out.flush(); err != nil {
		return err
	}
	switch {
	case out.n == 0:
		fmt.Fprintln(stderr, "no audit records match")
		for _, h := range filterHints(ctx, cfg, acc, *f) {
			fmt.Fprintln(stderr, h)
		}
	case format == formatTable && f.Limit > 0 && out.n == f.Limit:
		fmt.Fprintf(stderr, "(the last %d matching records; --limit N for more, --limit 0 for all)\n", out.n)
	}
	return nil
}

// addFilterFlags adds the record filters shared by audit and audit export; since is parsed by
// checkFilter after the flags.
func addFilterFlags(fs *cmdFlags) (*store.AuditFilter, *string) {
	f := &store.AuditFilter{}
	fs.StringVar(&f.Server, "server", "", "only records of this server")
	fs.StringVar(&f.Tool, "tool", "", "only records of this public tool name")
	fs.StringVar(&f.Kind, "kind", "", "only records with this failure kind (unknown_tool, invalid_tool_arguments, mcp_execution_status_unknown, ...)")
	fs.StringVar(&f.Type, "type", "", "only records of this type: "+strings.Join(recordTypes, ", "))
	since := fs.String("since", "", "only records from `TIME` on: a duration back from now (2h) or an RFC 3339 time")
	return f, since
}

// checkFilter refuses a --type that is none of the record types, and sets f.Since from --since
// (exit 2 with the problem).
func checkFilter(fs *cmdFlags, f *store.AuditFilter, since string) error {
	if f.Type != "" && !slices.Contains(recordTypes, f.Type) {
		return fs.usageError("--type %q is not a record type%s; the types are %s", f.Type, didYouMean(f.Type, recordTypes), strings.Join(recordTypes, ", "))
	}
	if since == "" {
		return nil
	}
	t, err := gateway.ParseSince(since, time.Now())
	if err != nil {
		return fs.usageError("--%v", err)
	}
	f.Since = t
	return nil
}

func runAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit export", "audit export [-c FILE] [--since 2h|RFC3339] [--server S] [--tool T] [--kind K] [--type T] > audit.jsonl\n\n"+
		"Writes every matching audit record, oldest first, as one JSON object per line, exactly as stored,\n"+
		"so that each line's hash still verifies and the archive can be checked against a retention\n"+
		"checkpoint's digest later. From a running gateway the records come through its admin API, the\n"+
		"same bytes. Export before retention prunes: see \"Audit retention and archiving\" in docs/operations.md.", stdout, stderr)
	o := addOpsFlags(fs)
	f, since := addFilterFlags(fs)
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if err := checkFilter(fs, f, *since); err != nil {
		return err
	}
	acc, err := openAudit(fs, o)
	if err != nil {
		return err
	}
	defer acc.Close()
	acc.warnWALGap(stderr)
	w := bufio.NewWriter(stdout)
	if acc.api != nil {
		err = exportViaAPI(ctx, acc.api, *f, w, stderr)
	} else {
		err = acc.st.AuditExport(*f, func(raw []byte) error {
			if _, err := w.Write(raw); err != nil {
				return err
			}
			return w.WriteByte('\n')
		})
	}
	if err != nil {
		return err
	}
	return w.Flush()
}

// exportViaAPI copies the records as stored from the running gateway's /admin/audit/export. A
// gateway started from an earlier binary has no such route: its records come re-encoded from
// /admin/audit instead, and stderr says that their lines may not re-hash.
func exportViaAPI(ctx context.Context, api *adminClient, f store.AuditFilter, w io.Writer, stderr io.Writer) error {
	resp, err := api.do(ctx, http.MethodGet, "/admin/audit/export?"+auditQuery(f).Encode(), nil)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		fmt.Fprintln(stderr, "warning: the running gateway is older than this command and exports re-encoded records, whose lines may not re-hash; restart it to export the records as stored")
		enc := json.NewEncoder(w)
		return scanViaAPI(ctx, api, f, stderr, func(r store.Record) error { return enc.Encode(r) })
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if missing := resp.Header.Get("X-Audit-Incomplete"); missing != "" {
		fmt.Fprintf(stderr, "warning: %s\n", missing)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the audit records from the admin API at %s: %w", api.base, err)
	}
	return nil
}

// auditQuery is the query of /admin/audit and /admin/audit/export that selects f.
func auditQuery(f store.AuditFilter) url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"server": f.Server, "tool": f.Tool, "kind": f.Kind, "type": f.Type} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// scanViaAPI streams the records the running gateway's /admin/audit selects. When the gateway
// says records are missing (its state file is failing and some are queued), stderr says so.
func scanViaAPI(ctx context.Context, api *adminClient, f store.AuditFilter, stderr io.Writer, fn func(store.Record) error) error {
	resp, err := api.do(ctx, http.MethodGet, "/admin/audit?"+auditQuery(f).Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if missing := resp.Header.Get("X-Audit-Incomplete"); missing != "" {
		fmt.Fprintf(stderr, "warning: %s\n", missing)
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var r store.Record
		err := dec.Decode(&r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the audit records from the admin API at %s: %w", api.base, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// recordPrinter writes records as table rows, a JSON array or JSON lines, remembering the
// first write error.
type recordPrinter struct {
	w      io.Writer
	format string
	enc    *json.Encoder     // -o jsonl
	tw     *tabwriter.Writer // table
	n      int
	err    error
}

func newRecordPrinter(w io.Writer, format string) *recordPrinter {
	p := &recordPrinter{w: w, format: format}
	switch format {
	case formatJSONL:
		p.enc = json.NewEncoder(w)
	case formatTable:
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

func (p *recordPrinter) print(r store.Record) error {
	if p.err != nil {
		return p.err
	}
	switch p.format {
	case formatJSONL:
		p.err = p.enc.Encode(r)
	case formatJSON:
		// Streamed, not collected: an audit log can be long.
		var b []byte
		if b, p.err = json.MarshalIndent(r, "  ", "  "); p.err == nil {
			sep := ",\n  "
			if p.n == 0 {
				sep = "[\n  "
			}
			_, p.err = fmt.Fprintf(p.w, "%s%s", sep, b)
		}
	default:
		if p.n == 0 {
			fmt.Fprintln(p.tw, "TIME\tSEQ\tTYPE\tPRINCIPAL\tSERVER\tTOOL\tOUTCOME\tDURATION\tRUN_ID\tREASON")
		}
		_, p.err = fmt.Fprintf(p.tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Time.UTC().Format("2006-01-02T15:04:05.000Z"), r.Seq, r.Type, orDash(r.Principal), orDash(r.Server),
			orDash(r.Tool), orDash(recordOutcome(r)), recordDuration(r), orDash(r.RunID), oneLine(r.Reason, 60))
	}
	p.n++
	return p.err
}

// flush ends the output: the table's columns, the JSON array's bracket.
func (p *recordPrinter) flush() error {
	switch p.format {
	case formatTable:
		return p.tw.Flush()
	case formatJSON:
		end := "\n]\n"
		if p.n == 0 {
			end = "[]\n"
		}
		_, err := io.WriteString(p.w, end)
		return err
	}
	return nil
}

// recordOutcome is the table's OUTCOME column: a call's outcome, a lockout's kind, an operator's
// action.
func recordOutcome(r store.Record) string {
	switch {
	case (r.Type == store.RecordOperator || r.Type == store.RecordCheckpoint || r.Type == store.RecordApproval) && r.Action != "":
		return r.Action
	case r.Outcome != "":
		return r.Outcome
	}
	return r.Kind
}

func recordDuration(r store.Record) string {
	if r.Type != store.RecordCall {
		return "-"
	}
	d := time.Duration(r.DurationMS * float64(time.Millisecond))
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// oneLine shortens s to n characters on one line, for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// flagGiven reports whether the command line set the flag.
func flagGiven(fs *cmdFlags, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// verifyReport is what `audit verify -o json` prints: the gateway's answer, offline what
// retention has pruned, and the gaps recorded on the chain (audit_gap records: acknowledged
// records before each may have been lost).
type verifyReport struct {
	gateway.VerifyResult
	Pruned *store.Checkpoint `json:"pruned,omitempty"`
	Gaps   []store.AuditGap  `json:"gaps,omitempty"`
}

func runAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit verify", "audit verify [-c FILE] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]\n\n"+
		"Recomputes every audit record's hash and link. Exit 0 when the chain is intact, 1 at the first\n"+
		"record that was changed, removed or replaced.", stdout, stderr)
	o := addOpsFlags(fs)
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	acc, err := openAudit(fs, o)
	if err != nil {
		return err
	}
	defer acc.Close()
	acc.warnWALGap(stderr)
	var rep verifyReport
	res := &rep.VerifyResult
	if acc.api != nil {
		if err := acc.api.getJSON(ctx, "/admin/audit/verify", res); err != nil {
			return err
		}
		err := scanViaAPI(ctx, acc.api, store.AuditFilter{Type: store.RecordAuditGap}, io.Discard, func(r store.Record) error {
			if !res.OK && r.Seq > res.Checked {
				return nil // past the break: not verified
			}
			rep.Gaps = append(rep.Gaps, store.AuditGap{Seq: r.Seq, Kind: r.Kind, Reason: r.Reason})
			return nil
		})
		if err != nil {
			return err
		}
	} else {
		res.Checked, res.Bad, rep.Gaps = acc.st.AuditVerifyGaps()
		res.OK = res.Bad == nil
		if cp, ok, err := acc.st.AuditPruned(); err == nil && ok {
			rep.Pruned = &cp
		}
	}
	if !res.OK && res.Bad == nil {
		res.Bad = &store.VerifyError{Seq: res.Checked + 1, Reason: "the gateway reported a break without saying where"}
	}
	switch {
	case fs.output() != formatTable:
		if err := writeJSON(stdout, fs.output(), rep); err != nil {
			return err
		}
	case res.OK:
		fmt.Fprintf(stdout, "audit log intact: %d records\n", res.Checked)
		if cp := rep.Pruned; cp != nil {
			fmt.Fprintf(stdout, "records %d to %d (%d) were pruned by retention; checkpoint record %d holds their digest %s\n",
				cp.FirstSeq, cp.LastSeq, cp.Count, cp.CheckpointSeq, cp.Digest)
		}
	default:
		fmt.Fprintf(stdout, "audit log broken at record %d: %s (the %d records before it verify)\n", res.Bad.Seq, res.Bad.Reason, res.Checked)
	}
	if fs.output() == formatTable {
		for _, g := range rep.Gaps {
			fmt.Fprintf(stdout, "a gap was recorded at seq %d: %s\n", g.Seq, g.Reason)
		}
	}
	if !res.OK {
		return exitError{1}
	}
	return nil
}

// auditDigest is the answer of /admin/audit/digest, and what `audit digest -o json` prints.
type auditDigest struct {
	Digest string `json:"digest"`
}

// runAuditDigest prints the digest an audit record keeps of the arguments read from stdin, as
// the gateway computes it (a keyed HMAC; store/digest.go), so an operator holding a call's
// original arguments can match them to its record's args_digest.
func runAuditDigest(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("audit digest", "audit digest [-c FILE] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN] < arguments.json\n\n"+
		"Prints the args_digest an audit record holds for a call with exactly these argument bytes (the\n"+
		"arguments object as the client sent it, compacted). The digest is keyed with a secret of the state file, so\n"+
		"a redacted value cannot be guessed from a record or an export.", stdout, stderr)
	o := addOpsFlags(fs)
	fs.addOutput()
	if err := fs.parseNone(args); err != nil {
		return err
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the arguments from stdin: %w", err)
	}
	// Clients send arguments compactly; compacting here makes a pretty-printed file match, and
	// is what carrying the bytes to the admin API as JSON does anyway.
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		fmt.Fprintf(stderr, "mcp-gateway audit digest: the arguments on stdin are not JSON: %v\n", err)
		return exitError{2}
	}
	raw = compact.Bytes()
	acc, err := openAudit(fs, o)
	if err != nil {
		return err
	}
	defer acc.Close()
	var res auditDigest
	if acc.api != nil {
		if err := acc.api.doJSON(ctx, http.MethodPost, "/admin/audit/digest", json.RawMessage(raw), &res); err != nil {
			return err
		}
	} else {
		res.Digest = acc.st.DigestArgs(raw)
	}
	if fs.output() != formatTable {
		return writeJSON(stdout, fs.output(), res)
	}
	fmt.Fprintln(stdout, res.Digest)
	return nil
}

// warnWALGap prints to stderr what opening the state file found wrong with the audit
// write-ahead file, when it may have lost acknowledged records. A command opens it read-only
// and records nothing; the gateway records the gap on the audit log when it starts.
func (a *stateAccess) warnWALGap(stderr io.Writer) {
	if a.st == nil {
		return
	}
	if g := a.st.WALGap(); g != nil {
		fmt.Fprintf(stderr, "warning: %s\nwarning: this command writes nothing; the next start of the gateway records this on the audit log as an %s record\n",
			g.Message, store.RecordAuditGap)
	}
}

// openAudit loads the config the flags name and opens its audit log for reading: through the
// running gateway's admin API, or the state file of a stopped one.
func openAudit(fs *cmdFlags, o *opsFlags) (*stateAccess, error) {
	cfg, err := fs.loadConfig()
	if err != nil {
		return nil, err
	}
	return openState(cfg, o, true)
}
