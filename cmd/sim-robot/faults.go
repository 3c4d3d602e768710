package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// crashExitCode is the status of a process that crashed on purpose.
const crashExitCode = 3

// faultModes are the misbehaviours the fault tool produces. Each breaks one
// rule of SPEC §7 (or the call itself) the way a buggy robot server would.
var faultModes = []string{
	"hang",           // block until cancelled
	"crash",          // exit mid-call, no reply
	"malformed",      // {"success":"yes"}
	"not_json",       // text "ok, done", no structuredContent
	"no_reason",      // {"success":false}
	"empty",          // no content at all
	"missing_run_id", // {"success":true,"observation":"moved"}
	"non_text",       // a single image block
	"is_error",       // isError true with text {"success":true,"observation":"x"}
	"stdout_banner",  // print a line that is not JSON-RPC on stdout, then answer normally
	"invalid_utf8",   // an answer whose text holds bytes that are not UTF-8
}

// onePixelPNG is a valid 1x1 transparent PNG, the image non_text returns.
var onePixelPNG = []byte{
	0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
	0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
	0x89, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x00, 0x02, 0x00,
	0x00, 0x05, 0x00, 0x01, 0x7a, 0x5e, 0xab, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
	0xae, 0x42, 0x60, 0x82,
}

type faultArgs struct {
	Mode string `json:"mode"`
}

func (a faultArgs) validate() error {
	if !slices.Contains(faultModes, a.Mode) {
		return fmt.Errorf("mode must be one of %v, got %q", faultModes, a.Mode)
	}
	return nil
}

// fault is the fault tool: it answers with the misbehaviour named by mode.
func (r *robot) fault(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
	in, err := decodeArgs[faultArgs](req.Params.Arguments)
	if err != nil {
		return failure(fmt.Sprintf("invalid arguments for fault: %v", err)).result()
	}
	switch in.Mode {
	case "hang":
		return r.hang(ctx, "fault", false)
	case "crash":
		r.crash("fault", "mode crash") // does not return
	case "malformed":
		return jsonResult(map[string]any{"success": "yes"})
	case "not_json":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok, done"}}}
	case "no_reason":
		return jsonResult(map[string]any{"success": false})
	case "empty":
		return &mcp.CallToolResult{}
	case "missing_run_id":
		return success("moved").result()
	case "non_text":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: onePixelPNG, MIMEType: "image/png"}}}
	case "is_error":
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: `{"success":true,"observation":"x"}`}},
			IsError: true,
		}
	case "stdout_banner":
		if err := r.out.println(stdoutBanner); err != nil {
			return failure(fmt.Sprintf("could not print the banner: %v", err)).result()
		}
		return success("printed a banner on stdout").result()
	case "invalid_utf8":
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: `{"success":true,"observation":"` + invalidUTF8Marker + `"}`,
		}}}
	}
	panic("sim-robot: fault mode " + in.Mode + " passed validation but has no behaviour")
}

// injected applies the faults the flags ask for to the total-th call, which
// is a call of tool. It returns nil when the call should run normally.
func (r *robot) injected(ctx context.Context, tool string, total int, isPhysical bool) *mcp.CallToolResult {
	switch {
	case r.cfg.crashAfter > 0 && total > r.cfg.crashAfter:
		r.crash(tool, fmt.Sprintf("-crash-after %d", r.cfg.crashAfter))
	case r.cfg.crashOn == tool:
		r.crash(tool, "-crash-on "+tool)
	case r.cfg.hangOn == tool:
		return r.hang(ctx, tool, isPhysical)
	}
	return nil
}

// hang blocks until the call is cancelled (or the process shuts down), and
// counts the cancellation so robot_stats can prove it arrived.
func (r *robot) hang(ctx context.Context, tool string, isPhysical bool) *mcp.CallToolResult {
	r.log.Info("hanging until cancelled", "tool", tool)
	var env envelope
	select {
	case <-ctx.Done():
		// Log before counting: whoever sees the count also finds the line.
		r.log.Info("call cancelled", "tool", tool)
		r.stats.cancel()
		env = failure("the call was cancelled")
	case <-r.done:
		env = failure("the robot is shutting down")
	}
	if isPhysical {
		env = env.with("run_id", r.world.NewRunID())
	}
	return env.result()
}

// crash ends the process mid-call without a reply, as a robot driver that
// segfaults would.
func (r *robot) crash(tool, why string) {
	r.log.Error("crashing on purpose mid-call", "tool", tool, "cause", why)
	os.Exit(crashExitCode)
}

// maxBigResult bounds big_result's size.
const maxBigResult = 1 << 30

type bigResultArgs struct {
	Bytes int `json:"bytes"`
}

func (a bigResultArgs) validate() error {
	if a.Bytes < 0 || a.Bytes > maxBigResult {
		return fmt.Errorf("bytes must be from 0 to %d, got %d", maxBigResult, a.Bytes)
	}
	return nil
}

// bigResult answers with a success envelope whose observation is the requested number of
// bytes, as the JSON text of one block only (no structuredContent), so the message on the wire
// is the observation and about 100 bytes more.
func (r *robot) bigResult(_ context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
	in, err := decodeArgs[bigResultArgs](req.Params.Arguments)
	if err != nil {
		return failure(fmt.Sprintf("invalid arguments for big_result: %v", err)).result()
	}
	text := `{"success":true,"observation":"` + strings.Repeat("x", in.Bytes) + `"}`
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
