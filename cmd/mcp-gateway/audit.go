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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// defaultTableLimit is how many records the audit table shows without --limit: the recent tail.
const defaultTableLimit = 20

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
	fs := newFlags("audit", "audit -c FILE [--server S] [--tool T] [--kind K] [--type T] [--since 2h|RFC3339] [--limit N] [--jsonl]\n"+
		"       mcp-gateway audit export -c FILE [--since 2h|RFC3339] [filters] > audit.jsonl\n"+
		"       mcp-gateway audit verify -c FILE\n"+
		"       mcp-gateway audit digest -c FILE < arguments.json\n\n"+
		"Prints the audit log's records, oldest first, as a table or as JSON lines with every field.\n"+
		"\"audit export\" writes every matching record as one JSON line, for an archive kept before retention\n"+
		"prunes the oldest records. \"audit verify\" checks the hash chain and names the first record that\n"+
		"does not verify.", stderr)
	o := addOpsFlags(fs)
	f, since := addFilterFlags(fs)
	limit := fs.Int("limit", defaultTableLimit, "show only the last `N` matching records, 0 = all; with --jsonl and no --limit, all")
	jsonl := fs.Bool("jsonl", false, "print every field of each record as one JSON object per line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitError{2}
	}
	if *limit < 0 {
		fmt.Fprintln(stderr, "--limit must be 0 (all) or a number of records")
		return exitError{2}
	}
	f.Limit = *limit
	if *jsonl && !flagGiven(fs, "limit") {
		f.Limit = 0
	}
	if err := parseSince(f, *since, stderr); err != nil {
		return err
	}
	acc, err := o.openAudit(fs, stderr)
	if err != nil {
		return err
	}
	defer acc.Close()

	out := newRecordPrinter(stdout, *jsonl)
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
	if !*jsonl {
		switch {
		case out.n == 0:
			fmt.Fprintln(stderr, "no audit records match")
		case f.Limit > 0 && out.n == f.Limit:
			fmt.Fprintf(stderr, "(the last %d matching records; --limit N for more, --limit 0 for all)\n", out.n)
		}
	}
	return nil
}

// addFilterFlags adds the record filters shared by audit and audit export; since is parsed by
// parseSince after the flags.
func addFilterFlags(fs *flag.FlagSet) (*store.AuditFilter, *string) {
	f := &store.AuditFilter{}
	fs.StringVar(&f.Server, "server", "", "only records of this server")
	fs.StringVar(&f.Tool, "tool", "", "only records of this public tool name")
	fs.StringVar(&f.Kind, "kind", "", "only records with this failure kind (unknown_tool, invalid_tool_arguments, mcp_execution_status_unknown, ...)")
	fs.StringVar(&f.Type, "type", "", "only records of this type: call, lockout, operator, approval or checkpoint")
	since := fs.String("since", "", "only records from `TIME` on: a duration back from now (2h) or an RFC 3339 time")
	return f, since
}

// parseSince sets f.Since from the --since flag (exit 2 with the problem when it does not parse).
func parseSince(f *store.AuditFilter, since string, stderr io.Writer) error {
	if since == "" {
		return nil
	}
	t, err := gateway.ParseSince(since, time.Now())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{2}
	}
	f.Since = t
	return nil
}

func runAuditExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit export", "audit export -c FILE [--since 2h|RFC3339] [--server S] [--tool T] [--kind K] [--type T] > audit.jsonl\n\n"+
		"Writes every matching audit record, oldest first, as one JSON object per line with every field.\n"+
		"Read from the state file (gateway stopped), each line is the record exactly as stored, so its hash\n"+
		"still verifies and the archive can be checked against a retention checkpoint's digest later; from\n"+
		"a running gateway the records come through its admin API. Export before retention prunes: see\n"+
		"\"Audit retention and archiving\" in docs/operations.md.", stderr)
	o := addOpsFlags(fs)
	f, since := addFilterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitError{2}
	}
	if err := parseSince(f, *since, stderr); err != nil {
		return err
	}
	acc, err := o.openAudit(fs, stderr)
	if err != nil {
		return err
	}
	defer acc.Close()
	w := bufio.NewWriter(stdout)
	if acc.api != nil {
		enc := json.NewEncoder(w)
		err = scanViaAPI(ctx, acc.api, *f, stderr, func(r store.Record) error { return enc.Encode(r) })
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

// scanViaAPI streams the records the running gateway's /admin/audit selects. When the gateway
// says records are missing (its state file is failing and some are queued), stderr says so.
func scanViaAPI(ctx context.Context, api *adminClient, f store.AuditFilter, stderr io.Writer, fn func(store.Record) error) error {
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
	resp, err := api.do(ctx, http.MethodGet, "/admin/audit?"+q.Encode(), nil)
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

// recordPrinter writes records as table rows or JSON lines, remembering the first write error.
type recordPrinter struct {
	enc *json.Encoder     // --jsonl
	tw  *tabwriter.Writer // table
	n   int
	err error
}

func newRecordPrinter(w io.Writer, jsonl bool) *recordPrinter {
	if jsonl {
		return &recordPrinter{enc: json.NewEncoder(w)}
	}
	return &recordPrinter{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

func (p *recordPrinter) print(r store.Record) error {
	if p.err != nil {
		return p.err
	}
	if p.enc != nil {
		p.err = p.enc.Encode(r)
	} else {
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

func (p *recordPrinter) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
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
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func runAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit verify", "audit verify -c FILE [--addr HOST:PORT] [--token TOKEN]\n\n"+
		"Recomputes every audit record's hash and link. Exit 0 when the chain is intact, 1 at the first\n"+
		"record that was changed, removed or replaced.", stderr)
	o := addOpsFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitError{2}
	}
	acc, err := o.openAudit(fs, stderr)
	if err != nil {
		return err
	}
	defer acc.Close()
	var res gateway.VerifyResult
	if acc.api != nil {
		if err := acc.api.getJSON(ctx, "/admin/audit/verify", &res); err != nil {
			return err
		}
	} else {
		res.Checked, res.Bad = acc.st.AuditVerify()
		res.OK = res.Bad == nil
	}
	if res.OK {
		fmt.Fprintf(stdout, "audit log intact: %d records\n", res.Checked)
		if acc.st != nil {
			if cp, ok, err := acc.st.AuditPruned(); err == nil && ok {
				fmt.Fprintf(stdout, "records %d to %d (%d) were pruned by retention; checkpoint record %d holds their digest %s\n",
					cp.FirstSeq, cp.LastSeq, cp.Count, cp.CheckpointSeq, cp.Digest)
			}
		}
		return nil
	}
	if res.Bad == nil {
		res.Bad = &store.VerifyError{Seq: res.Checked + 1, Reason: "the gateway reported a break without saying where"}
	}
	fmt.Fprintf(stdout, "audit log broken at record %d: %s (the %d records before it verify)\n", res.Bad.Seq, res.Bad.Reason, res.Checked)
	return exitError{1}
}

// auditDigest is the answer of /admin/audit/digest.
type auditDigest struct {
	Digest string `json:"digest"`
}

// runAuditDigest prints the digest an audit record keeps of the arguments read from stdin, as
// the gateway computes it (a keyed HMAC; store/digest.go), so an operator holding a call's
// original arguments can match them to its record's ArgsDigest.
func runAuditDigest(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("audit digest", "audit digest -c FILE [--addr HOST:PORT] [--token TOKEN] < arguments.json\n\n"+
		"Prints the ArgsDigest an audit record holds for a call with exactly these argument bytes (the\n"+
		"arguments object as the client sent it, compacted). The digest is keyed with a secret of the state file, so\n"+
		"a redacted value cannot be guessed from a record or an export.", stderr)
	o := addOpsFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitError{2}
	}
	raw, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the arguments from stdin: %w", err)
	}
	// Clients send arguments compactly; compacting here makes a pretty-printed file match, and
	// is what carrying the bytes to the admin API as JSON does anyway.
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		fmt.Fprintf(stderr, "the arguments on stdin are not JSON: %v\n", err)
		return exitError{2}
	}
	raw = compact.Bytes()
	acc, err := o.openAudit(fs, stderr)
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
	fmt.Fprintln(stdout, res.Digest)
	return nil
}

// openAudit loads the config the flags name and opens its audit log for reading: through the
// running gateway's admin API, or the state file of a stopped one.
func (o *opsFlags) openAudit(fs *flag.FlagSet, stderr io.Writer) (*stateAccess, error) {
	cfg, err := o.loadConfig(fs, stderr)
	if err != nil {
		return nil, err
	}
	return openState(cfg, o, true)
}
