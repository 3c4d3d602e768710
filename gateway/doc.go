// Package gateway is the MCP server that agents talk to. It starts the upstream servers, keeps
// the flat tool catalog of SPEC.md §5 in step with what they list, serves it over stdio and
// streamable HTTP, and hands every tools/call to the governed call chain of package governor.
package gateway
