// Package config defines the gateway's YAML configuration file (SPEC §3): its types, their
// defaults, the strict loader that reports every problem with file and line, and the JSON Schema
// of the file.
//
// # The file
//
// One YAML document with two sections:
//
//	gateway:
//	  name: cell-7
//	  listen: 127.0.0.1:8080
//	servers:
//	  - name: arm
//	    command: ./bin/arm-server
//	    physical: true
//	  - name: cloud
//	    url: https://cloud.example/mcp
//	    headers_env: {Authorization: CLOUD_MCP_AUTH}
//
// A server is either a stdio child process (command, with args, cwd and env) or a streamable
// HTTP endpoint (url, with headers_env), never both. Credentials never appear in the file:
// headers_env names the environment variable that holds each header's value, and auth.tokens
// the variable that holds each token. The sections llm and experience of the product are not
// read by this version and are refused with a message saying so.
//
// # Defaults
//
// Parse fills in a default only where the key is absent, so an explicit zero or empty value is
// kept: listen: "" means no HTTP endpoint, timeout_argument_margin_sec: 0 means no margin.
//
//	gateway.name                     mcp-gateway
//	gateway.listen                   127.0.0.1:8080
//	gateway.state_dir                .mcp-gateway
//	gateway.tool_names               prefixed
//	gateway.lockout_scope            global
//	gateway.log_format               text
//	gateway.log_level                info
//	server call_timeout_sec          300
//	server timeout_argument_margin_sec 60
//	server startup_timeout_sec       15
//	server restart_backoff_max_sec   30
//	server queue_size                16
//	server contract                  envelope
//	server tools.include             ["*"]
//
// Relative paths are resolved against the directory of the file, not the working directory of
// the gateway, so a configuration starts the same servers wherever it is run from: state_dir,
// cwd, and a command that contains a slash (./bin/sim-robot, bin/sim-robot). A command without
// a slash (python, node) is left for the PATH lookup at launch.
//
// # Errors
//
// Decoding follows yaml.v3's KnownFields(true) rules, but walks the node tree itself so it can
// go on after a problem: an unknown key (with the closest known key when one is near), a value
// of the wrong type, a duplicate key (with the line of the first), then the checks that need
// the whole file (unique and valid server names, command or url, enumerations, ranges, globs).
// Parse returns all of them at once as *Errors, sorted by line, each formatted as
//
//	robot.yaml:12: servers[1] (arm): unknown key "comand" in a server (did you mean "command"?); known keys: ...
//
// Only a YAML syntax error ends the search early, as one *Errors entry with the parser's line.
package config
