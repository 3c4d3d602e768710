package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAgentErrorIsPrintedWithoutTerminalEscapes has the provider refuse the request with an error
// message carrying terminal escapes (clear screen, a window title): the run ends with exit 1, and
// neither the printout on stdout nor the error on stderr passes an escape to the terminal; both
// show it as \x1b.
func TestAgentErrorIsPrintedWithoutTerminalEscapes(t *testing.T) {
	t.Setenv("TEST_AGENT_KEY", "sk-test")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"bad request\u001b[2J\u001b]0;owned\u0007","type":"invalid_request_error"}}`)
	}))
	defer ts.Close()
	r := runAgentCommand(t, fmt.Sprintf("  provider: openai\n  base_url: %q\n  api_key_env: TEST_AGENT_KEY\n", ts.URL))
	if r.code != 1 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for name, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if strings.ContainsAny(text, "\x1b\x07") || !strings.Contains(text, `bad request\x1b[2J\x1b]0;owned\x07`) {
			t.Errorf("%s passes the provider's escapes on, or does not show them:\n%q", name, text)
		}
	}
}
