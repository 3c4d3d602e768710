// Package e2e holds the end-to-end tests and benchmarks: they build the real mcp-gateway binary,
// start it as a child process with a config written into a temporary folder, and drive it with
// real MCP clients over stdio and streamable HTTP, in front of real upstream processes (the
// simulated robot, npm's server-everything and the Go SDK's conformance everything-server).
package e2e
