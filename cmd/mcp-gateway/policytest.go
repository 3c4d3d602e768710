package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcp-gateway/mcp-gateway/gateway"
	"github.com/mcp-gateway/mcp-gateway/policies"
)

// runPolicy runs `policy test`: policy test cases against the configured rules, the way
// `opa test` runs Rego tests.
func runPolicy(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("policy", "policy test -c FILE TESTFILE...", stderr)
	file := fs.String("c", "", "config file whose policies are tested (required)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 || pos[0] != "test" || *file == "" {
		fs.Usage()
		return exitError{2}
	}
	cfg, err := loadConfig(fs, *file, stderr)
	if err != nil {
		return err
	}
	engine, err := gateway.CompilePolicies(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{1}
	}
	total, failed := 0, 0
	for _, path := range pos[1:] {
		cases, err := policies.LoadTests(path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{1}
		}
		for _, f := range policies.RunTests(engine, cases) {
			failed++
			fmt.Fprintf(stdout, "FAIL %s\n", f.Msg)
		}
		total += len(cases)
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", total-failed, failed)
	if failed > 0 {
		return exitError{1}
	}
	return nil
}
