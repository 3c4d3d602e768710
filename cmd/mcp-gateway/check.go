package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mcp-gateway/mcp-gateway/config"
	"github.com/mcp-gateway/mcp-gateway/gateway"
)

func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", "check -c FILE", stderr)
	file := fs.String("c", "", "config file (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(fs, *file, stderr)
	if err != nil {
		return err
	}
	engine, err := gateway.CompilePolicies(cfg)
	_, guardErr := gateway.BuildGuards(cfg)
	if err != nil || guardErr != nil {
		for _, e := range []error{err, guardErr} {
			if e != nil {
				fmt.Fprintln(stderr, e)
			}
		}
		return exitError{1}
	}
	fmt.Fprintf(stdout, "%s: ok (%d servers, tool names %s, %d policy rules, default %s)\n",
		*file, len(cfg.Servers), cfg.Gateway.ToolNames, len(engine.Rules()), cfg.Policies.Default)
	return nil
}

func runSchema(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("schema", "schema", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := config.JSONSchema()
	if err != nil {
		return err
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "mcp-gateway", gateway.Version)
	return nil
}
