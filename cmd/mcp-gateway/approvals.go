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
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/store"
)

// runApprovals lists pending approval requests and answers them. Answers go through the running
// gateway, whose call is waiting; a request of a gateway that stopped has no call left to run.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("approvals", `approvals list|approve ID|deny ID [--reason "…"] [--operator NAME] [-c FILE] [--state STATE|--all] [-o table|json|jsonl] [--addr HOST:PORT] [--token TOKEN]`, stdout, stderr)
	o := addOpsFlags(fs)
	reason := fs.String("reason", "", "why, for the audit log (and, on deny, told to the caller)")
	operator := fs.String("operator", defaultOperator(), "who answers, for the audit log")
	state := fs.String("state", store.ApprovalPending, "list: the requests in this state: all, "+strings.Join(store.ApprovalStates, ", "))
	all := fs.Bool("all", false, "list: every request, as --state all")
	fs.addOutput()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || (pos[0] == "list" && len(pos) != 1) || (pos[0] != "list" && len(pos) != 2) ||
		(pos[0] != "list" && pos[0] != "approve" && pos[0] != "deny") {
		return fs.usageError("approvals needs list, approve ID or deny ID")
	}
	if *all {
		*state = "all"
	}
	if *state != "all" && !slices.Contains(store.ApprovalStates, *state) {
		return fs.usageError("no state %q%s; --state is all or one of %s", *state, didYouMean(*state, store.ApprovalStates), strings.Join(store.ApprovalStates, ", "))
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
			err = acc.api.getJSON(ctx, "/admin/approvals?state="+url.QueryEscape(*state), &list)
		} else {
			in := *state
			if in == "all" {
				in = ""
			}
			list, err = acc.st.ListApprovals(in)
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
		msg := err.Error()
		if !strings.HasPrefix(msg, "approval "+id) {
			msg = fmt.Sprintf("approval %s: %s", id, msg)
		}
		fmt.Fprintf(stderr, "%s%s\n", msg, approvalHint(ctx, acc.api, id, err))
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
// are shown as the audit keeps them (redacted), on one line and cut. -o json has them whole. A
// listing with answered, expired or withdrawn requests says what became of each (OUTCOME).
func printApprovals(w io.Writer, list []store.Approval, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no approval requests")
		return
	}
	outcomes := slices.ContainsFunc(list, func(a store.Approval) bool { return a.State != store.ApprovalPending })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "ID\tSTATE\tEXPIRES IN\tPRINCIPAL\tSESSION\tSERVER\tTOOL\tRULE\tREASON\t"
	if outcomes {
		header += "OUTCOME\t"
	}
	fmt.Fprintln(tw, header+"ARGUMENTS")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", a.ID, a.State, left, oneLine(a.Principal, 40), oneLine(a.Session, 40),
			oneLine(a.Server, 40), a.Tool, a.Rule, oneLine(a.Reason, 40))
		if outcomes {
			fmt.Fprintf(tw, "%s\t", oneLine(outcome(a), 100))
		}
		fmt.Fprintln(tw, oneLine(args, 60))
	}
	tw.Flush()
}

// outcome says what became of a request: who answered and why, or when and why its call was
// withdrawn.
func outcome(a store.Approval) string {
	switch {
	case a.State == store.ApprovalWithdrawn:
		return a.Withdrawn.Local().Format(time.DateTime) + ": " + a.WithdrawReason
	case a.DecidedBy != "":
		verb := "denied"
		if a.State != store.ApprovalDenied {
			verb = "approved" // approved or used
		}
		s := verb + " by " + a.DecidedBy
		if a.DecisionReason != "" {
			s += ": " + a.DecisionReason
		}
		return s
	case a.State == store.ApprovalExpired:
		return "nobody answered"
	}
	return "-"
}
