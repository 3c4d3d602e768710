package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// policyTestReport is what `policy test -o json` prints.
type policyTestReport struct {
	Passed   int             `json:"passed"`
	Failed   int             `json:"failed"`
	Failures []policyFailure `json:"failures"`
}

// policyFailure is a test case whose decision differed from the expected one: where it is, what
// it expected, what the rules decided, and the message the table prints.
type policyFailure struct {
	Name         string `json:"name"`
	File         string `json:"file"`
	Line         int    `json:"line,omitempty"`
	Expected     string `json:"expected"`
	ExpectedRule string `json:"expected_rule,omitempty"`
	Got          string `json:"got"`
	GotRule      string `json:"got_rule,omitempty"`
	Message      string `json:"message"`
}

// runPolicy runs `policy test`: policy test cases against the configured rules, the way
// `opa test` runs Rego tests.
func runPolicy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("policy", "policy test TESTFILE... [-c FILE] [-o table|json|jsonl]\n\n"+
		"Runs the test cases of each TESTFILE against the config's policy rules. Exit 1 when a case fails.", stdout, stderr)
	fs.addConfig(": whose policies are tested")
	fs.addOutput()
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || pos[0] != "test" {
		return fs.usageError("policy needs the word test, then one or more test files")
	}
	if len(pos) < 2 {
		return fs.usageError("policy test needs a TESTFILE: a YAML file of test cases")
	}
	cfg, err := fs.loadConfig()
	if err != nil {
		return err
	}
	engine, err := gateway.CompilePolicies(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	rep := policyTestReport{Failures: []policyFailure{}}
	for _, path := range pos[1:] {
		cases, err := policies.LoadTests(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
		for _, f := range policies.RunTests(engine, cases) {
			rep.Failures = append(rep.Failures, policyFailure{
				Name: f.Case.Name, File: f.Case.File, Line: f.Case.Line, Expected: f.Case.Expect.Decision, ExpectedRule: f.Case.Expect.Rule,
				Got: f.Got.Effect, GotRule: f.Got.RuleID, Message: f.Msg,
			})
		}
		rep.Passed += len(cases)
	}
	rep.Failed = len(rep.Failures)
	rep.Passed -= rep.Failed
	if fs.output() != formatTable {
		if err := writeJSON(stdout, fs.output(), rep); err != nil {
			return err
		}
	} else {
		for _, f := range rep.Failures {
			fmt.Fprintf(stdout, "FAIL %s\n", f.Message)
		}
		fmt.Fprintf(stdout, "%d passed, %d failed\n", rep.Passed, rep.Failed)
	}
	if rep.Failed > 0 {
		return exitError{1}
	}
	return nil
}
