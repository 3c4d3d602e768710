package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayKilledDuringAPhysicalCallLocksOut: the gateway is SIGKILLed while a physical call is
// in flight, so it cannot record the lockout the unknown outcome calls for; its journal makes the
// next start do it.
func TestGatewayKilledDuringAPhysicalCallLocksOut(t *testing.T) {
	cfg, addr := writeConfig(t, `
gateway: {listen: "{{listen}}"}
servers:
  - name: robot
    command: "{{sim}}"
    args: ["-name", "{{marker}}"]
    physical: true
    call_timeout_sec: 60
`)
	gw := startGateway(t, cfg, addr)
	cs := connectHTTP(t, addr, nil)
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "robot__wait", Arguments: map[string]any{"timeout_sec": 30}})
	}()
	time.Sleep(700 * time.Millisecond) // the call is in flight
	if err := gw.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-gw.done
	waitNoProcesses(t, marker(t), 10*time.Second)

	st := statusJSON(t, cfg)
	if len(st.Lockouts) != 1 || st.Lockouts[0].Server != "robot" || st.Lockouts[0].Tool != "robot__wait" {
		t.Fatalf("after the crash: %+v", st)
	}
	gw2 := startGateway(t, cfg, addr)
	_ = gw2
	cs2 := connectHTTP(t, addr, nil)
	if _, env := call(t, cs2, "robot__get_scene", map[string]any{}); env["kind"] != "mcp_execution_status_unknown" {
		t.Fatalf("a physical call after the restart must be refused: %v", env)
	}
}
