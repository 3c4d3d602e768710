package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// runApprovals lists pending approval requests and answers them. Answers go through the running
// gateway, whose call is waiting; a request of a gateway that stopped has no call left to run.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("approvals", `approvals list|approve ID|deny ID [--reason "…"] [--operator NAME] [-c FILE] [--all] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]`, stdout, stderr)
	o := addOpsFlags(fs)
	reason := fs.String("reason", "", "why, for the audit log (and, on deny, told to the caller)")
	operator := fs.String("operator", defaultOperator(), "who answers, for the audit log")
	all := fs.Bool("all", false, "list: every request, not only pending ones")
	fs.addOutput()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || (pos[0] == "list" && len(pos) != 1) || (pos[0] != "list" && len(pos) != 2) ||
		(pos[0] != "list" && pos[0] != "approve" && pos[0] != "deny") {
		return fs.usageError("approvals needs list, approve ID or deny ID")
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	format := fs.output()
	acc, err := openState(cfg, o, true)
	if errors.Is(err, errNoStateFile) {
		if format != formatTable && pos[0] == "list" {
			_ = writeList[store.Approval](stdout, format, nil)
			fmt.Fprintln(stderr, "note: no gateway has run with this state directory")
			return nil
		}
		fmt.Fprintln(stdout, "no approval requests: no gateway has run with this state directory")
		return nil
	}
	if err != nil {
		return err
	}
	defer acc.Close()

	if pos[0] == "list" {
		var list []store.Approval
		if acc.api != nil {
			q := ""
			if *all {
				q = "?state=all"
			}
			err = acc.api.getJSON(ctx, "/admin/approvals"+q, &list)
		} else {
			state := store.ApprovalPending
			if *all {
				state = ""
			}
			list, err = acc.st.ListApprovals(state)
			fmt.Fprintln(stderr, "note: no gateway is running, so no call is waiting on these requests")
		}
		if err != nil {
			return err
		}
		if format != formatTable {
			return writeList(stdout, format, list)
		}
		printApprovals(stdout, list, time.Now())
		return nil
	}

	if acc.api == nil {
		fmt.Fprintln(stderr, "no gateway is running: the call that asked for this approval is gone, so there is nothing to approve or deny")
		return exitError{1}
	}
	id, approve := pos[1], pos[0] == "approve"
	var got store.Approval
	err = acc.api.doJSON(ctx, http.MethodPost, "/admin/approvals/"+url.PathEscape(id)+"/"+pos[0],
		gateway.DecisionRequest{Reason: *reason, Operator: strings.TrimSpace(*operator)}, &got)
	if err != nil {
		fmt.Fprintf(stderr, "approval %s: %v%s\n", id, err, approvalHint(ctx, acc.api, id, err))
		return exitError{1}
	}
	if format != formatTable {
		return writeJSON(stdout, format, got)
	}
	if approve {
		fmt.Fprintf(stdout, "approved %s: %s may now call %s once.\n", id, got.Principal, got.Tool)
	} else {
		fmt.Fprintf(stdout, "denied %s: the call to %s by %s was refused.\n", id, got.Tool, got.Principal)
	}
	return nil
}

// printApprovals prints one row per request with what a person needs to decide; the arguments
// are shown as the audit keeps them (redacted), on one line and cut. -o json has them whole.
func printApprovals(w io.Writer, list []store.Approval, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no approval requests")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tEXPIRES IN\tPRINCIPAL\tSESSION\tSERVER\tTOOL\tRULE\tREASON\tARGUMENTS")
	for _, a := range list {
		left := "-"
		if a.State == store.ApprovalPending {
			left = max(a.Expires.Sub(now), 0).Round(time.Second).String()
		}
		args := string(a.Args)
		var compact bytes.Buffer
		if json.Compact(&compact, a.Args) == nil {
			args = compact.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.State, left, oneLine(a.Principal, 40), oneLine(a.Session, 40),
			oneLine(a.Server, 40), a.Tool, a.Rule, oneLine(a.Reason, 40), oneLine(args, 60))
	}
	tw.Flush()
}
