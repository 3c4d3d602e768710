package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The schema server is a small stdio MCP server with input schemas the simulated robot does not
// have (patterns, nested arrays of objects, a "$ref" to a local file). It runs inside this test
// binary: a gateway under test launches os.Executable() with schemaServerEnv=1 in the server's
// env, and init serves MCP instead of running tests. It is init rather than TestMain because
// TestMain must build the binaries first, and the server needs none of that.
const (
	schemaServerEnv = "E2E_SCHEMA_SERVER"
	// schemaRecordEnv names a file that gets one {"tool", "args"} line per call that reached
	// the server, written before it answers.
	schemaRecordEnv = "E2E_SCHEMA_RECORD"
	// schemaRefFileEnv names the real schema file the poisoned tool's "$ref" points at.
	schemaRefFileEnv = "E2E_SCHEMA_REF_FILE"
)

func init() {
	if os.Getenv(schemaServerEnv) == "1" {
		os.Exit(runSchemaServer())
	}
}

// moveSchema has every kind of constraint the gateway must report: required properties, types,
// an enum, a pattern, additionalProperties at two levels and an array of objects.
const moveSchema = `{
  "type": "object",
  "properties": {
    "target": {"type": "string", "pattern": "^[a-z_]+$", "description": "place name, lower case"},
    "frame": {"type": "string"},
    "mode": {"enum": ["fast", "careful"]},
    "speed": {"type": "number", "maximum": 1.5},
    "waypoints": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
        "additionalProperties": false
      }
    }
  },
  "required": ["target", "frame", "mode"],
  "additionalProperties": false
}`

// loginSchema takes credentials, so that the audit log's redaction can be checked on a call
// that succeeds.
const loginSchema = `{
  "type": "object",
  "properties": {
    "user": {"type": "string"},
    "password": {"type": "string"},
    "options": {"type": "object"}
  },
  "required": ["user", "password"]
}`

// refFileSchema is what the poisoned tool's "$ref" file holds: a valid schema, so the only
// reason the tool's schema fails is that the gateway does not follow references to files.
const refFileSchema = `{"type": "object", "properties": {"x": {"type": "number"}}}`

func runSchemaServer() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rec struct {
		sync.Mutex
		f *os.File
	}
	if path := os.Getenv(schemaRecordEnv); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "schema server:", err)
			return 1
		}
		defer f.Close()
		rec.f = f
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "e2e-schema-server", Version: "1"}, nil)
	handler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if rec.f != nil {
			line, _ := json.Marshal(map[string]any{"tool": req.Params.Name, "args": req.Params.Arguments})
			rec.Lock()
			_, _ = rec.f.Write(append(line, '\n'))
			rec.Unlock()
		}
		env := map[string]any{"success": true, "observation": req.Params.Name + " done"}
		text, _ := json.Marshal(env)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: env}, nil
	}
	ref := os.Getenv(schemaRefFileEnv)
	poisoned := fmt.Sprintf(`{"type": "object", "properties": {"pose": {"$ref": %q}}}`, "file://"+ref)
	for _, t := range []struct{ name, schema string }{
		{"move", moveSchema},
		{"login", loginSchema},
		{"poisoned", poisoned},
	} {
		srv.AddTool(&mcp.Tool{Name: t.name, Description: "e2e " + t.name, InputSchema: json.RawMessage(t.schema)}, handler)
	}
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "schema server:", err)
		return 1
	}
	return 0
}

// schemaServer is the config entry of a schema server named name, launched from this test
// binary. record and refFile are the files of schemaRecordEnv and schemaRefFileEnv; extra is
// appended to the entry (indented YAML).
func schemaServer(t *testing.T, name, record, refFile, extra string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(refFile, []byte(refFileSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
  - name: %s
    command: %q
    args: ["{{marker}}-%s"]
    env: {%s: "1", %s: %q, %s: %q}
%s`, name, self, name, schemaServerEnv, schemaRecordEnv, record, schemaRefFileEnv, refFile, extra)
}
