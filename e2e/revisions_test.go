package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// revisionsConfig is the default config but for the address: gateway.http_mode is not set.
const revisionsConfig = `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
`

// connectHTTPAt connects like connectHTTP, the client asking for protocol revision version.
func connectHTTPAt(t *testing.T, addr string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	return connectHTTPAsAt(t, addr, "", opts, version)
}

// connectHTTPAsAt connects like connectHTTPAs, the client asking for protocol revision version.
func connectHTTPAsAt(t *testing.T, addr, token string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}
	if token != "" {
		transport.HTTPClient = &http.Client{Transport: bearerTransport{token: token}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-client", Version: "1"}, opts)
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect over HTTP at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestEveryRevisionOnTheDefaultConfig: on the default config (no gateway.http_mode) the Go
// SDK's client at each protocol revision it speaks, the TypeScript SDK's client and a bare
// 2026-07-28 request (as the MCP Inspector's modern era sends it, without server/discover) all
// list the tools and call one, on the same /mcp. Revisions up to 2025-11-25 get a session;
// 2026-07-28 gets none, and is not moved down to an older revision.
func TestEveryRevisionOnTheDefaultConfig(t *testing.T) {
	cfg, addr := writeConfig(t, revisionsConfig)
	gw := startGateway(t, cfg, addr)

	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run("go-sdk_"+version, func(t *testing.T) {
			cs := connectHTTPAt(t, addr, nil, version)
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, asked for %s", got, version)
			}
			if hasSession := cs.ID() != ""; hasSession != (version < "2026-07-28") {
				t.Errorf("at %s the session id is %q", version, cs.ID())
			}
			if _, ok := toolNames(t, cs)["robot__get_scene"]; !ok {
				t.Fatalf("at %s robot__get_scene is not listed", version)
			}
			if res, env := call(t, cs, "robot__get_scene", map[string]any{}); env["success"] != true {
				t.Fatalf("at %s get_scene: %s", version, mustJSON(res))
			}
		})
	}

	t.Run("typescript-sdk", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		script, err := filepath.Abs("node/ts-client.mjs")
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "node", script, "http://"+addr+"/mcp", "robot__get_scene")
		cmd.Dir = filepath.Dir(script)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the TypeScript SDK client: %v\n%s", err, stderr.String())
		}
		var seen struct {
			ProtocolVersion string   `json:"protocolVersion"`
			SessionID       string   `json:"sessionId"`
			Tools           []string `json:"tools"`
			Result          struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &seen); err != nil {
			t.Fatalf("the TypeScript SDK client printed %q: %v", out, err)
		}
		if seen.ProtocolVersion == "" || seen.SessionID == "" {
			t.Errorf("the TypeScript SDK client negotiated %q with session %q", seen.ProtocolVersion, seen.SessionID)
		}
		if !slices.Contains(seen.Tools, "robot__get_scene") {
			t.Errorf("the TypeScript SDK client listed %v", seen.Tools)
		}
		if seen.Result.IsError || seen.Result.StructuredContent["success"] != true {
			t.Errorf("the TypeScript SDK client's call: %s", out)
		}
	})

	// What a 2026-07-28 client sends with no handshake at all: the revision in the header and
	// in _meta of every request.
	t.Run("bare-2026-07-28", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bare","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
		for _, tc := range []struct{ method, name, body, want string }{
			{"tools/list", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, `"name":"robot__get_scene"`},
			{"tools/call", "robot__get_scene", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"robot__get_scene","arguments":{},` + meta + `}}`, `"success":true`},
		} {
			code, header, answer := post2026(t, addr, tc.method, tc.name, tc.body)
			if code != http.StatusOK || header.Get("Mcp-Session-Id") != "" || !strings.Contains(answer, tc.want) {
				t.Fatalf("%s: HTTP %d (session %q) %s", tc.body, code, header.Get("Mcp-Session-Id"), answer)
			}
		}
	})

	for _, refusal := range []string{"Unsupported protocol version", "rejecting request with protocol version", "missing_session"} {
		if n := len(lines(gw.stderr.String(), refusal)); n > 0 {
			t.Errorf("the gateway logged %q %d times", refusal, n)
		}
	}
}

// post2026 posts body as a request of MCP 2026-07-28, with its method and name (if not "") in
// the headers that revision requires, and returns the status, headers and the answer (the
// event stream, or the JSON body).
func post2026(t *testing.T, addr, method, name, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestForcedModesStillForceOne: http_mode stateful serves sessions only, and a 2026-07-28
// client moves down to 2025-11-25 through server/discover; http_mode stateless serves no
// sessions, and an older client's initialize is answered without one.
func TestForcedModesStillForceOne(t *testing.T) {
	for _, tc := range []struct {
		mode       string
		newest     string // what a client asking for 2026-07-28 gets
		oldSession bool   // whether a 2025-11-25 client has a session
	}{
		{"stateful", "2025-11-25", true},
		{"stateless", "2026-07-28", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg, addr := writeConfig(t, strings.Replace(revisionsConfig, `listen: "{{listen}}"`, `listen: "{{listen}}", http_mode: `+tc.mode, 1))
			startGateway(t, cfg, addr)
			if got := connectHTTPAt(t, addr, nil, "2026-07-28").InitializeResult().ProtocolVersion; got != tc.newest {
				t.Errorf("a client asking for 2026-07-28 negotiated %s", got)
			}
			old := connectHTTPAt(t, addr, nil, "2025-11-25")
			if (old.ID() != "") != tc.oldSession {
				t.Errorf("a 2025-11-25 client's session id is %q", old.ID())
			}
			if _, env := call(t, old, "robot__get_scene", map[string]any{}); env["success"] != true {
				t.Errorf("a 2025-11-25 client's call: %v", env)
			}
		})
	}
}
