// Package upstream supervises the MCP servers the gateway fronts and dispatches tool calls to
// them (SPEC.md §4). It knows nothing of governance: what an outcome means for the robot
// (lockouts, envelopes, audit) is the caller's decision; this package reports it precisely.
//
// A [Manager] owns one [Upstream] per configured server, and each Upstream one supervisor
// goroutine. The supervisor starts the server, initializes an MCP client session and lists
// every tool within startup_timeout_sec, then waits for the session to go down: the child
// exits, the connection ends or fails, or (HTTP) a ping every 15 s gets no answer. It then tears
// the session down and starts again after a backoff that starts at 200 ms, doubles up to
// restart_backoff_max_sec, has up to 20% jitter, and starts over once a server stayed ready for
// 30 s. An operator reset ([Upstream.Restart]) skips the backoff.
//
// A stdio server is a child in its own process group (and, on Linux, killed by the kernel if the
// gateway dies). Stopping it closes its stdin, waits 2 s, sends SIGTERM to the group, waits 3 s,
// sends SIGKILL, reaps the child and SIGKILLs whatever is left in its group. Its stderr is logged
// line by line (attribute stream=stderr) and its last 20 lines explain a failure.
//
// [Upstream.Call] is the hot path: on a ready server that is not physical it is one atomic load
// in front of the SDK's own call. A call that arrives while its server is (re)starting waits
// for it within the call's context. A physical server takes one call at a time, in arrival
// order, with at most queue_size waiting.
//
// What a call's error means:
//   - wraps [ErrUnavailable] or [ErrQueueFull]: the call was not sent;
//   - satisfies errors.Is(err, ctx.Err()): ctx ended while the call was in flight and
//     notifications/cancelled was sent to the server;
//   - a [*CallError] with Crashed set: the connection was lost while the call was in flight, so
//     whether the tool ran is unknown, and the server is being restarted;
//   - any other [*CallError]: the server answered with a protocol error.
//
// With Options.Telemetry set, a call carries the trace context of the gateway's span in its
// _meta, and to an HTTP server in its headers too, so that the server's spans nest under the
// gateway's (trace.go).
//
// Either kind of CallError may wrap an [*OutputError]: the server's answer was refused as it was
// read (over max_result_bytes, not UTF-8, not JSON-RPC), so the call was sent and its result is
// lost. A stdio server's stdout is read by stdioTransport (stdio.go), an HTTP server's bodies
// through boundedBody (http.go).
//
// Process groups and signals make the package Unix-only.
package upstream
